//! The control socket's client: [`Client`] has one method per `drover ctl` subcommand and
//! blocks (it runs its own small tokio runtime for hyper). `drover ctl` itself is
//! [`super`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;

use drover::control::Format;

/// The master answered, but with an error (bad key or value, unknown pool, reload failed).
pub const EXIT_REFUSED: u8 = 1;
/// No answer at all: no socket configured, nobody listening, or a timeout.
pub const EXIT_UNREACHABLE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("cannot reach drover at {}: {source} (is it running, with this [control] listen?)", socket.display())]
    Unreachable {
        socket: PathBuf,
        source: std::io::Error,
    },
    #[error("drover at {} did not answer within {}", socket.display(), humantime::format_duration(*timeout))]
    Timeout { socket: PathBuf, timeout: Duration },
    #[error("talking to drover at {}: {message}", socket.display())]
    Protocol { socket: PathBuf, message: String },
    /// The master's own words.
    #[error("{message}")]
    Refused { status: u16, message: String },
}

/// One HTTP answer, whatever its status.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<String>,
    pub allow: Option<String>,
    pub body: String,
}

/// A blocking client of one control socket (or a unix `status_listen`).
#[derive(Debug, Clone)]
pub struct Client {
    socket: PathBuf,
    timeout: Duration,
}

impl Client {
    pub fn new(socket: impl Into<PathBuf>) -> Client {
        Client {
            socket: socket.into(),
            timeout: Duration::from_secs(60),
        }
    }

    pub fn with_timeout(self, timeout: Duration) -> Client {
        Client { timeout, ..self }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn ping(&self) -> Result<String, CtlError> {
        self.call("GET", "/ping".into(), String::new())
    }

    pub fn status(
        &self,
        pool: Option<&str>,
        format: Format,
        full: bool,
    ) -> Result<String, CtlError> {
        let mut query: Vec<String> = pool
            .map(|p| format!("pool={}", encode(p)))
            .into_iter()
            .collect();
        if format != Format::Text {
            query.push(format!("format={}", format.name()));
        }
        if full {
            query.push("full".into());
        }
        let target = if query.is_empty() {
            "/status".into()
        } else {
            format!("/status?{}", query.join("&"))
        };
        self.call("GET", target, String::new())
    }

    pub fn config(&self, pool: Option<&str>) -> Result<String, CtlError> {
        self.call("GET", with_pool("/config", pool), String::new())
    }

    pub fn set(&self, pool: &str, changes: &[(String, String)]) -> Result<String, CtlError> {
        let body: String = changes
            .iter()
            .map(|(key, value)| format!("{key}={value}\n"))
            .collect();
        self.call("POST", format!("/pools/{}/set", encode(pool)), body)
    }

    /// Renews every pool, or `pool`; with `changed`, only if its configuration changed.
    pub fn reload(&self, pool: Option<&str>, changed: bool) -> Result<String, CtlError> {
        let mut path = with_pool("/reload", pool);
        if changed {
            path.push(if pool.is_some() { '&' } else { '?' });
            path.push_str("changed");
        }
        self.call("POST", path, String::new())
    }

    pub fn workers(&self, pool: &str, delta: i32) -> Result<String, CtlError> {
        self.call(
            "POST",
            format!("/pools/{}/workers", encode(pool)),
            format!("{delta:+}"),
        )
    }

    /// The body of a 2xx answer (a JSON `message` unwrapped); the master's error otherwise.
    fn call(&self, method: &str, target: String, body: String) -> Result<String, CtlError> {
        let answer = self.request(method, &target, body)?;
        let json: Option<serde_json::Value> = answer
            .content_type
            .as_deref()
            .filter(|t| t.starts_with("application/json"))
            .and_then(|_| serde_json::from_str(&answer.body).ok());
        let field = |name| {
            json.as_ref()
                .and_then(|v| v.get(name))
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        };
        if (200..300).contains(&answer.status) {
            return Ok(field("message").unwrap_or(answer.body));
        }
        let message = field("error")
            .unwrap_or_else(|| format!("HTTP {}: {}", answer.status, answer.body.trim()));
        Err(CtlError::Refused {
            status: answer.status,
            message,
        })
    }

    /// Sends one request and reads the whole answer. Blocks; must not be called from
    /// within a tokio runtime.
    pub fn request(&self, method: &str, target: &str, body: String) -> Result<Answer, CtlError> {
        let protocol = |message: String| CtlError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| protocol(format!("cannot start a runtime: {e}")))?;
        let exchange = self.exchange(method, target, body);
        match runtime.block_on(async { tokio::time::timeout(self.timeout, exchange).await }) {
            Ok(answer) => answer,
            Err(_) => Err(CtlError::Timeout {
                socket: self.socket.clone(),
                timeout: self.timeout,
            }),
        }
    }

    async fn exchange(&self, method: &str, target: &str, body: String) -> Result<Answer, CtlError> {
        let protocol = |message: String| CtlError::Protocol {
            socket: self.socket.clone(),
            message,
        };
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|source| CtlError::Unreachable {
                socket: self.socket.clone(),
                source,
            })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| protocol(e.to_string()))?;
        // Drives the connection's I/O while send_request waits; ends with the connection.
        tokio::spawn(connection);
        let request = Request::builder()
            .method(method)
            .uri(target)
            // HTTP/1.1 requires a Host; a unix socket has no name to put there.
            .header(hyper::header::HOST, "localhost")
            .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| protocol(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| protocol(e.to_string()))?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let (content_type, allow) = (
            header(hyper::header::CONTENT_TYPE),
            header(hyper::header::ALLOW),
        );
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| protocol(e.to_string()))?
            .to_bytes();
        Ok(Answer {
            status,
            content_type,
            allow,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

fn with_pool(path: &str, pool: Option<&str>) -> String {
    match pool {
        Some(pool) => format!("{path}?pool={}", encode(pool)),
        None => path.to_owned(),
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters, so a pool name is one
/// path segment or one query value whatever it holds.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_into_one_segment() {
        assert_eq!(encode("www"), "www");
        assert_eq!(encode("a/b c+d%"), "a%2Fb%20c%2Bd%25");
        assert_eq!(
            with_pool("/reload", Some("x&y=z")),
            "/reload?pool=x%26y%3Dz"
        );
    }
}
