//! `drover.toml`: the master's own settings.

use std::path::Path;
use std::time::Duration;

use super::keys::{self, Section};
use super::listen::{parse_listen, unix_socket};
use super::model::{Control, ControlGiven, Global, GlobalGiven, LogTarget};
use super::value::{Got, Table, log_file, resolve};

/// Selects the pool files when `include` is absent.
pub(super) const DEFAULT_INCLUDE: &str = "pools.d/*.toml";

/// Checks every global key: the plain ones by their declarations ([`Global::read`]), the
/// others here; `include` and `[control]` are read by the loader (it needs
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
    let pid_file = root.path_buf("pid_file", base).optional();
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
    let health_listen = root
        .parse("health_listen", |s| parse_listen(base, s))
        .optional();
    Global::read(
        root,
        GlobalGiven {
            error_log,
            pid_file,
            include,
            emergency_restart_threshold: threshold,
            emergency_restart_interval: interval,
            health_listen,
            control,
        },
    )
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
        .optional();
    Control::read(&table, ControlGiven { listen })
}
