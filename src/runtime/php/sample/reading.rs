//! A worker waiting for a client's request, seen from outside: blocked reading (or polling)
//! a socket that is not its listener (fd 0). php-cgi does this between accepting a
//! connection and running the script: a poll of up to 5 s for the first bytes, then reads
//! until the request's params and body are in. A client that trickles its request (slowloris)
//! keeps it there, looking idle to anyone who only asks whether PHP code runs.
//!
//! The wait is keyed to the connection, the socket's inode (`/proc/PID/fd/N` reads
//! `socket:[INODE]`), so that a worker serving a stream of short requests, each on a new
//! connection, is not taken for one slow client.

use nix::unistd::Pid;

use super::remote::Remote;
use super::syscall::{Blocked, blocked};

/// The connection a worker is blocked reading, by its socket inode; `None` when it is not
/// blocked reading a socket other than fd 0 (or cannot be looked at).
pub fn reading(pid: Pid) -> Option<u64> {
    let fd = match blocked(pid)? {
        Blocked::Read { fd } => fd,
        // php-cgi polls the one connection it accepted; a wider poll is something else.
        Blocked::Poll { fds, nfds: 1 } => polled_fd(pid, fds)?,
        _ => return None,
    };
    if fd <= 0 {
        return None;
    }
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    socket_inode(link.to_str()?)
}

/// The fd of the first `struct pollfd` at `addr` (`int fd; short events; short revents`).
fn polled_fd(pid: Pid, addr: u64) -> Option<i32> {
    let mut fd = [0u8; 4];
    Remote { pid }.read_exact(addr, &mut fd).ok()?;
    Some(i32::from_ne_bytes(fd))
}

/// `socket:[12345]` → 12345; anything else (a pipe, a file) → None.
fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sockets_have_an_inode_here() {
        assert_eq!(socket_inode("socket:[4026531993]"), Some(4026531993));
        assert_eq!(socket_inode("pipe:[123]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        assert_eq!(socket_inode("socket:[x]"), None);
    }

    #[test]
    fn a_thread_blocked_reading_a_socket_is_seen_reading_it() {
        use std::os::unix::net::UnixStream;
        let (mut a, b) = UnixStream::pair().unwrap();
        let tid = std::sync::Arc::new(std::sync::atomic::AtomicI32::new(0));
        let seen = tid.clone();
        let reader = std::thread::spawn(move || {
            seen.store(
                nix::unistd::gettid().as_raw(),
                std::sync::atomic::Ordering::SeqCst,
            );
            let mut buf = [0u8; 1];
            std::io::Read::read(&mut &b, &mut buf).unwrap();
        });
        // Bounded: the thread blocks in read within microseconds of starting.
        let inode = (0..2000).find_map(|_| {
            let tid = Pid::from_raw(tid.load(std::sync::atomic::Ordering::SeqCst));
            let inode = (tid.as_raw() != 0).then(|| reading(tid)).flatten();
            if inode.is_none() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            inode
        });
        std::io::Write::write_all(&mut a, b"x").unwrap();
        reader.join().unwrap();
        assert!(inode.is_some_and(|i| i > 0), "{inode:?}");
    }
}
