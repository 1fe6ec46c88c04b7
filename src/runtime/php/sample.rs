//! Observing php-cgi workers from outside: busy or idle, the current request, and the PHP
//! call stack, read from the worker's `executor_globals` and `sapi_globals` with
//! `process_vm_readv`, without stopping it (docs/ARCHITECTURE.md, "Why a scoreboard").
//!
//! ```text
//! let mut sampler = Sampler::new();           // one per master: caches each php-cgi binary
//! let worker = sampler.attach(pid)?;          // once per worker: /proc/PID/exe + maps
//! let sample = worker.sample()?;              // every tick: a few process_vm_readv calls
//! let stack = worker.stack(20)?;              // for the slowlog
//! ```
//!
//! The binary (found through `/proc/PID/exe`) is parsed once per (device, inode): its
//! `.dynsym` gives the addresses of the globals, its `.rodata` the PHP version, which picks the
//! struct offsets ([`offsets`]). A worker adds its load bias from `/proc/PID/maps`. When the
//! build is unknown (no row for its version and arch, a ZTS build, symbols missing),
//! [`Sampler::attach`] returns [`SampleError::UnknownBuild`] (cached too, so it stays cheap)
//! and the caller falls back to [`idle_by_syscall`].
//!
//! `uri` is `SG(request_info).request_uri`, which php-cgi sets from `SCRIPT_NAME` (as
//! php-fpm's status "request URI" does), not the client's `REQUEST_URI`.

mod elf;
pub mod offsets;
mod reading;
mod remote;
mod stack;
mod syscall;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::os::linux::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::Arc;

use nix::unistd::Pid;

pub use offsets::Arch;
pub use reading::reading;
pub use remote::ReadError;
pub use stack::{Frame, Location, Stack, StackEnd};
pub use syscall::idle_by_syscall;

use remote::{Remote, field_u64};

/// Longest method, URI, query or script kept in a [`Sample`] (bytes; longer ones are cut).
pub const STRING_LIMIT: usize = 256;

/// php-fpm's default `request_slowlog_trace_depth`.
pub const DEFAULT_DEPTH: usize = 20;

/// What one look at a worker shows. The request fields are set only while it is busy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Running PHP code (`EG(current_execute_data)` is set). False while the worker waits in
    /// accept, and also in the short phases of a request before and after the script runs.
    pub busy: bool,
    pub method: Option<String>,
    /// `SCRIPT_NAME` as php-cgi resolved it (see the module docs).
    pub uri: Option<String>,
    pub query: Option<String>,
    /// The script file (`SG(request_info).path_translated`).
    pub script: Option<String>,
    pub content_length: Option<i64>,
    /// `SG(global_request_time)`, Unix seconds: PHP computes it lazily on first use in a
    /// request (`$_SERVER['REQUEST_TIME*']`, OPcache revalidation, ...); php-cgi 8.2 here had
    /// it set in every running request measured, with and without OPcache. None while it is
    /// still 0: the caller then times the request itself.
    pub request_time: Option<f64>,
}

/// Why a build cannot be sampled: the caller falls back to [`idle_by_syscall`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnknownBuild {
    #[error("not a readable ELF64 binary: {0}")]
    NotElf(String),
    #[error("no offsets for this architecture")]
    Arch,
    #[error("PHP version not found in the binary")]
    NoVersion,
    #[error("no offsets for PHP {0}.{1}.{2}")]
    Version(u32, u32, u32),
    #[error("ZTS (thread-safe) build")]
    Zts,
    #[error("symbol {0} missing from .dynsym or smaller than expected")]
    Symbol(&'static str),
}

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{path}: {reason}")]
    UnknownBuild { path: PathBuf, reason: UnknownBuild },
    /// `/proc/PID/...` could not be read: usually the process is gone.
    #[error("process {pid}: {source}")]
    Proc { pid: Pid, source: std::io::Error },
    #[error("process {0}: its binary is not in /proc/PID/maps")]
    NotMapped(Pid),
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl SampleError {
    /// True when this build cannot be sampled at all (use [`idle_by_syscall`] instead);
    /// false for errors of one process (gone, not permitted).
    pub fn is_unknown_build(&self) -> bool {
        matches!(self, SampleError::UnknownBuild { .. })
    }
}

