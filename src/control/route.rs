//! From an HTTP request's method, path, query and body to what to do: a pure function, so
//! every route and every refusal is tested without a socket.
//!
//! Unknown query keys are refused rather than ignored: `?pol=www` silently showing every
//! pool would mislead an operator. php-fpm's query words (`?json&full`, `?openmetrics`)
//! work as well as `?format=json&full`, so a page scraped from php-fpm keeps its URL.

use super::request::{ControlRequest, Format};

/// Which listener the request came in on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Scope {
    /// The control socket: every route.
    Control,
    /// A pool's `status_listen`: `/ping`, `/status` and `/metrics`, of that pool only.
    Status { pool: String },
    /// `health_listen`: `/livez`, `/readyz` and `/ping`.
    Health,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Answered by the server itself.
    Ping,
    /// Ask the master for `ControlRequest::Live`: any answer in time is 200.
    Live,
    /// Ask the master for `ControlRequest::Ready` (unless a stop was asked for: 503 at
    /// once); `verbose` lists every check.
    Ready { verbose: bool },
    /// Ask the master for `ControlRequest::Status { pool }`, render in `format`.
    Status {
        pool: Option<String>,
        format: Format,
        full: bool,
    },
    /// Ask the master for `ControlRequest::Status { pool }`, render as Prometheus or
    /// OpenMetrics text (by the `Accept` header); per-worker series when `full`.
    Metrics { pool: Option<String>, full: bool },
    /// Ask the master; its `Ok` text is the answer.
    Master(ControlRequest),
}

/// A refusal before the master is asked.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    pub status: u16,
    pub message: String,
    /// For 405: the methods the path accepts.
    pub allow: Option<&'static str>,
}

fn refuse(status: u16, message: impl Into<String>) -> Refusal {
    Refusal {
        status,
        message: message.into(),
        allow: None,
    }
}

pub(super) fn route(
    method: &str,
    path: &str,
    query: Option<&str>,
    body: &[u8],
    scope: &Scope,
) -> Result<Route, Refusal> {
    let segments: Vec<String> = path
        .strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .map(|s| decode(s, false))
        .collect::<Result<_, _>>()?;
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    let query = Query::parse(query.unwrap_or(""))?;
    if let Some(route) = probe(method, &segments, &query, scope) {
        return route;
    }
    if *scope == Scope::Health {
        return Err(refuse(
            404,
            format!("no route {path}: this listener serves /livez, /readyz and /ping"),
        ));
    }
    if let Some(route) = status(method, &segments, &query, scope) {
        return route;
    }
    if matches!(scope, Scope::Status { .. }) {
        return Err(refuse(
            404,
            format!("no route {path}: this listener serves /status, /metrics and /ping"),
        ));
    }
    command(method, &segments, &query, body).unwrap_or_else(|| {
        Err(refuse(
            404,
            format!(
                "no route {path}: try /status, /metrics, /ping, /livez, /readyz, /config, /reload, /pools/NAME/set, /pools/NAME/workers"
            ),
        ))
    })
}

/// What every listener may be asked: `/ping`, and but on a `status_listen`, `/livez` and
/// `/readyz`. None: not one of those.
fn probe(
    method: &str,
    segments: &[&str],
    query: &Query,
    scope: &Scope,
) -> Option<Result<Route, Refusal>> {
    let parse = || -> Result<Route, Refusal> {
        allow(method, "GET, HEAD")?;
        match segments {
            ["ping"] => {
                query.only(&[])?;
                Ok(Route::Ping)
            }
            ["livez"] => {
                query.only(&["verbose"])?;
                Ok(Route::Live)
            }
            _ => {
                query.only(&["verbose"])?;
                Ok(Route::Ready {
                    verbose: query.has("verbose"),
                })
            }
        }
    };
    match segments {
        ["ping"] => Some(parse()),
        ["livez" | "readyz"] if !matches!(scope, Scope::Status { .. }) => Some(parse()),
        _ => None,
    }
}

/// The status pages, on the control socket and a `status_listen`: `/status`, `/metrics`.
fn status(
    method: &str,
    segments: &[&str],
    query: &Query,
    scope: &Scope,
) -> Option<Result<Route, Refusal>> {
    let parse = || -> Result<Route, Refusal> {
        allow(method, "GET, HEAD")?;
        if segments == ["metrics"] {
            query.only(&["pool", "full"])?;
            return Ok(Route::Metrics {
                pool: query.scoped_pool(scope)?,
                full: query.has("full"),
            });
        }
        query.only(&[
            "pool",
            "format",
            "full",
            "text",
            "json",
            "openmetrics",
            "html",
            "xml",
        ])?;
        Ok(Route::Status {
            pool: query.scoped_pool(scope)?,
            format: query.format()?,
            full: query.has("full"),
        })
    };
    matches!(segments, ["status" | "metrics"]).then(parse)
}

/// The control socket's own routes, which ask the master to show or change something.
/// None: no such route.
fn command(
    method: &str,
    segments: &[&str],
    query: &Query,
    body: &[u8],
) -> Option<Result<Route, Refusal>> {
    let check = |allowed: &'static str, keys: &[&str]| -> Result<(), Refusal> {
        allow(method, allowed)?;
        query.only(keys)
    };
    Some(match segments {
        ["config"] => check("GET", &["pool"]).and_then(|()| {
            Ok(Route::Master(ControlRequest::Config {
                pool: query.pool()?,
            }))
        }),
        ["reload"] => check("POST", &["pool", "changed"]).and_then(|()| {
            Ok(Route::Master(ControlRequest::Reload {
                pool: query.pool()?,
                changed: query.has("changed"),
            }))
        }),
        ["pools", pool, "set"] if !pool.is_empty() => check("POST", &[]).and_then(|()| {
            Ok(Route::Master(ControlRequest::Set {
                pool: pool.to_string(),
                changes: changes(body)?,
            }))
        }),
        ["pools", pool, "workers"] if !pool.is_empty() => check("POST", &[]).and_then(|()| {
            Ok(Route::Master(ControlRequest::Workers {
                pool: pool.to_string(),
                delta: delta(body)?,
            }))
        }),
        _ => return None,
    })
}

