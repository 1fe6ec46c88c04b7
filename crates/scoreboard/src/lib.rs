//! The scoreboard: one shared-memory region per pool, one [`Slot`] per worker.
//!
//! The master creates it (a sealed memfd, mapped shared) and passes the fd to the pool's
//! zygote, which maps it with [`Scoreboard::from_fd`]; forked workers inherit the mapping.
//! Each worker writes its own slot at every request phase ([`Slot`] says how, without locks);
//! the master reads them all with [`Scoreboard::snapshot`] on its tick. A worker also checks
//! its slot's retire flag ([`Scoreboard::request_retire`]) between requests; the master
//! does not set it today: it retires a Python worker with SIGTERM, which the worker takes
//! only between requests too.
//!
//! Besides the slots, a pool area ([`PoolStats`]) that every worker adds to at the end of
//! each request: a request-duration histogram and responses by status class.
//!
//! Layout: a 64-byte header (magic, version, slot count and size, so that the zygote can
//! check what it was given), the pool area, then the slots. Times are CLOCK_MONOTONIC microseconds
//! ([`now_us`]), the one clock that master and workers agree on.

mod pool;
mod slot;
#[cfg(test)]
mod tests;

use std::ffi::c_void;
use std::mem::size_of;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::mman::{MapFlags, ProtFlags, mmap, munmap};
use nix::sys::stat::fstat;
use nix::unistd::{Pid, ftruncate};

pub use pool::{BUCKET_BOUNDS_US, BUCKETS, CLASSES, PoolStats, PoolView, bucket, class};
pub use slot::{
    METHOD_MAX, QUERY_MAX, REQUEST_ID_MAX, Request, SCRIPT_MAX, Slot, SlotView, State, URI_MAX,
};

/// "DROVERSB": tells a scoreboard fd from any other fd the zygote might be handed.
const MAGIC: u64 = u64::from_le_bytes(*b"DROVERSB");
/// Bumped whenever the slot layout changes: master and zygote are the same binary today,
/// but a zygote surviving a binary upgrade must not misread a new master's slots.
const VERSION: u32 = 6;
const HEADER_SIZE: usize = size_of::<Header>();
const POOL_SIZE: usize = size_of::<PoolStats>();
const SLOT_SIZE: usize = size_of::<Slot>();
/// Where the slots start: after the header and the pool area.
const SLOTS_AT: usize = HEADER_SIZE + POOL_SIZE;

const _: () = assert!(HEADER_SIZE == 64 && POOL_SIZE == 192 && SLOT_SIZE == 960);

#[repr(C, align(64))]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    slot_size: AtomicU32,
    slots: AtomicU32,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("scoreboard: {call} failed: {errno}")]
    Os {
        call: &'static str,
        errno: nix::Error,
    },
    #[error("scoreboard: {slots} slots do not fit in memory")]
    TooLarge { slots: usize },
    #[error("scoreboard: the fd is not a drover scoreboard: {0}")]
    NotAScoreboard(String),
}

fn os(call: &'static str) -> impl FnOnce(nix::Error) -> Error {
    move |errno| Error::Os { call, errno }
}

/// CLOCK_MONOTONIC in microseconds: the clock of every time in the scoreboard. It is the
/// clock behind `Instant` on Linux, and it is the same in every process.
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write to; CLOCK_MONOTONIC cannot fail on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    // Both fields are non-negative for CLOCK_MONOTONIC.
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// One pool's mapped scoreboard.
pub struct Scoreboard {
    /// Kept open so that the master can pass it to a new zygote after a crash.
    fd: OwnedFd,
    map: NonNull<c_void>,
    map_len: usize,
    /// From the creator's argument or the checked header; never re-read from shared memory,
    /// where a worker could change it.
    slots: usize,
}

// SAFETY: the mapping holds only atomics, and it stays mapped as long as the Scoreboard lives.
unsafe impl Send for Scoreboard {}
// SAFETY: as for Send: every access to the shared mapping is through atomics.
unsafe impl Sync for Scoreboard {}

impl Scoreboard {
    /// Master side: a zeroed scoreboard of `slots` free slots (zero is a free slot).
    ///
    /// The memfd is close-on-exec: whoever spawns the zygote hands it over explicitly. It is
    /// sealed against shrinking, because a worker (running application code, holding the fd)
    /// that truncated it would make the master's next read a SIGBUS.
    pub fn create(pool: &str, slots: usize) -> Result<Scoreboard, Error> {
        let len = slots
            .checked_mul(SLOT_SIZE)
            .and_then(|n| n.checked_add(SLOTS_AT))
            .filter(|&n| libc::off_t::try_from(n).is_ok())
            .ok_or(Error::TooLarge { slots })?;
        let name = format!("drover-scoreboard-{pool}");
        let fd = memfd_create(
            name.as_str(),
            MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
        )
        .map_err(os("memfd_create"))?;
        // The filter above checked the conversion.
        ftruncate(&fd, len as libc::off_t).map_err(os("ftruncate"))?;
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(&fd, FcntlArg::F_ADD_SEALS(seals)).map_err(os("fcntl(F_ADD_SEALS)"))?;
        let board = Scoreboard::map(fd, len, slots)?;
        let header = board.header();
        header.version.store(VERSION, Relaxed);
        header.slot_size.store(SLOT_SIZE as u32, Relaxed);
        header.slots.store(
            u32::try_from(slots).map_err(|_| Error::TooLarge { slots })?,
            Relaxed,
        );
        header.magic.store(MAGIC, Relaxed);
        Ok(board)
    }