/// One php-cgi binary, parsed once.
#[derive(Debug)]
struct Binary {
    path: PathBuf,
    dev: u64,
    ino: u64,
    version: (u32, u32, u32),
    row: &'static offsets::Row,
    first_load_delta: u64,
    executor_globals: u64,
    sapi_globals: u64,
}

/// What is known of one binary: parsed, or why it cannot be sampled.
type Known = Result<Arc<Binary>, (PathBuf, UnknownBuild)>;

/// Samples php-cgi workers; keeps what it learnt of each binary.
#[derive(Debug, Default)]
pub struct Sampler {
    binaries: HashMap<(u64, u64), Known>,
}

/// A php-cgi worker ready to be sampled. Drop it when the process exits (its pid may be
/// reused).
#[derive(Debug, Clone)]
pub struct Worker {
    remote: Remote,
    binary: Arc<Binary>,
    executor_globals: u64,
    sapi_globals: u64,
}

const SYMBOLS: [&str; 3] = [
    "executor_globals",
    "sapi_globals",
    "executor_globals_offset",
];

impl Sampler {
    pub fn new() -> Sampler {
        Sampler::default()
    }

    /// Prepares to sample `pid`: finds its binary (parsed on first sight only) and its load
    /// bias. Costs a stat and a read of `/proc/PID/maps` once the binary is known.
    pub fn attach(&mut self, pid: Pid) -> Result<Worker, SampleError> {
        let proc_err = |source| SampleError::Proc { pid, source };
        let exe = PathBuf::from(format!("/proc/{pid}/exe"));
        let meta = std::fs::metadata(&exe).map_err(proc_err)?;
        let key = (meta.st_dev(), meta.st_ino());
        let binary = match self.binaries.get(&key) {
            Some(known) => known.clone(),
            None => {
                let path = std::fs::read_link(&exe).map_err(proc_err)?;
                let parsed = load(&exe, path.clone(), key)
                    .map(Arc::new)
                    .map_err(|reason| (path, reason));
                self.binaries.insert(key, parsed.clone());
                parsed
            }
        };
        let binary = binary.map_err(|(path, reason)| SampleError::UnknownBuild { path, reason })?;
        // The binary is mapped first (lowest) as a rule: stop reading at its line.
        let maps = std::fs::File::open(format!("/proc/{pid}/maps")).map_err(proc_err)?;
        let lines = BufReader::new(maps).lines().map_while(Result::ok);
        let (start, offset) =
            first_mapping(lines, binary.dev, binary.ino).ok_or(SampleError::NotMapped(pid))?;
        let bias = start
            .wrapping_sub(offset)
            .wrapping_sub(binary.first_load_delta);
        Ok(Worker {
            remote: Remote { pid },
            executor_globals: bias.wrapping_add(binary.executor_globals),
            sapi_globals: bias.wrapping_add(binary.sapi_globals),
            binary,
        })
    }
}

/// Parses a binary not seen before.
fn load(
    exe: &std::path::Path,
    path: PathBuf,
    (dev, ino): (u64, u64),
) -> Result<Binary, UnknownBuild> {
    let info = elf::inspect(exe, &SYMBOLS).map_err(|e| UnknownBuild::NotElf(e.to_string()))?;
    let arch = info.arch.ok_or(UnknownBuild::Arch)?;
    let version = info.php_version.ok_or(UnknownBuild::NoVersion)?;
    if info.symbols.contains_key("executor_globals_offset") {
        return Err(UnknownBuild::Zts);
    }
    let row = offsets::lookup(version.0, version.1, arch)
        .ok_or(UnknownBuild::Version(version.0, version.1, version.2))?;
    let symbol = |name: &'static str, needed: u64| match info.symbols.get(name) {
        Some(&(value, size)) if size >= needed => Ok(value),
        _ => Err(UnknownBuild::Symbol(name)),
    };
    Ok(Binary {
        path,
        dev,
        ino,
        version,
        row,
        first_load_delta: info.first_load_delta,
        executor_globals: symbol("executor_globals", row.offsets.eg_needed())?,
        sapi_globals: symbol("sapi_globals", row.offsets.sg_needed())?,
    })
}

