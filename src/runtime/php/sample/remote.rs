//! Bounded reads of another process's memory with `process_vm_readv`, without stopping it.
//!
//! The target keeps running, so anything read may be torn or stale: callers validate every
//! pointer with [`plausible`] before following it, every length is capped, and a read that
//! faults returns an error (or the bytes before the fault), never a panic.

use std::io::IoSliceMut;

use nix::errno::Errno;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

/// Remote reads are split at 4 KiB boundaries (every page size is a multiple of it), so that
/// a read running into an unmapped page still returns the bytes before it.
const CHUNK: usize = 4096;
/// At most this many bytes per read call: enough for any struct or string the sampler wants.
pub const MAX_READ: usize = 16 * 1024;

/// A pointer that could be a heap/static address of a 64-bit user process: non-null and
/// below the top of the largest user address space (57-bit, 5-level paging).
pub fn plausible(addr: u64) -> bool {
    (4096..(1 << 56)).contains(&addr)
}

/// A pointer to a C struct the engine allocated: [`plausible`] and 8-byte aligned.
pub fn plausible_struct(addr: u64) -> bool {
    plausible(addr) && addr.is_multiple_of(8)
}

/// Why a read failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The process is gone (ESRCH) or may not be read (EPERM).
    #[error("cannot read process memory: {0}")]
    Process(Errno),
    /// The address is not mapped, or was not fully read: a torn or stale pointer.
    #[error("unreadable address {0:#x}")]
    Fault(u64),
}

/// One target process.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    pub pid: Pid,
}

impl Remote {
    /// Reads up to `buf.len()` bytes at `addr`; returns how many were read before the first
    /// unreadable page (0 if `addr` itself is unmapped).
    pub fn read_partial(&self, addr: u64, buf: &mut [u8]) -> Result<usize, ReadError> {
        let len = buf.len().min(MAX_READ);
        if len == 0 {
            return Ok(0);
        }
        if !plausible(addr) || addr.checked_add(len as u64).is_none() {
            return Err(ReadError::Fault(addr));
        }
        let mut remote = [RemoteIoVec { base: 0, len: 0 }; MAX_READ / CHUNK + 1];
        let mut count = 0;
        let (mut at, end) = (addr as usize, addr as usize + len);
        while at < end {
            let next = ((at / CHUNK) + 1) * CHUNK;
            let stop = next.min(end);
            remote[count] = RemoteIoVec {
                base: at,
                len: stop - at,
            };
            count += 1;
            at = stop;
        }
        let mut local = [IoSliceMut::new(&mut buf[..len])];
        match process_vm_readv(self.pid, &mut local, &remote[..count]) {
            Ok(n) => Ok(n),
            Err(Errno::EFAULT) => Ok(0),
            Err(e) => Err(ReadError::Process(e)),
        }
    }

    /// Reads exactly `buf.len()` bytes at `addr`.
    pub fn read_exact(&self, addr: u64, buf: &mut [u8]) -> Result<(), ReadError> {
        if buf.len() > MAX_READ || self.read_partial(addr, buf)? != buf.len() {
            return Err(ReadError::Fault(addr));
        }
        Ok(())
    }

    pub fn read_u64(&self, addr: u64) -> Result<u64, ReadError> {
        let mut b = [0; 8];
        self.read_exact(addr, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    pub fn read_u32(&self, addr: u64) -> Result<u32, ReadError> {
        let mut b = [0; 4];
        self.read_exact(addr, &mut b)?;
        Ok(u32::from_ne_bytes(b))
    }

    /// A NUL-terminated C string at `addr`, at most `max` bytes (longer ones are cut, as are
    /// strings whose end is unreadable). Invalid UTF-8 is replaced.
    pub fn read_c_string(&self, addr: u64, max: usize) -> Result<String, ReadError> {
        let mut buf = vec![0; max.min(MAX_READ)];
        let n = self.read_partial(addr, &mut buf)?;
        if n == 0 && !buf.is_empty() {
            return Err(ReadError::Fault(addr));
        }
        let text = &buf[..n];
        let end = text.iter().position(|&b| b == 0).unwrap_or(n);
        Ok(String::from_utf8_lossy(&text[..end]).into_owned())
    }
}

/// Reads a field of `N` bytes from a block read earlier (`None` if the block is too short).
pub fn field<const N: usize>(block: &[u8], at: u64) -> Option<[u8; N]> {
    let at = usize::try_from(at).ok()?;
    block.get(at..at.checked_add(N)?)?.try_into().ok()
}

pub fn field_u64(block: &[u8], at: u64) -> Option<u64> {
    field::<8>(block, at).map(u64::from_ne_bytes)
}

pub fn field_u32(block: &[u8], at: u64) -> Option<u32> {
    field::<4>(block, at).map(u32::from_ne_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_memory_and_stops_at_unmapped() {
        let me = Remote { pid: Pid::this() };
        let data: Vec<u8> = std::hint::black_box(b"hello\0world".to_vec());
        let addr = data.as_ptr() as u64;
        assert_eq!(me.read_c_string(addr, 64).unwrap(), "hello");
        assert_eq!(me.read_c_string(addr, 3).unwrap(), "hel");
        let value: u64 = std::hint::black_box(0x1122_3344_5566_7788);
        assert_eq!(me.read_u64(&value as *const u64 as u64).unwrap(), value);
        assert_eq!(me.read_u64(8), Err(ReadError::Fault(8)));
        assert_eq!(me.read_u64(0x10), Err(ReadError::Fault(0x10)));
        assert!(me.read_u64(1 << 55).is_err());
    }

    #[test]
    fn fields_are_bounded() {
        let block = [1u8, 0, 0, 0, 2, 0, 0, 0];
        assert_eq!(field_u32(&block, 4), Some(2));
        assert_eq!(field_u64(&block, 0), Some(0x2_0000_0001));
        assert_eq!(field_u64(&block, 4), None);
        assert_eq!(field_u32(&block, u64::MAX), None);
    }
}