    /// Zygote side: maps the scoreboard the master passed, after checking that it is one.
    pub fn from_fd(fd: OwnedFd) -> Result<Scoreboard, Error> {
        let size = fstat(&fd).map_err(os("fstat"))?.st_size;
        let len = usize::try_from(size).unwrap_or(0);
        if len < SLOTS_AT || !(len - SLOTS_AT).is_multiple_of(SLOT_SIZE) {
            return Err(Error::NotAScoreboard(format!(
                "size {len} is no header and pool area plus whole slots"
            )));
        }
        let board = Scoreboard::map(fd, len, (len - SLOTS_AT) / SLOT_SIZE)?;
        let header = board.header();
        let (magic, version) = (header.magic.load(Relaxed), header.version.load(Relaxed));
        let (slot_size, slots) = (header.slot_size.load(Relaxed), header.slots.load(Relaxed));
        if magic != MAGIC {
            return Err(Error::NotAScoreboard("no drover scoreboard magic".into()));
        }
        if version != VERSION || slot_size as usize != SLOT_SIZE {
            return Err(Error::NotAScoreboard(format!(
                "layout version {version} with {slot_size}-byte slots, expected {VERSION} with {SLOT_SIZE}"
            )));
        }
        if slots as usize != board.slots {
            return Err(Error::NotAScoreboard(format!(
                "header says {slots} slots, size says {}",
                board.slots
            )));
        }
        Ok(board)
    }

    fn map(fd: OwnedFd, len: usize, slots: usize) -> Result<Scoreboard, Error> {
        // Never zero: the header alone is 64 bytes.
        let length = NonZeroUsize::new(len).expect("a scoreboard has a header");
        // SAFETY: a fresh shared mapping of a file we own, at an address the kernel picks; it
        // aliases no Rust object. The file cannot shrink (sealed), so every page stays backed.
        let map = unsafe {
            mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                &fd,
                0,
            )
        }
        .map_err(os("mmap"))?;
        Ok(Scoreboard {
            fd,
            map,
            map_len: len,
            slots,
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is page-aligned, at least HEADER_SIZE long, lives as long as
        // `self`, and any bytes are a valid Header (all atomics).
        unsafe { self.map.cast::<Header>().as_ref() }
    }

    /// The fd to pass to the zygote.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The number of slots (max_children when the master created it).
    pub fn len(&self) -> usize {
        self.slots
    }

    pub fn is_empty(&self) -> bool {
        self.slots == 0
    }

    /// Slot `index`. Panics when out of range: indices come from [`Scoreboard::free_slot`].
    pub fn slot(&self, index: usize) -> &Slot {
        assert!(
            index < self.slots,
            "scoreboard slot {index} of {}",
            self.slots
        );
        // SAFETY: in range (asserted), so inside the mapping; slots start at a 64-byte
        // multiple and are 64-byte multiples, so aligned; all atomics, so any bytes are valid; lives as long as
        // `self`.
        unsafe {
            self.map
                .cast::<u8>()
                .add(SLOTS_AT + index * SLOT_SIZE)
                .cast::<Slot>()
                .as_ref()
        }
    }

    /// The pool area, which every worker adds to at the end of each request.
    pub fn pool(&self) -> &PoolStats {
        // SAFETY: the area lies right after the header, inside the mapping (every size
        // was checked to hold it), 64 bytes in, so aligned; all atomics, so any bytes are
        // valid; lives as long as `self`.
        unsafe {
            self.map
                .cast::<u8>()
                .add(HEADER_SIZE)
                .cast::<PoolStats>()
                .as_ref()
        }
    }

    /// Zygote side: a slot no worker holds. Only the zygote calls it, and it claims the slot
    /// for the new worker right after fork, before it looks for the next one.
    pub fn free_slot(&self) -> Option<usize> {
        (0..self.slots).find(|&i| self.slot(i).pid() == 0)
    }

    /// Master side: a copy of every used slot.
    pub fn snapshot(&self) -> Vec<SlotView> {
        (0..self.slots)
            .filter_map(|i| self.slot(i).view(i))
            .collect()
    }

    /// Master side: a copy of the slot `pid` holds, if any; only that slot's fields are
    /// read (for a line of that worker's output: [`SlotView::request_id_at`]).
    pub fn view_of(&self, pid: Pid) -> Option<SlotView> {
        (0..self.slots)
            .find(|&i| self.slot(i).pid() == pid.as_raw())
            .and_then(|i| self.slot(i).view(i))
    }

    /// Master side: asks `pid`, in `slot`, to exit after its current request. False when
    /// the slot is out of range or `pid` no longer holds it (it has exited already).
    pub fn request_retire(&self, slot: usize, pid: Pid) -> bool {
        slot < self.slots && self.slot(slot).request_retire(pid)
    }
}

impl Drop for Scoreboard {
    fn drop(&mut self) {
        // SAFETY: our own mapping, unmapped once; no `&Slot` outlives `self`.
        // An error here would mean a bad address, which `map` excludes: nothing to do.
        let _ = unsafe { munmap(self.map, self.map_len) };
    }
}

impl std::fmt::Debug for Scoreboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoreboard")
            .field("fd", &self.fd)
            .field("slots", &self.slots)
            .finish()
    }
}
