//! The master's pool generations, and the one place that says which of them is which.
//!
//! A pool has one generation normally. A reload or a live change that alters it adds a new
//! generation that *replaces* the serving one once it is up ([`PoolRun::replaces`]); the
//! replaced one then drains. So, for a pool name, at any moment:
//! - the **serving** generation: not draining, not replacing another (at most one);
//! - the **pending** ones: not draining, still starting to replace the serving one;
//! - the **newest**: the last pending one if a change is rolling, else the serving one; its
//!   configuration is what the pool is becoming;
//! - the **draining** ones: finishing their requests before they are dropped.
//!
//! The answers read only what [`Generation`] exposes, so they are unit-tested on plain
//! values, without a listener or a process.
//!
//! A pool's counters outlive its generations ([`super::totals`]): a generation dropped
//! once drained leaves its last counts here, and a pool's totals are those plus its
//! running generations' counts.

use std::collections::HashMap;
use std::ops::{Index, IndexMut};
use std::time::Instant;

use super::pool::PoolRun;
use super::totals::Totals;
use crate::config::ListenAddr;
use crate::control::PoolStatus;

/// What [`Pools`] needs to know of a generation to tell which one it is.
pub trait Generation {
    fn id(&self) -> u64;
    fn name(&self) -> &str;
    /// A reload replaced or removed it: it finishes its requests and goes.
    fn draining(&self) -> bool;
    /// The generation it replaces once it is up, while it is starting.
    fn replaces(&self) -> Option<u64>;
    /// Draining, and nothing of it runs any more: it can be dropped.
    fn drained(&self) -> bool;
    /// What it counted so far.
    fn totals(&self) -> Totals;
}

impl Generation for PoolRun {
    fn id(&self) -> u64 {
        self.id
    }

    fn name(&self) -> &str {
        PoolRun::name(self)
    }

    fn draining(&self) -> bool {
        PoolRun::draining(self)
    }

    fn replaces(&self) -> Option<u64> {
        self.replaces
    }

    fn drained(&self) -> bool {
        PoolRun::draining(self) && self.is_empty()
    }

    fn totals(&self) -> Totals {
        PoolRun::totals(self)
    }
}

/// Every generation of every pool, oldest first, and what the dropped ones counted.
pub struct Pools<G = PoolRun> {
    generations: Vec<G>,
    /// By pool name: the sum of the last counts of its generations dropped so far. Kept
    /// for a pool a reload removed too: if it comes back, its counters go on.
    carried: HashMap<String, Totals>,
}

impl<G> Default for Pools<G> {
    fn default() -> Self {
        Pools {
            generations: Vec::new(),
            carried: HashMap::new(),
        }
    }
}

impl<G: Generation> Pools<G> {
    pub fn push(&mut self, run: G) {
        self.generations.push(run);
    }

