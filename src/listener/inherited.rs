//! Sockets systemd passes (socket activation): a pool whose name is a socket's
//! `FileDescriptorName=` takes it instead of binding its `listen`.
//!
//! The socket must be what the pool's `listen` says, so that nginx's `fastcgi_pass` and
//! the `.socket` unit cannot silently disagree: a listening stream socket, of the same
//! family, at the same path (unix) or on the same port (TCP). systemd owns it: drover never
//! unlinks its file, never binds it again on reload and never shuts it down (a stopped
//! drover's queued connections wait for the next one systemd starts).

use std::os::fd::OwnedFd;

use nix::sys::socket::{SockType, SockaddrStorage, getsockname, getsockopt, sockopt};

use super::Listener;
use crate::config::ListenAddr;

#[derive(Debug, thiserror::Error)]
pub enum InheritError {
    #[error("socket {name:?} (fd {fd}): {what}: {err}")]
    Io {
        name: String,
        fd: i32,
        what: &'static str,
        err: nix::Error,
    },
    #[error("socket {name:?} (fd {fd}) is {found}, but pool {name}'s listen is {wanted}")]
    Mismatch {
        name: String,
        fd: i32,
        found: String,
        wanted: ListenAddr,
    },
}

/// Takes `fd`, passed by systemd as `name`, as the listener of the pool listening at
/// `wanted` (the pool of that name).
pub fn adopt(fd: OwnedFd, name: &str, wanted: &ListenAddr) -> Result<Listener, InheritError> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    let io = |what, err| InheritError::Io {
        name: name.to_string(),
        fd: raw,
        what,
        err,
    };
    let stream =
        getsockopt(&fd, sockopt::SockType).map_err(|e| io("SO_TYPE", e))? == SockType::Stream;
    let listening = getsockopt(&fd, sockopt::AcceptConn).map_err(|e| io("SO_ACCEPTCONN", e))?;
    let local: SockaddrStorage = getsockname(raw).map_err(|e| io("getsockname", e))?;
    let found = describe(&local);
    if !(stream && listening && matches(&local, wanted)) {
        let kind = match (stream, listening) {
            (false, _) => "not a stream socket: ",
            (true, false) => "not listening: ",
            _ => "",
        };
        return Err(InheritError::Mismatch {
            name: name.to_string(),
            fd: raw,
            found: format!("{kind}{found}"),
            wanted: wanted.clone(),
        });
    }
    Ok(Listener {
        addr: wanted.clone(),
        fd,
        inherited: true,
    })
}

/// Whether a socket bound at `local` is the one `wanted` describes: the same unix path, or
/// a TCP socket on the same port (its address may be written differently, `[::]` for
/// every one).
fn matches(local: &SockaddrStorage, wanted: &ListenAddr) -> bool {
    match wanted {
        ListenAddr::Unix(path) => local
            .as_unix_addr()
            .and_then(|unix| unix.path())
            .is_some_and(|p| p == path.as_path()),
        ListenAddr::Tcp(addr) => port(local) == Some(addr.port()),
        ListenAddr::AnyAddress(wanted) => port(local) == Some(*wanted),
        ListenAddr::NoSocket => false,
    }
}

fn port(local: &SockaddrStorage) -> Option<u16> {
    local
        .as_sockaddr_in()
        .map(|v4| v4.port())
        .or_else(|| local.as_sockaddr_in6().map(|v6| v6.port()))
}

fn describe(local: &SockaddrStorage) -> String {
    if let Some(unix) = local.as_unix_addr() {
        return match unix.path() {
            Some(path) => format!("unix socket {}", path.display()),
            None => "an unnamed or abstract unix socket".to_string(),
        };
    }
    match port(local) {
        Some(_) => format!("TCP {local}"),
        None => format!("{local}"),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::{UnixDatagram, UnixListener};

    use super::*;

    #[test]
    fn a_unix_socket_at_the_pools_path_is_adopted_and_one_elsewhere_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("www.sock");
        let socket = UnixListener::bind(&path).unwrap();
        let wanted = ListenAddr::Unix(path.clone());
        let fd = OwnedFd::from(socket.try_clone().unwrap());
        let listener = adopt(fd, "www", &wanted).unwrap();
        assert!(listener.inherited);

        let elsewhere = ListenAddr::Unix(dir.path().join("api.sock"));
        let err = adopt(OwnedFd::from(socket), "www", &elsewhere).unwrap_err();
        assert!(err.to_string().contains("is unix socket"), "{err}");
        let tcp = ListenAddr::AnyAddress(9000);
        let datagram = UnixDatagram::bind(dir.path().join("d.sock")).unwrap();
        let err = adopt(OwnedFd::from(datagram), "www", &tcp).unwrap_err();
        assert!(err.to_string().contains("not a stream socket"), "{err}");
    }

    #[test]
    fn a_tcp_socket_on_the_pools_port_is_adopted_whatever_its_address() {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let wanted = ListenAddr::AnyAddress(port);
        adopt(OwnedFd::from(socket.try_clone().unwrap()), "www", &wanted).unwrap();
        let wanted = ListenAddr::Tcp(([127, 0, 0, 1], port).into());
        adopt(OwnedFd::from(socket.try_clone().unwrap()), "www", &wanted).unwrap();
        let other = ListenAddr::Tcp(([127, 0, 0, 1], port.wrapping_add(1)).into());
        assert!(adopt(OwnedFd::from(socket), "www", &other).is_err());
        let unix = ListenAddr::Unix("/run/drover/www.sock".into());
        let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert!(adopt(OwnedFd::from(socket), "www", &unix).is_err());
    }
}
