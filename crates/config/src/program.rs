//! The `[program]` table: a background pool (docs/programs.md). `[pm] max_children` copies
//! of one long-running command (a queue consumer, a scheduler) run without a socket; the
//! pool's `[env]`, `chdir`, `user` and `group` apply to them as to any pool's workers.
//!
//! The keys of a pool file that only make sense for a pool that answers requests are
//! refused on it by their declarations (`model/pool.rs`, `model/pm.rs`), each with its reason.

use super::keys::{self, Flavour, Section};
use super::model::{Pm, PmMode, Program, ProgramGiven};
use super::value::{Got, Table, find_executable};
use std::path::Path;

/// The rule by which a `[program]` pool refuses the key at `path` (`pm.max_requests`,
/// `listen`), from the key table's rows; `None` for a key it takes.
pub fn refused(path: &str) -> Option<&'static str> {
    let key = keys::KEYS.iter().find(|k| k.path() == path)?;
    key.refused
        .iter()
        .find(|(runtimes, _)| runtimes.has(Flavour::Program))
        .map(|(_, rule)| *rule)
}

/// Refuses, in `[pm]`, the keys of a pool whose workers come and go ([`refused`]) and a
/// `mode` other than `"static"` (`pm`: the parsed table, when valid).
pub(super) fn check_pm(root: &Table<'_, '_>, pm: Option<&Pm>) {
    let Got::Valid(table) = root.table("pm") else {
        return;
    };
    keys::refuse_by_runtime(&table, Section::Pm, Some(Flavour::Program), false);
    if pm.is_some_and(|pm| pm.mode != PmMode::Static) {
        table.fail(
            "mode",
            "a [program] pool runs max_children copies all the time: mode = \"static\" \
             (drover ctl workers and drover ctl set change the count)",
        );
    }
}

pub(super) fn parse(t: &Table<'_, '_>, base: &Path) -> Option<Program> {
    t.check_keys(&keys::names(Section::Program));
    let command = command(t, base);
    Program::read(t, ProgramGiven { command })
}

/// `command`: a program and its arguments, the program found as `[command] argv`'s is.
fn command(t: &Table<'_, '_>, base: &Path) -> Option<Vec<String>> {
    let items = t.strings("command").required(t, "command")?;
    let Some((program, span)) = items.first().cloned() else {
        t.fail(
            "command",
            "must name a program: command = [\"php\", \"artisan\", \"queue:work\"]",
        );
        return None;
    };
    let program = match find_executable(base, program) {
        Ok(path) => path.to_string_lossy().into_owned(),
        Err(why) => {
            t.fail_at("command", span, format!("command not found: {why}"));
            return None;
        }
    };
    Some(
        std::iter::once(program)
            .chain(items[1..].iter().map(|(s, _)| s.to_string()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors of pool `jobs` from `text`, as `(line, key, rule)`.
    fn errors(text: &str) -> Vec<(usize, String, String)> {
        crate::tests::located_errors("jobs", text)
    }

    const POOL: &str = "[pm]\nmode = \"static\"\nmax_children = 2\n\
                        [program]\ncommand = [\"/bin/sh\", \"-c\", \"sleep 60\"]\n";

    #[test]
    fn a_program_pool_needs_no_listen_and_refuses_one_with_its_line() {
        assert_eq!(errors(POOL), []);
        let listen = format!("listen = \"/run/x.sock\"\nslowlog = \"/tmp/slow\"\n{POOL}");
        let found = errors(&listen);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!((found[0].0, found[0].1.as_str()), (1, "listen"));
        assert!(found[0].2.contains("no socket"), "{found:?}");
        assert_eq!((found[1].0, found[1].1.as_str()), (2, "slowlog"));
        let dynamic = POOL.replace("mode = \"static\"", "mode = \"ondemand\"");
        let found = errors(&dynamic);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, "pm.mode");
        let recycled = POOL.replace("max_children = 2", "max_children = 2\nmax_requests = 5");
        assert!(errors(&recycled)[0].2.contains("max_lifetime"));
        let signal = format!("{POOL}stop_signal = \"STOP\"\n");
        assert_eq!(errors(&signal)[0].1, "program.stop_signal");
        let jitter = format!("{POOL}max_lifetime_jitter = \"5s\"\n");
        assert_eq!(errors(&jitter)[0].2, "only with max_lifetime");
        let queued = format!("queue_timeout = \"2s\"\n{POOL}");
        let found = errors(&queued);
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (1, "queue_timeout"),
            "{found:?}"
        );
        assert!(found[0].2.contains("serves no requests"), "{found:?}");
        let missing = POOL.replace("/bin/sh", "/nonexistent/worker");
        assert!(errors(&missing)[0].2.contains("command not found"));
    }

    #[test]
    fn the_keys_of_a_socket_or_a_request_are_refused() {
        for key in [
            "listen",
            "slowlog",
            "request_terminate_timeout",
            "queue_timeout",
            "pm.max_requests",
        ] {
            assert!(refused(key).is_some(), "{key}");
        }
        for key in [
            "user",
            "group",
            "chdir",
            "clear_env",
            "pm.max_children",
            "pm.max_memory",
        ] {
            assert_eq!(refused(key), None, "{key}");
        }
    }
}
