//! `drover.toml`: the master's own settings.

use std::path::Path;
use std::time::Duration;

use super::keys::{self, Section};
use super::listen::{parse_listen, unix_socket};
use super::model::{Control, Global, LogFormat, LogLevel, LogTarget};
use super::value::{Got, Table, log_file, resolve};

/// Selects the pool files when `include` is absent.
pub(super) const DEFAULT_INCLUDE: &str = "pools.d/*.toml";

/// Checks every global key; `include` and `[control]` are read by the loader (it needs
/// them even when another global key is wrong) and handed in. `None` when an error was
/// reported.
pub(super) fn parse(
    root: &Table<'_, '_>,
    base: &Path,
    include: Option<Vec<String>>,
    control: Option<Control>,
) -> Option<Global> {
    root.check_keys(&keys::names(Section::Global));
    let error_log = root
        .parse("error_log", |s| match s {
            "stderr" => Ok(LogTarget::Stderr),
            path => log_file(base, path).map(LogTarget::File),
        })
        .or(LogTarget::Stderr);
    let log_level: Option<LogLevel> = root.value("log_level");
    let log_format: Option<LogFormat> = root.value("log_format");
    let pid_file = root.path_buf("pid_file", base).optional();
    let process_control_timeout = root.value("process_control_timeout");
    let threshold: Option<u32> = root.value("emergency_restart_threshold");
    let interval: Option<Duration> = root.value("emergency_restart_interval");
    if let (Some(threshold), Some(interval)) = (threshold, interval)
        && threshold > 0
        && interval.is_zero()
    {
        let key = if root.contains("emergency_restart_interval") {
            "emergency_restart_interval"
        } else {
            "emergency_restart_threshold"
        };
        root.fail(key, "emergency_restart_interval must be more than 0s when emergency_restart_threshold is above 0");
    }
    let shutdown_delay = root.value("shutdown_delay");
    let exit_on_app_failure = root.value("exit_on_app_failure");
    let health_listen = root
        .parse("health_listen", |s| parse_listen(base, s))
        .optional();
    Some(Global {
        error_log: error_log?,
        log_level: log_level?,
        log_format: log_format?,
        pid_file: pid_file?,
        include: include?,
        process_control_timeout: process_control_timeout?,
        emergency_restart_threshold: threshold?,
        emergency_restart_interval: interval?,
        control: control?,
        shutdown_delay: shutdown_delay?,
        exit_on_app_failure: exit_on_app_failure?,
        health_listen: health_listen?,
    })
}

pub(super) fn control(root: &Table<'_, '_>, base: &Path) -> Option<Control> {
    let table = match root.table("control") {
        Got::Absent => return Some(Control::default()),
        Got::Invalid => return None,
        Got::Valid(table) => table,
    };
    table.check_keys(&keys::names(Section::Control));
    let listen = table
        .parse("listen", |s| unix_socket(resolve(base, s)?))
        .optional()?;
    Some(Control { listen })
}
