//! How many connections wait in a listener's accept queue, for the status page: TCP through
//! TCP_INFO, unix sockets through netlink sock_diag (php-fpm reads 0 on unix sockets:
//! php-src#9943). Both are cheap enough to ask on every tick.

use std::os::fd::{AsRawFd, BorrowedFd};

use crate::config::ListenAddr;

/// (connections waiting, backlog), or None when the kernel does not say.
pub fn queue(fd: BorrowedFd<'_>, addr: &ListenAddr) -> Option<(u32, u32)> {
    match addr {
        ListenAddr::Tcp(_) | ListenAddr::AnyAddress(_) => tcp_queue(fd),
        ListenAddr::Unix(_) => unix_queue(fd),
        ListenAddr::NoSocket => None,
    }
}

fn tcp_queue(fd: BorrowedFd<'_>) -> Option<(u32, u32)> {
    // SAFETY: a zeroed tcp_info is a valid out-parameter of the size we pass.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: valid descriptor, pointer and length.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    // For a listening socket the kernel reports the accept queue in unacked and the
    // backlog in sacked.
    (rc == 0).then_some((info.tcpi_unacked, info.tcpi_sacked))
}

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_RQLEN: u32 = 0x10;
const UNIX_DIAG_RQLEN: u16 = 4;
const TCP_LISTEN: u32 = 10;

/// Asks sock_diag for the listening unix socket with this inode: its receive queue is the
/// number of connections waiting, its send queue the backlog.
fn unix_queue(fd: BorrowedFd<'_>) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()?
        .ino() as u32;
    // SAFETY: socket() with constant arguments; the descriptor is owned below.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if raw < 0 {
        return None;
    }
    // SAFETY: a fresh descriptor we own.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    // nlmsghdr (16) + unix_diag_req (24)
    let mut req = [0u8; 40];
    req[0..4].copy_from_slice(&40u32.to_ne_bytes());
    req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    req[6..8].copy_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req[16] = libc::AF_UNIX as u8;
    req[20..24].copy_from_slice(&(1u32 << TCP_LISTEN).to_ne_bytes());
    req[24..28].copy_from_slice(&ino.to_ne_bytes());
    req[28..32].copy_from_slice(&UDIAG_SHOW_RQLEN.to_ne_bytes());
    req[32..40].copy_from_slice(&[0xff; 8]);
    // SAFETY: sending a buffer we own to the kernel's netlink socket.
    if unsafe { libc::send(sock.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return None;
    }
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: receiving into a buffer we own, of the length we pass.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n <= 0 {
            return None;
        }
        let mut data = &buf[..n as usize];
        while data.len() >= 16 {
            let len = u32::from_ne_bytes(data[0..4].try_into().ok()?) as usize;
            let kind = u16::from_ne_bytes(data[4..6].try_into().ok()?);
            if len < 16 || len > data.len() {
                return None;
            }
            if kind == libc::NLMSG_DONE as u16 || kind == libc::NLMSG_ERROR as u16 {
                return None;
            }
            if let Some(found) = parse_unix_diag(&data[16..len], ino) {
                return Some(found);
            }
            data = &data[((len + 3) & !3).min(data.len())..];
        }
    }
}

/// One unix_diag_msg (16 bytes) and its attributes: the queue lengths if it is `ino`.
fn parse_unix_diag(msg: &[u8], ino: u32) -> Option<(u32, u32)> {
    if msg.len() < 16 || u32::from_ne_bytes(msg[4..8].try_into().ok()?) != ino {
        return None;
    }
    let mut attrs = &msg[16..];
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes(attrs[0..2].try_into().ok()?) as usize;
        let kind = u16::from_ne_bytes(attrs[2..4].try_into().ok()?);
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == UNIX_DIAG_RQLEN && len >= 12 {
            let rqueue = u32::from_ne_bytes(attrs[4..8].try_into().ok()?);
            let wqueue = u32::from_ne_bytes(attrs[8..12].try_into().ok()?);
            return Some((rqueue, wqueue));
        }
        attrs = &attrs[((len + 3) & !3).min(attrs.len())..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::os::unix::net::{UnixListener, UnixStream};

    #[test]
    fn a_unix_listener_reports_its_waiting_connections() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let addr = ListenAddr::Unix(path.clone());
        let (waiting, _) = queue(listener.as_fd(), &addr).expect("sock_diag answers");
        assert_eq!(waiting, 0);
        let _a = UnixStream::connect(&path).unwrap();
        let _b = UnixStream::connect(&path).unwrap();
        let (waiting, backlog) = queue(listener.as_fd(), &addr).unwrap();
        assert_eq!(waiting, 2);
        assert!(backlog > 0);
    }

    #[test]
    fn a_tcp_listener_reports_its_waiting_connections() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let local = listener.local_addr().unwrap();
        let addr = ListenAddr::Tcp(local);
        let _a = std::net::TcpStream::connect(local).unwrap();
        // The handshake completes in the kernel; the connection then waits for accept().
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while queue(listener.as_fd(), &addr).unwrap().0 < 1 && std::time::Instant::now() < deadline
        {
            std::thread::yield_now();
        }
        assert_eq!(queue(listener.as_fd(), &addr).unwrap().0, 1);
    }
}
