//! One worker's slot: its layout in shared memory, the owner's writes and the master's read.
//!
//! A slot has one writer at a time: the worker that owns it, or the zygote before the worker
//! runs (`claim`) and after it is reaped (`release`). The master only reads it, except for
//! the retire request, which is a field of its own. Nothing here locks: numbers are single
//! atomics, and the strings are guarded by a sequence counter (a seqlock) that is odd while
//! the owner writes, so that the master can tell a torn read and retry.
//!
//! The memory is shared with application code, so the reader trusts nothing it finds here:
//! lengths are clamped, text is decoded lossily, an unknown state byte is reported as busy.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicU16, AtomicU32, AtomicU64, fence};
use std::time::{Duration, Instant};

use nix::unistd::Pid;

/// Capacities in bytes of the request strings; longer values are truncated.
pub const METHOD_MAX: usize = 16;
pub const URI_MAX: usize = 256;
pub const QUERY_MAX: usize = 256;
pub const SCRIPT_MAX: usize = 256;
/// The request id's capacity: also the longest id a worker takes from a request
/// (`drover_worker::request_id`), so that the master's lines never show a cut one.
pub const REQUEST_ID_MAX: usize = 64;

/// How often the reader retries a slot whose owner keeps writing. Bounded so that a worker
/// stopped or killed in the middle of a write never stalls the master.
const READ_ATTEMPTS: u32 = 64;

/// Where a worker is in its request cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Claimed, not yet accepting (the application may still be loading). 0, so that a
    /// zeroed slot reads as starting.
    Starting = 0,
    /// Waiting in accept().
    Idle = 1,
    /// Accepted a connection, reading the request's parameters.
    Reading = 2,
    /// Running the application.
    Running = 3,
    /// Sending the end of the response, cleaning up.
    Finishing = 4,
}

impl State {
    /// A byte that is no state at all counts as busy: the request timeout still applies to
    /// that worker, and the pm never takes it for a spare one.
    fn from_u8(byte: u8) -> State {
        match byte {
            0 => State::Starting,
            1 => State::Idle,
            2 => State::Reading,
            4 => State::Finishing,
            _ => State::Running,
        }
    }

    /// Busy workers are in a request; starting ones count as idle so that the pm does not
    /// spawn again for capacity that is already booting.
    pub fn is_busy(self) -> bool {
        matches!(self, State::Reading | State::Running | State::Finishing)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Idle => "idle",
            State::Reading => "reading",
            State::Running => "running",
            State::Finishing => "finishing",
        }
    }
}

/// A string of at most `8 * WORDS` bytes, stored in words so that a write costs one store
/// per 8 bytes of the value, not per byte of the capacity.
#[repr(C)]
struct Text<const WORDS: usize> {
    len: AtomicU16,
    words: [AtomicU64; WORDS],
}

impl<const WORDS: usize> Text<WORDS> {
    const CAPACITY: usize = WORDS * 8;

    fn store(&self, value: &str) {
        let bytes = truncate(value, Self::CAPACITY).as_bytes();
        for (word, chunk) in self.words.iter().zip(bytes.chunks(8)) {
            let mut padded = [0u8; 8];
            padded[..chunk.len()].copy_from_slice(chunk);
            word.store(u64::from_ne_bytes(padded), Relaxed);
        }
        // Fits: CAPACITY is at most 256.
        self.len.store(bytes.len() as u16, Relaxed);
    }

    /// Copies the bytes out; decoding waits until the seqlock says the copy is whole.
    fn load(&self, out: &mut Vec<u8>) {
        out.clear();
        let len = usize::from(self.len.load(Relaxed)).min(Self::CAPACITY);
        for word in self.words.iter().take(len.div_ceil(8)) {
            out.extend_from_slice(&word.load(Relaxed).to_ne_bytes());
        }
        out.truncate(len);
    }
}

