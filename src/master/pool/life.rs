//! Where a generation is in its life, a part that owns its state: its [`Lifecycle`], its
//! start ([`Startup`]: the crash-loop backoff, the start-up failures, an app that failed
//! to load) and its end ([`pm::Linger`]: a parent that outlives its workers while
//! draining). Other parts read it through these methods only.

use std::time::Instant;

use super::lifecycle::Lifecycle;
use super::startup::Startup;
use crate::pm;

pub(super) struct Life {
    lifecycle: Lifecycle,
    startup: Startup,
    linger: pm::Linger,
}

impl Life {
    /// A new generation, `Starting`. `runtime_ready`: its parent does not report that its
    /// runtime started (see [`Startup::new`]).
    pub fn new(runtime_ready: bool) -> Life {
        Life {
            lifecycle: Lifecycle::Starting,
            startup: Startup::new(runtime_ready),
            linger: pm::Linger::default(),
        }
    }

    pub fn lifecycle(&self) -> Lifecycle {
        self.lifecycle
    }

    /// Moves to the state the transition `to` gives ([`Lifecycle`]'s, pure).
    pub fn advance(&mut self, to: fn(Lifecycle) -> Lifecycle) {
        self.lifecycle = to(self.lifecycle);
    }

    /// Whether the generation may spawn now: its lifecycle spawns, and no start-up
    /// failure's backoff holds it back.
    pub fn may_spawn(&mut self, now: Instant) -> bool {
        self.lifecycle.spawns() && !self.startup.holding(now)
    }

    pub fn startup(&self) -> &Startup {
        &self.startup
    }

    pub fn startup_mut(&mut self) -> &mut Startup {
        &mut self.startup
    }

    /// For a drain's tick ([`pm::drain_tick`]).
    pub fn linger_mut(&mut self) -> &mut pm::Linger {
        &mut self.linger
    }
}
