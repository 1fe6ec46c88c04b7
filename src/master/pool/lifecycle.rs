//! A pool generation's lifecycle, as one state instead of a handful of flags. Pure: the
//! transitions take the state and return the next one, and are tested without a process.
//!
//! ```text
//! Starting ──spawned──> Serving
//! Starting, Serving ──app_failed──> Failed ──refused──> Failed { refusing }
//! any state but Draining ──stop──> Stopping
//! any state ──drain──> Draining
//! ```
//!
//! The states are ordered like php-fpm's shutdown phases: a later one overrides an earlier
//! one, never the reverse. A generation that drains stays draining whatever its app does
//! next; a stop overrides a failure (the stop has shut the listener already); a failure
//! overrides serving. Only a new generation (a reload) serves again.

/// Where one generation of a pool is in its life; see the module doc for the order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    /// Created, nothing spawned yet: exec'd workers start with `initial_workers` on the
    /// first spawn, later ones are the policy's.
    Starting,
    /// Its processes were spawned: the policy keeps it at size, exits are replaced.
    Serving,
    /// The app cannot load (a zygote exited with `EXIT_APP_LOAD`): it runs nothing until a
    /// reload. `refusing`: nothing else serves its socket, so its listener was shut down
    /// and clients are refused at once instead of waiting in the queue.
    Failed { refusing: bool },
    /// The master is stopping: no new connection, workers that exit are not replaced.
    Stopping,
    /// A reload replaced or removed this generation: it finishes its requests and goes.
    Draining,
}

impl Lifecycle {
    /// The first processes were spawned.
    pub fn spawned(self) -> Lifecycle {
        match self {
            Lifecycle::Starting => Lifecycle::Serving,
            other => other,
        }
    }

    /// The app failed to load. A stop or a drain already under way stays what it is.
    pub fn app_failed(self) -> Lifecycle {
        match self {
            Lifecycle::Starting | Lifecycle::Serving => Lifecycle::Failed { refusing: false },
            other => other,
        }
    }

    /// A failed generation's listener was shut down; other states are unaffected.
    pub fn refused(self) -> Lifecycle {
        match self {
            Lifecycle::Failed { .. } => Lifecycle::Failed { refusing: true },
            other => other,
        }
    }

    /// The master's stop began. A draining generation keeps draining.
    pub fn stop(self) -> Lifecycle {
        match self {
            Lifecycle::Draining => Lifecycle::Draining,
            _ => Lifecycle::Stopping,
        }
    }

    /// A reload retires this generation: the last state, whatever came before.
    pub fn drain(self) -> Lifecycle {
        Lifecycle::Draining
    }

    /// Whether the generation may spawn processes and replace those that exit.
    pub fn spawns(self) -> bool {
        matches!(self, Lifecycle::Starting | Lifecycle::Serving)
    }

    pub fn failed(self) -> bool {
        matches!(self, Lifecycle::Failed { .. })
    }

    pub fn refusing(self) -> bool {
        self == Lifecycle::Failed { refusing: true }
    }

    pub fn draining(self) -> bool {
        self == Lifecycle::Draining
    }
}

#[cfg(test)]
mod tests {
    use super::Lifecycle::{self, *};

    const ALL: [Lifecycle; 6] = [
        Starting,
        Serving,
        Failed { refusing: false },
        Failed { refusing: true },
        Stopping,
        Draining,
    ];

    #[test]
    fn a_generation_serves_once_spawned_and_only_then() {
        assert_eq!(Starting.spawned(), Serving);
        assert_eq!(Serving.spawned(), Serving);
        for state in [Failed { refusing: false }, Stopping, Draining] {
            assert_eq!(state.spawned(), state);
        }
    }

    #[test]
    fn an_app_that_cannot_load_fails_a_starting_or_serving_generation() {
        assert_eq!(Starting.app_failed(), Failed { refusing: false });
        assert_eq!(Serving.app_failed(), Failed { refusing: false });
        assert!(Serving.app_failed().failed());
        assert!(!Serving.app_failed().spawns());
    }

    #[test]
    fn a_stop_or_a_drain_overrides_a_failure_and_is_not_overridden_by_one() {
        assert_eq!(Stopping.app_failed(), Stopping);
        assert_eq!(Draining.app_failed(), Draining);
        assert_eq!(Failed { refusing: true }.stop(), Stopping);
        assert_eq!(Failed { refusing: false }.drain(), Draining);
    }

    #[test]
    fn only_a_failed_generation_refuses() {
        assert_eq!(
            Failed { refusing: false }.refused(),
            Failed { refusing: true }
        );
        for state in [Starting, Serving, Stopping, Draining] {
            assert_eq!(state.refused(), state);
            assert!(!state.refused().refusing());
        }
    }

    #[test]
    fn draining_is_final() {
        for state in ALL {
            assert_eq!(state.drain(), Draining);
        }
        let last = Draining;
        assert_eq!(last.stop(), Draining);
        assert_eq!(last.spawned(), Draining);
        assert_eq!(last.refused(), Draining);
    }

    #[test]
    fn only_starting_and_serving_generations_spawn() {
        let spawning: Vec<_> = ALL.into_iter().filter(|s| s.spawns()).collect();
        assert_eq!(spawning, [Starting, Serving]);
    }
}