/// The longest prefix of `value` that fits in `max` bytes and ends on a character boundary.
pub(super) fn truncate(value: &str, max: usize) -> &str {
    let mut end = value.len().min(max);
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// One worker's slot. `#[repr(C)]` and made only of atomics, because every process that maps
/// the scoreboard sees the same bytes; 64-byte aligned so that two workers never write the
/// same cache line.
///
/// Its life: the zygote finds it with `free_slot` and, after fork, both it and the worker
/// [`claim`](Slot::claim) it; the worker then writes `set_state(Idle)` before accept(),
/// `set_state(Reading)` once it has a connection, [`begin_request`](Slot::begin_request) once
/// the parameters are read, optionally `set_state(Finishing)`, and
/// [`end_request`](Slot::end_request); it checks [`retire_requested`](Slot::retire_requested)
/// between requests. The zygote [`release`](Slot::release)s it after reaping the worker.
/// The request strings are written under a sequence counter (odd while writing) so that
/// the master's lock-free read can tell a torn copy and retry.
#[repr(C, align(64))]
pub struct Slot {
    /// 0 = free. Stored last when claiming, so that a reader who sees it sees the generation.
    pid: AtomicI32,
    generation: AtomicU32,
    /// Seqlock over everything below: odd while the owner writes.
    seq: AtomicU32,
    /// The pid the master asked to retire. A pid rather than a flag: a request that arrives
    /// after its worker died cannot retire the next worker in the slot.
    retire: AtomicI32,
    state: AtomicU8,
    /// CLOCK_MONOTONIC µs: start of the current request, or end of the last one (idle since).
    since_us: AtomicU64,
    requests: AtomicU64,
    last_duration_us: AtomicU64,
    last_cpu_us: AtomicU64,
    /// Bytes: the peak memory of the last request as the runtime measures it (PHP: the
    /// Zend allocator's peak, php-fpm's "last request memory"); 0 = unknown.
    last_memory: AtomicU64,
    method: Text<{ METHOD_MAX / 8 }>,
    uri: Text<{ URI_MAX / 8 }>,
    query: Text<{ QUERY_MAX / 8 }>,
    script: Text<{ SCRIPT_MAX / 8 }>,
    /// The request's id (X-Request-Id, nginx's `$request_id`, or one the worker made), so
    /// that the master's slowlog and kill lines name it. Added in layout version 6 (the
    /// slot grew from 896 to 960 bytes: one more cache line per worker).
    request_id: Text<{ REQUEST_ID_MAX / 8 }>,
}

/// The request a slot describes: the current one while busy, the last one while idle
/// (empty before the first).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    pub method: String,
    pub uri: String,
    pub query: String,
    pub script: String,
    /// Empty when the worker gave none (php-cgi's workers never write a slot).
    pub request_id: String,
}

/// An owned copy of one used slot, as the master saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotView {
    pub slot: usize,
    pub pid: Pid,
    pub generation: u32,
    pub state: State,
    /// CLOCK_MONOTONIC µs ([`super::now_us`]): request start while busy, idle since while idle.
    pub since_us: u64,
    pub requests: u64,
    pub last_duration: Duration,
    pub last_cpu: Duration,
    /// The last request's peak memory in bytes; None when the runtime does not measure it
    /// (Python) or before the first request.
    pub last_memory: Option<u64>,
    pub retire_requested: bool,
    /// None: the owner rewrote it during every read attempt ("unknown" on the status page).
    pub request: Option<Request>,
}

impl SlotView {
    /// How long the worker has been in its request, or idle.
    pub fn elapsed(&self, now_us: u64) -> Duration {
        Duration::from_micros(now_us.saturating_sub(self.since_us))
    }

    /// The id of the request the worker was in at `at_us` (a line of its output was read
    /// then): the current request's if it began by then, else the last one's if `at_us`
    /// lies between its start and its end. None when the worker has begun another request
    /// since (the line may be the previous one's), when it was between requests, or when
    /// the slot holds no id. So a line is never tagged with a request it may not be from,
    /// given that the master reads a line after the worker wrote it.
    pub fn request_id_at(&self, at_us: u64) -> Option<&str> {
        let id = self.request.as_ref().map(|r| r.request_id.as_str())?;
        let (start, end) = match self.state {
            State::Running | State::Finishing => (self.since_us, u64::MAX),
            State::Idle => {
                let duration = u64::try_from(self.last_duration.as_micros()).unwrap_or(u64::MAX);
                (self.since_us.saturating_sub(duration), self.since_us)
            }
            State::Starting | State::Reading => return None,
        };
        (!id.is_empty() && start <= at_us && at_us <= end).then_some(id)
    }

    /// `since_us` as an `Instant`, given the same moment on both clocks.
    pub fn since(&self, now: Instant, now_us: u64) -> Instant {
        now.checked_sub(self.elapsed(now_us)).unwrap_or(now)
    }
}

/// The fields that the seqlock guards, as one read copied them.
#[derive(Default)]
struct Fields {
    state: u8,
    since_us: u64,
    requests: u64,
    last_duration_us: u64,
    last_cpu_us: u64,
    last_memory: u64,
    text: [Vec<u8>; 5],
}

