//! The error log's line layout: tracing-subscriber's text, or one JSON object per line
//! (`log_format = "json"`), switched by a flag the master sets at a reload.
//!
//! A JSON line holds `time` (RFC 3339, UTC), `level` (`error` … `trace`, as `log_level`
//! spells them), `message`, then the event's own fields. drover's messages about a pool
//! start `pool NAME: ` (and often `worker PID` after it): the line gets `pool` and `pid`
//! fields from that prefix, unless the event names them itself. tracing-subscriber's own
//! `json` feature would nest the fields and call the time `timestamp`; collectors expect
//! the flat layout.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde_json::Value;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Full, Writer};
use tracing_subscriber::fmt::time::SystemTime as Clock;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Text or JSON, by `json` at the time of each event.
pub struct Layout {
    text: Format<Full, Clock>,
    json: Arc<AtomicBool>,
}

impl Layout {
    pub fn new(text: Format<Full, Clock>, json: Arc<AtomicBool>) -> Layout {
        Layout { text, json }
    }
}

impl<S, N> FormatEvent<S, N> for Layout
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if !self.json.load(Ordering::Relaxed) {
            return self.text.format_event(ctx, writer, event);
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let line = render(SystemTime::now(), *event.metadata().level(), fields);
        writeln!(writer, "{line}")
    }
}

/// An event's message and other fields, in the order they were given.
#[derive(Default)]
struct Fields {
    message: String,
    others: Vec<(&'static str, Value)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.others.push((field.name(), Value::from(value)));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.others.push((field.name(), Value::from(value)));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.others.push((field.name(), Value::from(value)));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.others.push((field.name(), Value::from(value)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // `format_args!` messages arrive here; their Debug is their text.
        self.record_str(field, &format!("{value:?}"));
    }
}

/// One JSON object, without its newline: `time`, `level`, `message` first, in that order.
fn render(time: SystemTime, level: Level, fields: Fields) -> String {
    let time = humantime::format_rfc3339_micros(time).to_string();
    let mut members: Vec<(&str, Value)> = vec![
        ("time", time.into()),
        ("level", level_name(level).into()),
        ("message", fields.message.as_str().into()),
    ];
    let named = |key: &str| fields.others.iter().any(|(k, _)| *k == key);
    let (pool, pid) = about(&fields.message);
    if let Some(pool) = pool.filter(|_| !named("pool")) {
        members.push(("pool", pool.into()));
    }
    if let Some(pid) = pid.filter(|_| !named("pid")) {
        members.push(("pid", pid.into()));
    }
    members.extend(fields.others.iter().map(|(k, v)| (*k, v.clone())));
    let mut out = String::from("{");
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(*key).to_string());
        out.push(':');
        out.push_str(&value.to_string());
    }
    out.push('}');
    out
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warn",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

/// The pool and the process a message is about, from its `pool NAME: ` prefix and a
/// `worker PID`, `zygote PID` or `parent PID` right after it. Pool names are
/// `[A-Za-z0-9_.-]+` (the loader enforces it), so the prefix cannot be mistaken.
fn about(message: &str) -> (Option<&str>, Option<i64>) {
    let Some(rest) = message.strip_prefix("pool ") else {
        return (None, None);
    };
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || "_.-".contains(c)))
        .unwrap_or(rest.len());
    let (name, rest) = rest.split_at(end);
    let Some(rest) = rest.strip_prefix(": ").filter(|_| !name.is_empty()) else {
        return (None, None);
    };
    let pid = ["worker ", "zygote ", "parent "]
        .iter()
        .find_map(|role| rest.strip_prefix(role))
        .and_then(|rest| {
            let digits = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            rest[..digits].parse().ok()
        });
    (Some(name), pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(message: &str, others: Vec<(&'static str, Value)>) -> Value {
        let fields = Fields {
            message: message.to_owned(),
            others,
        };
        serde_json::from_str(&render(SystemTime::UNIX_EPOCH, Level::INFO, fields)).unwrap()
    }

    #[test]
    fn a_line_has_time_level_and_message() {
        let v = line("ready: 2 pools", vec![]);
        assert_eq!(v["time"], "1970-01-01T00:00:00.000000Z");
        assert_eq!(v["level"], "info");
        assert_eq!(v["message"], "ready: 2 pools");
        assert!(v.get("pool").is_none() && v.get("pid").is_none(), "{v}");
        let text = render(SystemTime::UNIX_EPOCH, Level::WARN, Fields::default());
        assert!(text.starts_with("{\"time\":"), "{text}");
    }

    #[test]
    fn a_pool_message_names_the_pool_and_the_process() {
        let v = line("pool www.v2: worker 4242 exited (status 0)", vec![]);
        assert_eq!(
            (&v["pool"], &v["pid"]),
            (&Value::from("www.v2"), &Value::from(4242))
        );
        let v = line(
            "pool api: listening on 127.0.0.1:9000 (backlog 511)",
            vec![],
        );
        assert_eq!(v["pool"], "api");
        assert!(v.get("pid").is_none(), "{v}");
        let v = line("pool  www: not a prefix", vec![]);
        assert!(v.get("pool").is_none(), "{v}");
    }

    #[test]
    fn fields_an_event_gives_win_over_the_prefix() {
        let v = line(
            "{\"app\":1}",
            vec![("pool", Value::from("www")), ("pid", Value::from(7))],
        );
        assert_eq!(
            (&v["pool"], &v["pid"]),
            (&Value::from("www"), &Value::from(7))
        );
        assert_eq!(v["message"], "{\"app\":1}");
    }
}