/// Start and file offset of the first mapping of the file (dev, ino) in `/proc/PID/maps`.
fn first_mapping(
    mut lines: impl Iterator<Item = String>,
    dev: u64,
    ino: u64,
) -> Option<(u64, u64)> {
    // glibc's encoding of dev_t.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    lines.find_map(|line| {
        let mut f = line.split_whitespace();
        let (range, _perms, offset, devno, inode) =
            (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
        if inode.parse::<u64>().ok()? != ino {
            return None;
        }
        let (maj, min) = devno.split_once(':')?;
        if u64::from_str_radix(maj, 16).ok()? != major
            || u64::from_str_radix(min, 16).ok()? != minor
        {
            return None;
        }
        let start = u64::from_str_radix(range.split_once('-')?.0, 16).ok()?;
        Some((start, u64::from_str_radix(offset, 16).ok()?))
    })
}

impl Worker {
    pub fn pid(&self) -> Pid {
        self.remote.pid
    }

    /// The PHP version of the worker's binary.
    pub fn php_version(&self) -> (u32, u32, u32) {
        self.binary.version
    }

    /// False when the offsets used come from an unverified table row (see [`offsets`]).
    pub fn offsets_verified(&self) -> bool {
        self.binary.row.verified
    }

    /// The binary's path as `/proc/PID/exe` named it when first seen.
    pub fn binary(&self) -> &std::path::Path {
        &self.binary.path
    }

    fn current_execute_data(&self) -> Result<u64, ReadError> {
        self.remote
            .read_u64(self.executor_globals + self.binary.row.offsets.eg_current_execute_data)
    }

    /// Busy or idle and the current request. About six small reads.
    pub fn sample(&self) -> Result<Sample, SampleError> {
        if self.current_execute_data()? == 0 {
            return Ok(Sample::default());
        }
        let o = &self.binary.row.offsets;
        let mut sg = [0u8; 512];
        let sg = sg
            .get_mut(..o.sg_needed() as usize)
            .ok_or(ReadError::Fault(self.sapi_globals))?;
        self.remote.read_exact(self.sapi_globals, sg)?;
        let string = |at: u64| match field_u64(sg, at) {
            Some(0) | None => None,
            Some(ptr) => self.remote.read_c_string(ptr, STRING_LIMIT).ok(),
        };
        let time = field_u64(sg, o.sg_global_request_time).map(f64::from_bits);
        let sample = Sample {
            busy: true,
            method: string(o.sg_request_method),
            uri: string(o.sg_request_uri),
            query: string(o.sg_query_string),
            script: string(o.sg_path_translated),
            content_length: field_u64(sg, o.sg_content_length).map(|n| n as i64),
            request_time: time.filter(|t| t.is_finite() && *t > 0.0),
        };
        // The request may have ended while its fields were read: then they may be stale.
        if self.current_execute_data()? == 0 {
            return Ok(Sample::default());
        }
        Ok(sample)
    }

    /// The PHP call stack, innermost first, at most `depth` frames; empty when idle.
    pub fn stack(&self, depth: usize) -> Result<Stack, SampleError> {
        let first = self.current_execute_data()?;
        Ok(stack::walk(
            &self.remote,
            &self.binary.row.offsets,
            first,
            depth,
        )?)
    }
}