impl Slot {
    /// Marks the slot as `pid`'s. Idempotent, so that both the zygote (right after fork, before
    /// it looks for the next free slot) and the new worker (first thing) may call it, in either
    /// order. False when another worker holds the slot.
    pub fn claim(&self, pid: Pid, generation: u32) -> bool {
        let current = self.pid.load(Acquire);
        if current != 0 && current != pid.as_raw() {
            return false;
        }
        self.generation.store(generation, Relaxed);
        match self.pid.compare_exchange(0, pid.as_raw(), Release, Acquire) {
            Ok(_) => true,
            Err(holder) => holder == pid.as_raw(),
        }
    }

    /// A single store, outside the seqlock: a state alone is never torn.
    pub fn set_state(&self, state: State) {
        self.state.store(state as u8, Relaxed);
    }

    /// Empties the request strings (inside a [`Slot::write`]).
    fn clear_request(&self) {
        for text in [
            &self.method.len,
            &self.uri.len,
            &self.query.len,
            &self.script.len,
            &self.request_id.len,
        ] {
            text.store(0, Relaxed);
        }
    }

    /// A connection is accepted (or the next request starts on a kept one): the worker is
    /// busy from now on, reading a request it knows nothing about yet. `now_us` is the
    /// request's start, which [`Slot::begin_request`] is given again, so that the time a
    /// client takes to send its request counts toward the request's duration.
    pub fn begin_reading(&self, now_us: u64) {
        self.write(|| {
            self.since_us.store(now_us, Relaxed);
            self.clear_request();
            self.state.store(State::Reading as u8, Relaxed);
        });
    }

    /// The request's parameters are read: the worker is now running it. `start_us` is
    /// when it started (the accept, for a worker that calls [`Slot::begin_reading`]).
    pub fn begin_request(&self, start_us: u64, method: &str, uri: &str, query: &str, script: &str) {
        self.begin_request_id(start_us, method, uri, query, script, "");
    }

    /// [`Slot::begin_request`] with the request's id, written under the same seqlock.
    pub fn begin_request_id(
        &self,
        start_us: u64,
        method: &str,
        uri: &str,
        query: &str,
        script: &str,
        request_id: &str,
    ) {
        self.write(|| {
            self.since_us.store(start_us, Relaxed);
            self.method.store(method);
            self.uri.store(uri);
            self.query.store(query);
            self.script.store(script);
            self.request_id.store(request_id);
            self.state.store(State::Running as u8, Relaxed);
        });
    }

    /// The response is sent: idle again, one more request served. `memory` is the
    /// request's peak memory in bytes, when the runtime measures it (None is stored as 0,
    /// unknown).
    pub fn end_request(&self, now_us: u64, cpu: Duration, memory: Option<u64>) {
        self.write(|| {
            let started = self.since_us.load(Relaxed);
            self.last_duration_us
                .store(now_us.saturating_sub(started), Relaxed);
            self.last_cpu_us
                .store(u64::try_from(cpu.as_micros()).unwrap_or(u64::MAX), Relaxed);
            self.last_memory.store(memory.unwrap_or(0), Relaxed);
            // load + store, not fetch_add: there is one writer, and a locked add costs more.
            self.requests
                .store(self.requests.load(Relaxed) + 1, Relaxed);
            self.since_us.store(now_us, Relaxed);
            self.state.store(State::Idle as u8, Relaxed);
        });
    }

    /// One of several requests the worker runs at once (an ASGI worker) ended while others
    /// go on: one more request served, its duration and CPU time recorded, and the slot
    /// stays busy, still showing the request it showed (or the next one, which the worker
    /// writes with [`Slot::begin_request`]).
    pub fn count_request(&self, duration_us: u64, cpu: Duration, memory: Option<u64>) {
        self.write(|| {
            self.last_duration_us.store(duration_us, Relaxed);
            self.last_cpu_us
                .store(u64::try_from(cpu.as_micros()).unwrap_or(u64::MAX), Relaxed);
            self.last_memory.store(memory.unwrap_or(0), Relaxed);
            self.requests
                .store(self.requests.load(Relaxed) + 1, Relaxed);
        });
    }

    /// A connection ended without a request to serve (the client closed it, or sent
    /// nothing in time): idle again, nothing served.
    pub fn end_reading(&self, now_us: u64) {
        if self.state.load(Relaxed) == State::Idle as u8 {
            return;
        }
        self.write(|| {
            self.since_us.store(now_us, Relaxed);
            self.state.store(State::Idle as u8, Relaxed);
        });
    }

