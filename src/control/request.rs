//! What the control and status servers ask of the master ([`ControlRequest`]), what it
//! answers ([`ControlReply`]), the channel that carries both, and the status formats.

use tokio::sync::{mpsc, oneshot};

use super::model::PoolStatus;

/// What the server asks of the master. Pool names are as the client sent them; the master
/// checks that they exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlRequest {
    /// Every pool's status, or one pool's. Answer with [`ControlReply::Status`].
    Status { pool: Option<String> },
    /// The effective configuration (as `drover -t` prints it), of every pool or one.
    Config { pool: Option<String> },
    /// Live changes of pm keys (`pm.max_children` = `12`), in the order given. Validate all
    /// of them like the files before applying any: an error names the key and the rule and
    /// changes nothing.
    Set {
        pool: String,
        changes: Vec<(String, String)>,
    },
    /// Re-read the files and start a new generation of every pool, or just this one
    /// (php-fpm's USR2, gunicorn's HUP); with `changed`, only of those whose configuration
    /// changed.
    Reload { pool: Option<String>, changed: bool },
    /// One static pool's worker count, relatively: `+2`, `-1`. Never 0.
    Workers { pool: String, delta: i32 },
    /// `/livez`: any answer means the loop runs. Answer with [`ControlReply::Ok`].
    Live,
    /// `/readyz`. Answer with [`ControlReply::Ready`].
    Ready,
}

/// The master's answer to one [`ControlRequest`].
#[derive(Debug, Clone, PartialEq)]
pub enum ControlReply {
    /// Done: a message for the operator (or, for `Config`, the configuration text).
    Ok(String),
    /// The answer to `Status`.
    Status(Vec<PoolStatus>),
    /// The answer to `Ready`.
    Ready(super::health::Readiness),
    /// Refused or failed: sent as this HTTP status (400 invalid, 404 no such pool, 409 not
    /// possible now, 500 failed) with `{"error": message}`.
    Error { status: u16, message: String },
}

impl ControlReply {
    /// 404 for a pool name the master does not know.
    pub fn unknown_pool(pool: &str) -> ControlReply {
        ControlReply::Error {
            status: 404,
            message: format!("no pool named {pool:?}"),
        }
    }

    /// 400: the request is invalid (a key, a value, a rule); nothing was changed.
    pub fn invalid(message: impl Into<String>) -> ControlReply {
        ControlReply::Error {
            status: 400,
            message: message.into(),
        }
    }
}

/// One request to the master and where its answer goes. Dropping the oneshot unanswered
/// tells the client the master could not answer (503).
pub type Envelope = (ControlRequest, oneshot::Sender<ControlReply>);

/// The servers' side of the channel; cloned into each server.
pub type ToMaster = mpsc::Sender<Envelope>;

/// Requests waiting for the master beyond this make the servers wait (backpressure), so a
/// flood of scrapes cannot grow the master's memory.
const QUEUE: usize = 64;

/// The channel between the servers and the master: give the sender to
/// [`ControlSocket::serve`](super::ControlSocket::serve) and
/// [`StatusSocket::serve`](super::StatusSocket::serve), receive in the master's loop.
pub fn channel() -> (ToMaster, mpsc::Receiver<Envelope>) {
    mpsc::channel(QUEUE)
}

/// The three status formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
    OpenMetrics,
}

impl Format {
    /// The name used in `?format=` and `?json` (php-fpm's query words).
    pub fn name(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::OpenMetrics => "openmetrics",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; charset=utf-8",
            Format::Json => "application/json",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}
