//! `/livez` and `/readyz`, Kubernetes' liveness and readiness probes, as the master answers
//! them on the control socket and on `health_listen`. What each one means is decided here,
//! as pure functions of what the master reports, and tested without a process:
//!
//! - **live**: the master's loop answered a request within [`LIVE_TIMEOUT`]. Nothing about
//!   the pools counts: the master is off the request path, so busy workers, a full listen
//!   queue or a pool whose app fails to load never make `/livez` fail (a liveness failure
//!   restarts the container, which would only add a cold start to a busy pod).
//! - **ready**: the master has started (its first "ready" line), is not stopping, and every
//!   pool's serving generation can take a request now: its runtime is up (a zygote loaded
//!   the app) and it runs at least one worker, or it is an ondemand pool, which starts one
//!   per connection. A reload does not make a pod unready: the old generation drains while
//!   the new one serves the same socket (pools roll one by one, never all at once).
//!
//! Stopping (TERM or QUIT) is recorded by a signal handler of its own ([`watch_stop`]), so
//! that a probe that arrives right after the signal is answered 503 even before the master's
//! loop has taken the signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long `/livez` and `/readyz` wait for the master's loop. The loop answers within one
/// tick when it is well; kubelet's own probe timeout (1 s by default) should be above this.
pub const LIVE_TIMEOUT: Duration = Duration::from_millis(800);

/// Set once a graceful or fast stop was asked for (by a signal or by the master), never
/// cleared: a stopping drover is never ready again.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Registers the handlers that record TERM, QUIT and INT in the stop flag, beside the
/// master's own (which wake its loop).
pub fn watch_stop() -> std::io::Result<()> {
    for signal in [libc::SIGTERM, libc::SIGQUIT, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic: no allocation, no lock.
        unsafe {
            signal_hook::low_level::register(signal, || STOPPING.store(true, Ordering::SeqCst))?;
        }
    }
    Ok(())
}

/// The master began to stop (also called by the loop, for a stop not asked by a signal).
pub fn mark_stopping() {
    STOPPING.store(true, Ordering::SeqCst);
}

