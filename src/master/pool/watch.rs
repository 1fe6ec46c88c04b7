//! ondemand: the listener watched for connections that wait, so that the master spawns at
//! once instead of on its next tick. [`Watch`], a part of the pool that owns its state,
//! holds the watching task and stops it when the pool takes no new work or is dropped.

use std::os::fd::AsFd;

use super::PoolRun;

/// The task watching the listener (see [`PoolRun::watch_listener`]), stopped on drop.
#[derive(Debug, Default)]
pub struct Watch {
    task: Option<tokio::task::AbortHandle>,
}

impl Watch {
    /// Ends the watch: the pool takes no new work.
    pub fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

impl PoolRun {
    /// ondemand: a task that sends this generation's id to `wakes` whenever a connection
    /// arrives on the listener, so that the master spawns at once instead of on its next
    /// tick (epoll on a copy of the listening socket: the master never accepts).
    pub fn watch_listener(&mut self, wakes: &tokio::sync::mpsc::UnboundedSender<u64>) {
        if self.config.pm.mode != crate::config::PmMode::Ondemand {
            return;
        }
        let Ok(fd) = self.listener.dup() else { return };
        // SAFETY: the OwnedFd stays open, and the same descriptor, for the AsyncFd's life.
        let Ok(watched) = (unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        }) else {
            return;
        };
        let (id, wakes) = (self.id, wakes.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok(mut ready) = watched.readable().await else {
                    return;
                };
                // A listener shut down (stop, drain) stays "readable" for good: nothing more
                // to watch, and waking on it would spin.
                if ready.ready().is_read_closed() || wakes.send(id).is_err() {
                    return;
                }
                // Edge-triggered: the next wake is the next arrival.
                ready.clear_ready();
            }
        });
        self.watch.task = Some(task.abort_handle());
    }

    /// ondemand: whether a connection waits on the listener (it is readable) while no worker
    /// is idle to take it. Other modes: not asked.
    pub fn connections_waiting(&self) -> Option<u32> {
        if self.config.pm.mode != crate::config::PmMode::Ondemand {
            return None;
        }
        if let Some(waiting) = self.listen_queue() {
            return Some(waiting);
        }
        let mut fds = [nix::poll::PollFd::new(
            self.listener.fd.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let ready = nix::poll::poll(&mut fds, nix::poll::PollTimeout::ZERO).unwrap_or(0);
        Some(u32::from(ready > 0))
    }
}