    pub fn len(&self) -> usize {
        self.generations.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, G> {
        self.generations.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, G> {
        self.generations.iter_mut()
    }

    /// The generations not draining: serving and pending ones.
    pub fn live(&self) -> impl Iterator<Item = &G> {
        self.generations.iter().filter(|p| !p.draining())
    }

    pub fn live_mut(&mut self) -> impl Iterator<Item = &mut G> {
        self.generations.iter_mut().filter(|p| !p.draining())
    }

    /// The generation serving each pool: what the status and the configuration show.
    pub fn serving(&self) -> impl Iterator<Item = &G> {
        self.generations.iter().filter(|p| is_serving(*p))
    }

    /// The generation serving pool `name`.
    pub fn serving_of(&self, name: &str) -> Option<usize> {
        self.generations
            .iter()
            .position(|p| is_serving(p) && p.name() == name)
    }

    /// The newest generation of pool `name`: the last one still starting if a change is
    /// rolling, else the serving one.
    pub fn newest_of(&self, name: &str) -> Option<usize> {
        self.generations
            .iter()
            .rposition(|p| is_pending(p) && p.name() == name)
            .or_else(|| self.serving_of(name))
    }

    /// The generations of pool `name` still starting to replace the serving one.
    pub fn pending_of<'a>(&'a mut self, name: &'a str) -> impl Iterator<Item = &'a mut G> {
        self.generations
            .iter_mut()
            .filter(move |p| is_pending(&**p) && p.name() == name)
    }

    /// Whether `name` has exactly one generation that is not draining: nothing else
    /// serves its socket.
    pub fn alone(&self, name: &str) -> bool {
        self.live().filter(|p| p.name() == name).count() == 1
    }

    /// A live generation by its id (ondemand wakes name it).
    pub fn live_by_id_mut(&mut self, id: u64) -> Option<&mut G> {
        self.live_mut().find(|p| p.id() == id)
    }

    /// Any generation by its id (output lines name it).
    pub fn position_of_id(&self, id: u64) -> Option<usize> {
        self.generations.iter().position(|p| p.id() == id)
    }
}

impl<G: Generation> Pools<G> {
    /// Takes out the generations that finished draining, carrying their counts over to
    /// their pools' totals.
    pub fn take_drained(&mut self) -> Vec<G> {
        let (gone, kept): (Vec<G>, Vec<G>) = std::mem::take(&mut self.generations)
            .into_iter()
            .partition(|pool| pool.drained());
        self.generations = kept;
        for pool in &gone {
            self.carried
                .entry(pool.name().to_owned())
                .or_default()
                .add(&pool.totals());
        }
        gone
    }

    /// Pool `name`'s counts: its dropped generations' and its running ones'.
    pub fn totals_of(&self, name: &str) -> Totals {
        let mut total = self.carried.get(name).cloned().unwrap_or_default();
        for pool in self.generations.iter().filter(|p| p.name() == name) {
            total.add(&pool.totals());
        }
        total
    }
}

impl Pools<PoolRun> {
    /// Whether any generation listens at `addr`.
    pub fn listens_at(&self, addr: &ListenAddr) -> bool {
        self.generations.iter().any(|p| p.listener.addr == *addr)
    }

    /// The status of `pool` (a serving generation): its workers, with its pool's counters
    /// totalled over every generation, so that they never go back on a reload.
    pub fn status_of(&self, pool: &PoolRun, now: Instant) -> PoolStatus {
        let mut status = pool.status(now);
        self.totals_of(pool.name()).report(&mut status, now);
        status
    }
}

fn is_serving(pool: &impl Generation) -> bool {
    !pool.draining() && pool.replaces().is_none()
}

fn is_pending(pool: &impl Generation) -> bool {
    !pool.draining() && pool.replaces().is_some()
}

impl<G> Index<usize> for Pools<G> {
    type Output = G;

    fn index(&self, i: usize) -> &G {
        &self.generations[i]
    }
}

impl<G> IndexMut<usize> for Pools<G> {
    fn index_mut(&mut self, i: usize) -> &mut G {
        &mut self.generations[i]
    }
}

#[cfg(test)]
mod tests {
    use super::{Generation, Pools, Totals};

    struct Fake {
        id: u64,
        name: &'static str,
        draining: bool,
        replaces: Option<u64>,
        /// Requests counted (by the pool's scoreboard, as accepted conn).
        requests: u64,
        /// Workers left.
        workers: u32,
    }

    impl Generation for Fake {
        fn id(&self) -> u64 {
            self.id
        }
        fn name(&self) -> &str {
            self.name
        }
        fn draining(&self) -> bool {
            self.draining
        }
        fn replaces(&self) -> Option<u64> {
            self.replaces
        }
        fn drained(&self) -> bool {
            self.draining && self.workers == 0
        }
        fn totals(&self) -> Totals {
            Totals {
                accepted_conn: Some(self.requests),
                ..Totals::default()
            }
        }
    }

    fn generation(id: u64, name: &'static str, draining: bool, replaces: Option<u64>) -> Fake {
        Fake {
            id,
            name,
            draining,
            replaces,
            requests: 0,
            workers: 1,
        }
    }

    fn requests(pools: &Pools<Fake>, name: &str) -> Option<u64> {
        pools.totals_of(name).accepted_conn
    }

    #[test]
    fn a_pools_counts_never_go_back_as_its_generations_come_and_go() {
        let mut pools = Pools::default();
        pools.push(Fake {
            requests: 10,
            ..generation(1, "www", false, None)
        });
        pools.push(Fake {
            requests: 7,
            ..generation(2, "api", false, None)
        });
        assert_eq!(requests(&pools, "www"), Some(10));
        // A reload: generation 3 starts (and counts what it serves) before it replaces 1.
        pools.push(Fake {
            requests: 1,
            ..generation(3, "www", false, Some(1))
        });
        assert_eq!(requests(&pools, "www"), Some(11));
        // 1 drains: the requests it finishes still count.
        pools.generations[0].draining = true;
        pools.generations[0].requests = 12;
        pools.generations[2].replaces = None;
        assert_eq!(requests(&pools, "www"), Some(13));
        // Not drained while a worker is left.
        assert!(pools.take_drained().is_empty());
        pools.generations[0].workers = 0;
        let gone: Vec<u64> = pools.take_drained().iter().map(|p| p.id).collect();
        assert_eq!(gone, [1]);
        // Dropped, its counts carried.
        assert_eq!(requests(&pools, "www"), Some(13));
        pools.generations[1].requests = 5;
        assert_eq!(requests(&pools, "www"), Some(17));
        assert_eq!(requests(&pools, "api"), Some(7));
        assert_eq!(requests(&pools, "gone"), None);
    }

    /// www: 1 draining since a reload, 2 serving, 3 a change withdrawn (draining), 4 the
    /// change that superseded it, starting to replace 2; api: 5 serving alone.
    fn rolling() -> Pools<Fake> {
        let mut pools = Pools::default();
        pools.push(generation(1, "www", true, None));
        pools.push(generation(2, "www", false, None));
        pools.push(generation(5, "api", false, None));
        pools.push(generation(3, "www", true, None));
        pools.push(generation(4, "www", false, Some(2)));
        pools
    }

    #[test]
    fn the_serving_generation_is_neither_draining_nor_starting() {
        let pools = rolling();
        assert_eq!(pools.serving_of("www").map(|i| pools[i].id), Some(2));
        assert_eq!(pools.serving_of("api").map(|i| pools[i].id), Some(5));
        let ids: Vec<u64> = pools.serving().map(|p| p.id).collect();
        assert_eq!(ids, [2, 5]);
        assert_eq!(pools.serving_of("gone"), None);
    }

    #[test]
    fn the_newest_generation_is_the_last_one_starting_else_the_serving_one() {
        let pools = rolling();
        assert_eq!(pools.newest_of("www").map(|i| pools[i].id), Some(4));
        assert_eq!(pools.newest_of("api").map(|i| pools[i].id), Some(5));
    }

    #[test]
    fn pending_generations_are_those_starting_to_replace_the_serving_one() {
        let mut pools = rolling();
        let ids: Vec<u64> = pools.pending_of("www").map(|p| p.id).collect();
        assert_eq!(ids, [4]);
        assert_eq!(pools.pending_of("api").count(), 0);
    }

    #[test]
    fn live_generations_leave_out_the_draining_ones() {
        let mut pools = rolling();
        let ids: Vec<u64> = pools.live().map(|p| p.id).collect();
        assert_eq!(ids, [2, 5, 4]);
        assert!(pools.live_by_id_mut(1).is_none());
        assert!(pools.live_by_id_mut(3).is_none());
        assert!(pools.live_by_id_mut(4).is_some());
        assert_eq!(pools.position_of_id(1), Some(0));
        assert!(pools.alone("api"));
        assert!(!pools.alone("www"));
    }
}
