//! The pools' output and the master's logs: each line of a process tagged with its pool
//! and role (a zygote's reports handed to its pool), the last lines read at the end, and
//! the logs reopened on USR1.

use std::time::{Duration, Instant};

use drover_proto::zygote::REPORT_MARK;

use super::Master;
use super::output::{Output, OutputLine};
use super::pool::Reaped;
use crate::config::LogFormat;

impl Master {
    /// Lines the last workers wrote just before they exited may still wait in the pools'
    /// output sockets, their readers not yet run: a few short waits let the readers take
    /// them (the loop's own wake-ups no longer come), until a wait brings nothing. Bounded
    /// by 100 ms.
    pub(super) async fn take_last_output(&mut self) {
        for round in 0..20 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let mut any = false;
            while let Ok(output) = self.inbox.lines.try_recv() {
                self.on_output(output);
                any = true;
            }
            if !any && round > 0 {
                break;
            }
        }
    }

    /// USR1: reopens the error log by its path, and gives a new generation to every pool
    /// whose access log was moved (the master opens a pool's access log for its zygote,
    /// which cannot reopen it: [`crate::logging::access`]). The slowlogs need nothing:
    /// each entry opens its file.
    pub(super) fn reopen_logs(&mut self) {
        match self.log.file.reopen() {
            Ok(()) => tracing::info!("error log reopened"),
            Err(err) => tracing::error!("cannot reopen the error log: {err}"),
        }
        if !self.phase.serves() {
            return;
        }
        let mut names: Vec<String> = self.pools.live().map(|p| p.config.name.clone()).collect();
        names.sort();
        names.dedup();
        for name in names {
            let Some(i) = self.pools.newest_of(&name) else {
                continue;
            };
            let Some(path) = self.pools[i].moved_access_log() else {
                continue;
            };
            tracing::info!(
                "pool {name}: access_log {} was moved: a new generation writes to a new file",
                path.display()
            );
            let config = self.pools[i].config.clone();
            if let Err(err) = self.roll(i, &config) {
                tracing::error!("pool {name}: {err}; its workers keep the old access log");
            }
        }
    }

    pub(super) fn on_output(&mut self, output: Output) {
        match output {
            Output::Line(line) => self.log_output(line),
            Output::Dropped { pool, lines } => {
                if let Some(index) = self.pools.position_of_id(pool) {
                    tracing::warn!(
                        "pool {}: {lines} lines of output dropped: it wrote faster than the log takes them",
                        self.pools[index].name()
                    );
                }
            }
        }
    }

    pub(super) fn log_output(&mut self, output: OutputLine) {
        let Some(index) = self.pools.position_of_id(output.pool) else {
            return;
        };
        let pool = &mut self.pools[index];
        let now = Instant::now();
        let line = output.text();
        if pool.on_dump_line(output.pid, &line, now) {
            return;
        }
        match pool.on_report(output.pid, &line, now) {
            Some(Reaped::Exit { crash: true }) => {
                if self.emergency.on_crash(now) {
                    self.emergency_restart();
                }
                return;
            }
            Some(_) => return,
            None => {}
        }
        let pool = &self.pools[index];
        let role = pool.role(output.pid).unwrap_or("worker");
        let pid = output.pid;
        // A report line nobody took is drover's, never the app's: it is not passed on.
        if !pool.config.decorate_workers_output && !line.starts_with(REPORT_MARK) {
            if tracing::enabled!(tracing::Level::INFO)
                && let Err(err) = self.log.file.write_line(&output.line)
            {
                tracing::debug!(
                    "pool {}: {role} {pid}: cannot pass on a line: {err}",
                    pool.name()
                );
            }
        } else if self.config.global.log_format == LogFormat::Json {
            // The request's id as a field of its own, for log pipelines. Text lines keep
            // their `pool www: worker 1234: ` prefix as it was: scripts and alerts match it.
            match pool.request_id_of_output(pid, output.at_us) {
                Some(id) => {
                    tracing::info!(
                        pool = pool.name(),
                        pid = pid.as_raw(),
                        role,
                        request_id = id,
                        "{line}"
                    );
                }
                None => tracing::info!(pool = pool.name(), pid = pid.as_raw(), role, "{line}"),
            }
        } else {
            tracing::info!("pool {}: {role} {pid}: {line}", pool.name());
        }
    }
}