fn allow(method: &str, allowed: &'static str) -> Result<(), Refusal> {
    if allowed.split(", ").any(|m| m == method) {
        return Ok(());
    }
    Err(Refusal {
        status: 405,
        message: format!("method {method} not allowed here; use {allowed}"),
        allow: Some(allowed),
    })
}

/// `pm.max_children=12` lines; blank lines are skipped, spaces around key and value trimmed.
fn changes(body: &[u8]) -> Result<Vec<(String, String)>, Refusal> {
    let body = std::str::from_utf8(body).map_err(|_| refuse(400, "the body is not UTF-8"))?;
    let mut changes = Vec::new();
    for (index, line) in body.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        match line.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                changes.push((key.trim().to_owned(), value.trim().to_owned()))
            }
            _ => {
                return Err(refuse(
                    400,
                    format!("line {}: expected KEY=VALUE, got {line:?}", index + 1),
                ));
            }
        }
    }
    if changes.is_empty() {
        return Err(refuse(
            400,
            "no changes: send KEY=VALUE lines, e.g. pm.max_children=12",
        ));
    }
    Ok(changes)
}

/// `+N` or `-N`: the sign is required so that `3` is never mistaken for "set to 3".
fn delta(body: &[u8]) -> Result<i32, Refusal> {
    let text = std::str::from_utf8(body).unwrap_or("").trim();
    let bad = || refuse(400, format!("expected +N or -N workers, got {text:?}"));
    let (sign, digits) = match text.split_at_checked(1) {
        Some(("+", digits)) => (1, digits),
        Some(("-", digits)) => (-1, digits),
        _ => return Err(bad()),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i32 = digits.parse().map_err(|_| bad())?;
    if n == 0 {
        return Err(refuse(
            400,
            "a change of 0 workers changes nothing; use +N or -N with N >= 1",
        ));
    }
    Ok(sign * n)
}

/// The decoded `key[=value]` pairs of a query string.
struct Query(Vec<(String, Option<String>)>);

impl Query {
    fn parse(query: &str) -> Result<Query, Refusal> {
        let mut pairs = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = match pair.split_once('=') {
                Some((key, value)) => (decode(key, true)?, Some(decode(value, true)?)),
                None => (decode(pair, true)?, None),
            };
            pairs.push((key, value));
        }
        Ok(Query(pairs))
    }

    fn only(&self, known: &[&str]) -> Result<(), Refusal> {
        match self
            .0
            .iter()
            .find(|(key, _)| !known.contains(&key.as_str()))
        {
            None => Ok(()),
            Some((key, _)) if known.is_empty() => Err(refuse(
                400,
                format!("unknown query parameter {key:?}: this route takes none"),
            )),
            Some((key, _)) => Err(refuse(
                400,
                format!(
                    "unknown query parameter {key:?}; known: {}",
                    known.join(", ")
                ),
            )),
        }
    }

    fn has(&self, key: &str) -> bool {
        self.0.iter().any(|(k, _)| k == key)
    }

    /// The last `key=value`'s value.
    fn value(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_deref())
    }

    fn pool(&self) -> Result<Option<String>, Refusal> {
        match self.value("pool") {
            Some("") => Err(refuse(400, "pool= is empty; leave it out for every pool")),
            Some(pool) => Ok(Some(pool.to_owned())),
            None if self.has("pool") => Err(refuse(400, "pool needs a value: pool=NAME")),
            None => Ok(None),
        }
    }

    /// `pool=`, on a `status_listen` only its own pool (the default there).
    fn scoped_pool(&self, scope: &Scope) -> Result<Option<String>, Refusal> {
        match scope {
            Scope::Control | Scope::Health => self.pool(),
            Scope::Status { pool } => match self.pool()? {
                Some(asked) if asked != *pool => Err(refuse(
                    404,
                    format!("this listener serves pool {pool:?} only"),
                )),
                _ => Ok(Some(pool.clone())),
            },
        }
    }

    fn format(&self) -> Result<Format, Refusal> {
        let mut asked: Vec<&str> = ["text", "json", "openmetrics", "html", "xml"]
            .into_iter()
            .filter(|f| self.has(f))
            .collect();
        if let Some(format) = self.value("format") {
            asked.push(format);
        }
        asked.dedup();
        match asked.as_slice() {
            [] | ["text"] => Ok(Format::Text),
            ["json"] => Ok(Format::Json),
            ["openmetrics"] => Ok(Format::OpenMetrics),
            [other] => Err(refuse(
                400,
                format!("format {other:?} is not served; use text, json or openmetrics"),
            )),
            _ => Err(refuse(
                400,
                format!("more than one format asked: {}", asked.join(", ")),
            )),
        }
    }
}

/// Percent-decoding. In a query `+` is a space (as browsers and curl's `--data-urlencode`
/// write it); in a path it is itself.
fn decode(s: &str, plus_is_space: bool) -> Result<String, Refusal> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok());
                let byte = hex.and_then(|h| u8::from_str_radix(h, 16).ok());
                out.push(byte.ok_or_else(|| refuse(400, format!("bad percent-escape in {s:?}")))?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| refuse(400, format!("{s:?} does not decode to UTF-8")))
}

#[cfg(test)]
#[path = "route_tests.rs"]
mod tests;
