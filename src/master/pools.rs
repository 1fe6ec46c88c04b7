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

use std::ops::{Index, IndexMut};

use super::pool::PoolRun;
use crate::config::ListenAddr;

/// What [`Pools`] needs to know of a generation to tell which one it is.
pub trait Generation {
    fn id(&self) -> u64;
    fn name(&self) -> &str;
    /// A reload replaced or removed it: it finishes its requests and goes.
    fn draining(&self) -> bool;
    /// The generation it replaces once it is up, while it is starting.
    fn replaces(&self) -> Option<u64>;
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
}

/// Every generation of every pool, oldest first.
pub struct Pools<G = PoolRun>(Vec<G>);

impl<G> Default for Pools<G> {
    fn default() -> Self {
        Pools(Vec::new())
    }
}

impl<G: Generation> Pools<G> {
    pub fn push(&mut self, run: G) {
        self.0.push(run);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, G> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, G> {
        self.0.iter_mut()
    }

    /// The generations not draining: serving and pending ones.
    pub fn live(&self) -> impl Iterator<Item = &G> {
        self.0.iter().filter(|p| !p.draining())
    }

    pub fn live_mut(&mut self) -> impl Iterator<Item = &mut G> {
        self.0.iter_mut().filter(|p| !p.draining())
    }

    /// The generation serving each pool: what the status and the configuration show.
    pub fn serving(&self) -> impl Iterator<Item = &G> {
        self.0.iter().filter(|p| is_serving(*p))
    }

    /// The generation serving pool `name`.
    pub fn serving_of(&self, name: &str) -> Option<usize> {
        self.0
            .iter()
            .position(|p| is_serving(p) && p.name() == name)
    }

    /// The newest generation of pool `name`: the last one still starting if a change is
    /// rolling, else the serving one.
    pub fn newest_of(&self, name: &str) -> Option<usize> {
        self.0
            .iter()
            .rposition(|p| is_pending(p) && p.name() == name)
            .or_else(|| self.serving_of(name))
    }

    /// The generations of pool `name` still starting to replace the serving one.
    pub fn pending_of<'a>(&'a mut self, name: &'a str) -> impl Iterator<Item = &'a mut G> {
        self.0
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
        self.0.iter().position(|p| p.id() == id)
    }
}

impl Pools<PoolRun> {
    /// Whether any generation listens at `addr`.
    pub fn listens_at(&self, addr: &ListenAddr) -> bool {
        self.0.iter().any(|p| p.listener.addr == *addr)
    }

    /// Takes out the generations that finished draining.
    pub fn take_drained(&mut self) -> Vec<PoolRun> {
        let (gone, kept) = std::mem::take(&mut self.0)
            .into_iter()
            .partition(|pool| pool.draining() && pool.is_empty());
        self.0 = kept;
        gone
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
        &self.0[i]
    }
}

impl<G> IndexMut<usize> for Pools<G> {
    fn index_mut(&mut self, i: usize) -> &mut G {
        &mut self.0[i]
    }
}

#[cfg(test)]
mod tests {
    use super::{Generation, Pools};

    struct Fake {
        id: u64,
        name: &'static str,
        draining: bool,
        replaces: Option<u64>,
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
    }

    fn generation(id: u64, name: &'static str, draining: bool, replaces: Option<u64>) -> Fake {
        Fake {
            id,
            name,
            draining,
            replaces,
        }
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
