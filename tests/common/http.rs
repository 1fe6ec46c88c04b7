//! HTTP through nginx. A 4xx/5xx is a reply like any other, so a 502 shows up as a failed
//! request in the test's assertion, with its body; only a transport failure panics.

use std::time::Duration;

use ureq::Agent;

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

fn agent() -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        // Loopback only: an HTTP_PROXY in the environment must not apply.
        .proxy(None)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

pub fn get(url: &str) -> Reply {
    reply(url, agent().get(url).call())
}

pub fn post(url: &str, content_type: &str, body: &[u8]) -> Reply {
    reply(
        url,
        agent()
            .post(url)
            .header("Content-Type", content_type)
            .send(body),
    )
}

fn reply(url: &str, result: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Reply {
    let mut response = result.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = response.status().as_u16();
    let body = response
        .body_mut()
        .read_to_string()
        .unwrap_or_else(|e| panic!("{url}: body: {e}"));
    Reply { status, body }
}