    /// Whether the worker got as far as a request: it took a connection (it is in one now)
    /// or served one. A worker that dies after that died of a request, not of its start;
    /// one that dies idle with nothing served never took one (a worker-mode script's boot
    /// runs in that state). Read by the zygote, which writes the slot after the worker.
    pub fn reached_a_request(&self) -> bool {
        self.requests.load(Relaxed) > 0 || State::from_u8(self.state.load(Relaxed)).is_busy()
    }

    /// The worker asks whether the master wants it gone (after its current request).
    pub fn retire_requested(&self) -> bool {
        let pid = self.pid.load(Relaxed);
        pid != 0 && self.retire.load(Relaxed) == pid
    }

    /// Frees the slot. Called by the zygote once it has reaped the worker (a worker never
    /// frees its own slot, so that a slot is never freed twice); also repairs a slot whose
    /// owner died in the middle of a write.
    pub fn release(&self) {
        self.write(|| {
            for field in [
                &self.since_us,
                &self.requests,
                &self.last_duration_us,
                &self.last_cpu_us,
                &self.last_memory,
            ] {
                field.store(0, Relaxed);
            }
            self.clear_request();
            self.state.store(State::Starting as u8, Relaxed);
        });
        self.retire.store(0, Relaxed);
        self.generation.store(0, Relaxed);
        self.pid.store(0, Release);
    }

    pub(super) fn pid(&self) -> i32 {
        self.pid.load(Acquire)
    }

    /// Master side: true when `pid` still holds the slot and has been asked to retire.
    pub(super) fn request_retire(&self, pid: Pid) -> bool {
        if self.pid.load(Acquire) != pid.as_raw() {
            return false;
        }
        self.retire.store(pid.as_raw(), Relaxed);
        true
    }

    /// The seqlock's write side. `seq | 1` rather than `seq + 1`: a slot whose owner was killed
    /// mid-write is left odd, and its next write (release) must still end even.
    fn write(&self, fields: impl FnOnce()) {
        let odd = self.seq.load(Relaxed) | 1;
        self.seq.store(odd, Relaxed);
        // Orders the odd counter before the field stores (Boehm's seqlock pattern).
        fence(Release);
        fields();
        self.seq.store(odd.wrapping_add(1), Release);
    }

    /// Master side: an owned copy of the slot, None when it is free.
    pub(super) fn view(&self, slot: usize) -> Option<SlotView> {
        let pid = self.pid.load(Acquire);
        if pid <= 0 {
            return None;
        }
        let mut copy = Fields::default();
        let whole = self.read(&mut copy);
        let text = |i: usize| String::from_utf8_lossy(&copy.text[i]).into_owned();
        Some(SlotView {
            slot,
            pid: Pid::from_raw(pid),
            generation: self.generation.load(Relaxed),
            state: State::from_u8(copy.state),
            since_us: copy.since_us,
            requests: copy.requests,
            last_duration: Duration::from_micros(copy.last_duration_us),
            last_cpu: Duration::from_micros(copy.last_cpu_us),
            last_memory: Some(copy.last_memory).filter(|&bytes| bytes > 0),
            retire_requested: self.retire.load(Relaxed) == pid,
            request: whole.then(|| Request {
                method: text(0),
                uri: text(1),
                query: text(2),
                script: text(3),
                request_id: text(4),
            }),
        })
    }

    /// The seqlock's read side; false when every attempt overlapped a write (the numbers in
    /// `copy` are then the last attempt's, each one valid by itself).
    fn read(&self, copy: &mut Fields) -> bool {
        for _ in 0..READ_ATTEMPTS {
            let before = self.seq.load(Acquire);
            self.load_fields(copy);
            fence(Acquire);
            if before & 1 == 0 && self.seq.load(Relaxed) == before {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    fn load_fields(&self, copy: &mut Fields) {
        copy.state = self.state.load(Relaxed);
        copy.since_us = self.since_us.load(Relaxed);
        copy.requests = self.requests.load(Relaxed);
        copy.last_duration_us = self.last_duration_us.load(Relaxed);
        copy.last_cpu_us = self.last_cpu_us.load(Relaxed);
        copy.last_memory = self.last_memory.load(Relaxed);
        let [method, uri, query, script, request_id] = &mut copy.text;
        self.method.load(method);
        self.uri.load(uri);
        self.query.load(query);
        self.script.load(script);
        self.request_id.load(request_id);
    }

    /// Leaves the slot as a writer killed mid-write would: the counter odd.
    #[cfg(test)]
    pub(super) fn abandon_write(&self) {
        self.seq.store(self.seq.load(Relaxed) | 1, Relaxed);
    }
}
