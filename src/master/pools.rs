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

use std::ops::{Index, IndexMut};

use super::pool::PoolRun;
use crate::config::ListenAddr;

/// Every generation of every pool, oldest first.
#[derive(Default)]
pub struct Pools(Vec<PoolRun>);

impl Pools {
    pub fn push(&mut self, run: PoolRun) {
        self.0.push(run);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, PoolRun> {
        self.0.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, PoolRun> {
        self.0.iter_mut()
    }

    /// The generations not draining: serving and pending ones.
    pub fn live(&self) -> impl Iterator<Item = &PoolRun> {
        self.0.iter().filter(|p| !p.draining())
    }

    pub fn live_mut(&mut self) -> impl Iterator<Item = &mut PoolRun> {
        self.0.iter_mut().filter(|p| !p.draining())
    }

    /// The generation serving each pool: what the status and the configuration show.
    pub fn serving(&self) -> impl Iterator<Item = &PoolRun> {
        self.0.iter().filter(|p| is_serving(p))
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
    pub fn pending_of<'a>(&'a mut self, name: &'a str) -> impl Iterator<Item = &'a mut PoolRun> {
        self.0
            .iter_mut()
            .filter(move |p| is_pending(p) && p.name() == name)
    }

    /// Whether `name` has exactly one generation that is not draining: nothing else
    /// serves its socket.
    pub fn alone(&self, name: &str) -> bool {
        self.live().filter(|p| p.name() == name).count() == 1
    }

    /// A live generation by its id (ondemand wakes name it).
    pub fn live_by_id_mut(&mut self, id: u64) -> Option<&mut PoolRun> {
        self.live_mut().find(|p| p.id == id)
    }

    /// Any generation by its id (output lines name it).
    pub fn position_of_id(&self, id: u64) -> Option<usize> {
        self.0.iter().position(|p| p.id == id)
    }

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

fn is_serving(pool: &PoolRun) -> bool {
    !pool.draining() && pool.replaces.is_none()
}

fn is_pending(pool: &PoolRun) -> bool {
    !pool.draining() && pool.replaces.is_some()
}

impl Index<usize> for Pools {
    type Output = PoolRun;

    fn index(&self, i: usize) -> &PoolRun {
        &self.0[i]
    }
}

impl IndexMut<usize> for Pools {
    fn index_mut(&mut self, i: usize) -> &mut PoolRun {
        &mut self.0[i]
    }
}