/// Whether a stop was asked for.
pub fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// What the master reports for `/readyz`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// The master logged its first "ready" line (every pool started once).
    pub started: bool,
    /// Stopping, and how: `shutdown_delay` (still serving), or the stop itself.
    pub stopping: Option<Stopping>,
    /// Each pool's serving generation, in the configuration's order.
    pub pools: Vec<PoolReadiness>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopping {
    /// Within `shutdown_delay`: the pools still serve, but nothing new should be sent.
    Delaying,
    /// The pools stopped accepting; in-flight requests finish.
    Draining,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolReadiness {
    pub pool: String,
    pub state: PoolState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolState {
    /// It can take a request now.
    Ready,
    /// Its runtime (the zygote loading the app) is not up yet.
    Starting,
    /// Its runtime is up but no worker runs (all exited; respawning, or backing off).
    NoWorker,
    /// Its app failed to load: nothing runs until a reload.
    Failed,
}

/// One generation's state as the master sees it.
pub fn pool_state(failed: bool, runtime_ready: bool, workers: usize, ondemand: bool) -> PoolState {
    if failed {
        PoolState::Failed
    } else if !runtime_ready {
        PoolState::Starting
    } else if workers == 0 && !ondemand {
        PoolState::NoWorker
    } else {
        PoolState::Ready
    }
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.started
            && self.stopping.is_none()
            && self.pools.iter().all(|p| p.state == PoolState::Ready)
    }
}

/// A probe's answer: the HTTP status and a body in the form kube-apiserver's own `/readyz`
/// uses: `ok`, or a `[+]`/`[-]` line per check and `readyz check failed`. `verbose` lists
/// the checks that passed too.
pub fn render_ready(readiness: &Readiness, verbose: bool) -> (u16, String) {
    let mut checks: Vec<(bool, String)> = Vec::new();
    checks.push(match readiness.stopping {
        None => (true, "stopping: no".into()),
        Some(Stopping::Delaying) => (
            false,
            "stopping: within shutdown_delay, still serving what arrives".into(),
        ),
        Some(Stopping::Draining) => (
            false,
            "stopping: not accepting, finishing requests in flight".into(),
        ),
    });
    checks.push(if readiness.started {
        (true, "started".into())
    } else {
        (false, "started: not yet (pools are starting)".into())
    });
    for pool in &readiness.pools {
        let (ok, what) = match pool.state {
            PoolState::Ready => (true, "ready"),
            PoolState::Starting => (false, "starting (the app is loading)"),
            PoolState::NoWorker => (false, "no worker running"),
            PoolState::Failed => (false, "failed (the app did not load; reload to retry)"),
        };
        checks.push((ok, format!("pool {}: {what}", pool.pool)));
    }
    let ready = readiness.ready();
    if ready && !verbose {
        return (200, "ok\n".into());
    }
    let mut body = String::new();
    for (ok, line) in checks.iter().filter(|(ok, _)| verbose || !ok) {
        body.push_str(if *ok { "[+]" } else { "[-]" });
        body.push_str(line);
        body.push('\n');
    }
    if ready {
        body.push_str("readyz check passed\n");
        (200, body)
    } else {
        body.push_str("readyz check failed\n");
        (503, body)
    }
}

/// The answer when the stop flag is set and the master need not be asked.
pub fn render_stopping() -> (u16, String) {
    (
        503,
        "[-]stopping: a stop was asked for (TERM, QUIT or INT)\nreadyz check failed\n".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools(states: &[PoolState]) -> Readiness {
        Readiness {
            started: true,
            stopping: None,
            pools: states
                .iter()
                .enumerate()
                .map(|(i, &state)| PoolReadiness {
                    pool: format!("p{i}"),
                    state,
                })
                .collect(),
        }
    }

    #[test]
    fn a_pool_is_ready_with_a_worker_or_when_ondemand() {
        assert_eq!(pool_state(false, true, 1, false), PoolState::Ready);
        assert_eq!(pool_state(false, true, 0, true), PoolState::Ready);
        assert_eq!(pool_state(false, true, 0, false), PoolState::NoWorker);
        assert_eq!(pool_state(false, false, 3, false), PoolState::Starting);
        assert_eq!(pool_state(true, true, 3, false), PoolState::Failed);
    }

    #[test]
    fn ready_is_every_pool_ready_and_not_stopping() {
        let all = pools(&[PoolState::Ready, PoolState::Ready]);
        assert!(all.ready());
        assert_eq!(render_ready(&all, false), (200, "ok\n".into()));
        let one_down = pools(&[PoolState::Ready, PoolState::NoWorker]);
        assert!(!one_down.ready());
        let (status, body) = render_ready(&one_down, false);
        assert_eq!(status, 503);
        assert_eq!(body, "[-]pool p1: no worker running\nreadyz check failed\n");
        let not_started = Readiness {
            started: false,
            ..all.clone()
        };
        assert_eq!(render_ready(&not_started, false).0, 503);
        for stopping in [Stopping::Delaying, Stopping::Draining] {
            let stopping = Readiness {
                stopping: Some(stopping),
                ..all.clone()
            };
            let (status, body) = render_ready(&stopping, false);
            assert_eq!(status, 503);
            assert!(body.starts_with("[-]stopping: "), "{body}");
        }
    }

    #[test]
    fn verbose_lists_every_check() {
        let all = pools(&[PoolState::Ready]);
        let (status, body) = render_ready(&all, true);
        assert_eq!(status, 200);
        assert_eq!(
            body,
            "[+]stopping: no\n[+]started\n[+]pool p0: ready\nreadyz check passed\n"
        );
        let failed = pools(&[PoolState::Failed, PoolState::Ready]);
        let (_, body) = render_ready(&failed, true);
        assert!(body.contains("[-]pool p0: failed"), "{body}");
        assert!(body.contains("[+]pool p1: ready"), "{body}");
    }
}
