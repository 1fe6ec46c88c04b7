//! Which request a line of a worker's output is about: the request id the worker wrote in
//! its scoreboard slot, when the line was read while that request was in flight (see
//! [`SlotView::request_id_at`](crate::scoreboard::SlotView::request_id_at)). The error log
//! then tags the line with it, as the access log, the slowlog and a kill line show it.

use nix::unistd::Pid;

use super::PoolRun;

impl PoolRun {
    /// The id of the request `pid` was serving when a line of its output was read at
    /// `at_us` (CLOCK_MONOTONIC µs); None without a scoreboard (php-cgi, `[command]`), or
    /// when the line cannot be told to be that request's.
    pub fn request_id_of_output(&self, pid: Pid, at_us: u64) -> Option<String> {
        let view = self.handed.scoreboard()?.view_of(pid)?;
        view.request_id_at(at_us).map(str::to_owned)
    }
}
