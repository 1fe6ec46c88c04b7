//! The keys only an HTTP pool reads (`protocol = "http"`): its listener's (`Http`) and
//! its TLS's (`Tls`), keys of a pool file's top level whose rows follow `protocol`'s
//! (`Pool`'s `http` field), each declared with the field it fills (`keys!`,
//! `keys/declare.rs`).

use std::path::PathBuf;
use std::time::Duration;

use drover_proto::tls::CertReqs;

use crate::keys::Default::{Unset, Value};
use crate::keys::{Choice, Runtimes, Section, Type, http, keys, refused};
use crate::show::{Shown, Shows, Size};
use crate::value::Table;

keys! {
    /// An HTTP pool's settings (gunicorn's names and defaults where it has them): keys of a
    /// pool file's top level that only an HTTP pool reads.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Http: Section::Pool, given HttpGiven {
        /// How long a kept connection may idle between requests (gunicorn's `keepalive`, 2 s).
        // gunicorn's `keepalive` default.
        pub keepalive_timeout: Duration = [http(
            "keepalive_timeout",
            Type::Duration,
            Value("\"2s\""),
            "How long a kept connection may idle between requests (gunicorn's `keepalive`).",
        )] => read(value), show(of);
        /// Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or "*".
        pub forwarded_allow_ips: Vec<String> = [http(
            "forwarded_allow_ips",
            Type::Strings,
            Value("[\"127.0.0.1\", \"::1\"]"),
            "Peers whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses, or \
             `\"*\"`.",
        )] => read(given), show(of);
        /// Larger request bodies are refused with 413; None: no bound.
        pub max_request_body: Option<u64> = [http(
            "max_request_body",
            Type::Size,
            Unset,
            "A larger request body is refused with 413; none: no bound.",
        )] => read(optional), show(show_max_request_body);
        /// ASGI pools: the largest WebSocket message taken (uvicorn's `--ws-max-size`, 16 MiB);
        /// a larger one, or a frame that declares more, closes the WebSocket with 1009.
        // uvicorn's `--ws-max-size` default.
        pub ws_max_size: u64 = [refused(
            http(
                "ws_max_size",
                Type::Size,
                Value("\"16MiB\""),
                "The largest WebSocket message taken (uvicorn's `--ws-max-size`); a larger one \
                 closes the WebSocket with 1009.",
            ),
            &[(
                Runtimes::WSGI,
                "only for interface = \"asgi\" (WebSockets are served to ASGI apps only)",
            )],
        )] => read(value), show(show_ws_max_size);
        /// A response write that makes no progress this long ends the connection (nginx's
        /// `send_timeout`): a client that reads nothing does not hold a worker forever.
        // nginx's `send_timeout` default.
        pub send_timeout: Duration = [http(
            "send_timeout",
            Type::Duration,
            Value("\"1m\""),
            "A response write that makes no progress this long ends the connection (nginx's \
             `send_timeout`); more than 0s.",
        )] => read(send_timeout), show(of);
        /// `certfile`: the listener speaks TLS; None: plain HTTP.
        pub tls: Option<Tls> = [] + Tls::ROWS => read(given), show(show_tls);
    }
}

keys! {
    /// An HTTP pool's TLS: the files as the master read them at load (a reload reads them
    /// again, so that a renewed certificate changes the pool and its next generation serves
    /// it), and the settings. Built by `tls.rs`, which reads every key.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Tls: Section::Pool, given TlsGiven {
        pub certfile: PathBuf = [http(
            "certfile",
            Type::Path,
            Unset,
            "The listener speaks TLS (HTTPS) with this PEM certificate, then its chain \
             (gunicorn's `certfile`); read by the master at load and on reload.",
        )] => read(given), show(of);
        /// None: the key is in certfile.
        pub keyfile: Option<PathBuf> = [http(
            "keyfile",
            Type::Path,
            Unset,
            "certfile's PEM private key (gunicorn's `keyfile`); may be root's alone, 0600: the \
             master reads it; unset: the key in certfile.",
        )] => read(given), show(show_keyfile);
        pub ca_certs: Option<PathBuf> = [http(
            "ca_certs",
            Type::Path,
            Unset,
            "PEM certificates of the authorities a client certificate must chain to \
             (gunicorn's `ca_certs`).",
        )] => read(given), show(optional);
        pub settings: drover_proto::tls::Settings = [
            http(
                "cert_reqs",
                Type::Choice(CertReqs::NAMES),
                Value("\"none\""),
                "Client certificates (gunicorn's `cert_reqs`, Python's `CERT_NONE`, \
                 `CERT_OPTIONAL`, `CERT_REQUIRED`): not asked for, checked when sent, or required.",
            ),
            http(
                "ciphers",
                Type::Strings,
                Unset,
                "The TLS cipher suites offered, by IANA name (`\"TLS13_AES_128_GCM_SHA256\"`); \
                 unset: rustls's defaults. A name rustls lacks is refused.",
            ),
            http(
                "ssl_version",
                Type::String,
                Value("\"TLSv1.2\""),
                "The lowest TLS version taken: `\"TLSv1.2\"` or `\"TLSv1.3\"` (rustls speaks \
                 no older one).",
            ),
        ] => read(given), show(show_tls_settings);
        /// What the files held (the key is not printed by Debug).
        pub material: drover_proto::tls::Material => read(given);
    }
}

// The rules on a key's own value, applied as it is read (`read(FUNCTION)`).

/// `send_timeout`: a write that may make no progress for no time would end every response.
fn send_timeout(root: &Table<'_, '_>) -> Option<Duration> {
    let timeout: Option<Duration> = root.value("send_timeout");
    if timeout.is_some_and(|timeout| timeout.is_zero()) {
        root.fail("send_timeout", "must be more than 0s");
    }
    timeout
}

// What `drover -t` shows for the keys whose declaration names a hook (`show(FUNCTION)`):
// each answers for its entry's rows, as `(struct, key)`.

fn show_max_request_body<'a>(http: &'a Http, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        http.max_request_body.map(Size).as_ref(),
        "no limit",
    ))
}

fn show_ws_max_size<'a>(http: &'a Http, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::of(&Size(http.ws_max_size)))
}

fn show_tls<'a>(http: &'a Http, key: &str) -> Option<Shown<'a>> {
    match &http.tls {
        Some(tls) => tls.shown(key),
        None => Some(Shown::unset("no TLS: certfile not set")),
    }
}

fn show_keyfile<'a>(tls: &'a Tls, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(tls.keyfile.as_ref(), "the key in certfile"))
}

fn show_tls_settings<'a>(tls: &'a Tls, key: &str) -> Option<Shown<'a>> {
    let settings = &tls.settings;
    Some(match key {
        "cert_reqs" => Shown::of(settings.cert_reqs.name()),
        "ciphers" if settings.ciphers.is_empty() => Shown::unset("rustls's defaults"),
        "ciphers" => Shown::of(&settings.ciphers),
        "ssl_version" => Shown::of(settings.min_version.name()),
        _ => return None,
    })
}
