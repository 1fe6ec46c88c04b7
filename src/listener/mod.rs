//! Binding a pool's listening socket: unix (stale file removed, owner, group, mode) or TCP
//! (IPv4/IPv6, SO_REUSEADDR, backlog).
//!
//! The master binds every listener before any worker exists and holds it for its whole
//! life, or takes the one systemd passed ([`inherited`]). Workers get a dup as fd 0 and `accept()` on it themselves. The socket stays in
//! blocking mode: the flag is shared by every dup, and php-cgi expects a blocking accept.

pub mod inherited;
pub mod queue;

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::sys::socket::{
    AddressFamily, Backlog, SockFlag, SockType, SockaddrIn, SockaddrIn6, UnixAddr, bind, listen,
    setsockopt, socket, sockopt,
};
use nix::unistd::{Gid, Group, Uid, User, chown};

use crate::config::{ListenAddr, Pool};

#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    #[error("{addr}: address in use by another process")]
    InUse { addr: ListenAddr },
    #[error("{path}: exists and is not a socket; refusing to remove it")]
    NotASocket { path: PathBuf },
    #[error("{addr}: {what}: {source}")]
    Io {
        addr: ListenAddr,
        what: &'static str,
        source: io::Error,
    },
    #[error(
        "{wanted}: systemd passed this pool the socket at {inherited}; change the .socket unit and restart drover to move it"
    )]
    InheritedElsewhere {
        wanted: ListenAddr,
        inherited: ListenAddr,
    },
    #[error("{addr}: {kind} {name:?} does not exist")]
    NoSuchOwner {
        addr: ListenAddr,
        kind: &'static str,
        name: String,
    },
}

/// A bound, listening socket owned by the master.
#[derive(Debug)]
pub struct Listener {
    pub addr: ListenAddr,
    pub fd: OwnedFd,
    /// Passed by systemd (socket activation): systemd owns it, so drover never unlinks
    /// its file nor shuts it down.
    pub inherited: bool,
}

impl Listener {
    /// Binds the pool's `listen` address with its backlog, owner, group and mode.
    pub fn bind(pool: &Pool) -> Result<Listener, ListenError> {
        let addr = pool.listen.clone();
        let fd = match &addr {
            ListenAddr::Unix(path) => bind_unix(&addr, path, pool)?,
            ListenAddr::Tcp(socket_addr) => bind_tcp(&addr, *socket_addr, true)?,
            ListenAddr::AnyAddress(port) => bind_any(&addr, *port)?,
            // A [program] pool's copies read /dev/null; nothing listens.
            ListenAddr::NoSocket => {
                let null = std::fs::File::open("/dev/null").map_err(|source| ListenError::Io {
                    addr: addr.clone(),
                    what: "open /dev/null",
                    source,
                })?;
                return Ok(Listener {
                    addr,
                    fd: null.into(),
                    inherited: false,
                });
            }
        };
        let backlog = Backlog::new(pool.listen_backlog).unwrap_or(Backlog::MAXCONN);
        listen(&fd, backlog).map_err(|e| io_error(&addr, "listen", e))?;
        Ok(Listener {
            addr,
            fd,
            inherited: false,
        })
    }

    /// A new descriptor for the same socket, to hand to a worker as fd 0.
    pub fn dup(&self) -> io::Result<OwnedFd> {
        self.fd.as_fd().try_clone_to_owned()
    }

    /// Stops taking connections for good (`shutdown(SHUT_RD)`): new ones are refused,
    /// queued ones can still be accepted. Not for a socket systemd passed: it must still
    /// listen for the next drover, so it stays as it is and connections wait in its queue.
    pub fn shut_down(&self) -> nix::Result<()> {
        if self.inherited || self.addr == ListenAddr::NoSocket {
            return Ok(());
        }
        nix::sys::socket::shutdown(self.fd.as_raw_fd(), nix::sys::socket::Shutdown::Read)
    }

    /// Removes the socket file of a unix listener (on exit), unless systemd passed it.
    pub fn unlink(&self) {
        if self.inherited {
            return;
        }
        if let ListenAddr::Unix(path) = &self.addr {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn io_error(addr: &ListenAddr, what: &'static str, errno: nix::Error) -> ListenError {
    let source = io::Error::from(errno);
    if source.kind() == io::ErrorKind::AddrInUse {
        return ListenError::InUse { addr: addr.clone() };
    }
    ListenError::Io {
        addr: addr.clone(),
        what,
        source,
    }
}

fn bind_unix(addr: &ListenAddr, path: &Path, pool: &Pool) -> Result<OwnedFd, ListenError> {
    remove_stale(addr, path)?;
    let fd = socket(
        AddressFamily::Unix,
        SockType::Stream,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| io_error(addr, "socket", e))?;
    let unix_addr = UnixAddr::new(path).map_err(|e| io_error(addr, "address", e))?;
    bind(fd.as_raw_fd(), &unix_addr).map_err(|e| io_error(addr, "bind", e))?;
    let owner = resolve_owner(addr, pool)?;
    if owner != (None, None) {
        chown(path, owner.0, owner.1).map_err(|e| io_error(addr, "chown", e))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(pool.listen_mode)).map_err(
        |source| ListenError::Io {
            addr: addr.clone(),
            what: "chmod",
            source,
        },
    )?;
    Ok(fd)
}

/// A socket file left by a previous run that nobody answers on is removed; one that
/// answers belongs to a live server and is an error; a file that is not a socket is never
/// removed.
fn remove_stale(addr: &ListenAddr, path: &Path) -> Result<(), ListenError> {
    if !check_stale(addr, path)? {
        return Ok(());
    }
    std::fs::remove_file(path).map_err(|source| ListenError::Io {
        addr: addr.clone(),
        what: "remove stale socket",
        source,
    })
}

/// Whether `path` holds a socket file nobody answers on (one a previous run left), which
/// may be replaced. A socket that answers belongs to a live server and is an error, as is a
/// file that is not a socket. False when there is no file.
pub fn check_stale(addr: &ListenAddr, path: &Path) -> Result<bool, ListenError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(false);
    };
    if !meta.file_type().is_socket() {
        return Err(ListenError::NotASocket {
            path: path.to_owned(),
        });
    }
    if UnixStream::connect(path).is_ok() {
        return Err(ListenError::InUse { addr: addr.clone() });
    }
    Ok(true)
}

fn resolve_owner(
    addr: &ListenAddr,
    pool: &Pool,
) -> Result<(Option<Uid>, Option<Gid>), ListenError> {
    let missing = |kind, name: &String| ListenError::NoSuchOwner {
        addr: addr.clone(),
        kind,
        name: name.clone(),
    };
    let uid = match &pool.listen_owner {
        Some(name) => Some(
            User::from_name(name)
                .ok()
                .flatten()
                .ok_or_else(|| missing("user", name))?
                .uid,
        ),
        None => None,
    };
    let gid = match &pool.listen_group {
        Some(name) => Some(
            Group::from_name(name)
                .ok()
                .flatten()
                .ok_or_else(|| missing("group", name))?
                .gid,
        ),
        None => None,
    };
    Ok((uid, gid))
}

/// A bare port, as php-fpm binds it: `[::]:PORT` with IPV6_V6ONLY off, which takes IPv4
/// clients too (as `::ffff:a.b.c.d`), or `0.0.0.0:PORT` when the kernel has no IPv6.
fn bind_any(addr: &ListenAddr, port: u16) -> Result<OwnedFd, ListenError> {
    let any6 = std::net::SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port));
    match bind_tcp(addr, any6, false) {
        Err(ListenError::Io {
            what: "socket",
            source,
            ..
        }) if source.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
            let any4 = std::net::SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, port));
            bind_tcp(addr, any4, false)
        }
        bound => bound,
    }
}

/// `v6_only`: an IPv6 socket takes IPv6 clients only.
fn bind_tcp(
    addr: &ListenAddr,
    socket_addr: std::net::SocketAddr,
    v6_only: bool,
) -> Result<OwnedFd, ListenError> {
    let family = if socket_addr.is_ipv6() {
        AddressFamily::Inet6
    } else {
        AddressFamily::Inet
    };
    let fd = socket(family, SockType::Stream, SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| io_error(addr, "socket", e))?;
    setsockopt(&fd, sockopt::ReuseAddr, &true).map_err(|e| io_error(addr, "SO_REUSEADDR", e))?;
    let bound = match socket_addr {
        std::net::SocketAddr::V4(v4) => bind(fd.as_raw_fd(), &SockaddrIn::from(v4)),
        std::net::SocketAddr::V6(v6) => {
            // `[::]:9000` means IPv6 only, so that a pool on `0.0.0.0:9000` can coexist.
            setsockopt(&fd, sockopt::Ipv6V6Only, &v6_only)
                .map_err(|e| io_error(addr, "IPV6_V6ONLY", e))?;
            bind(fd.as_raw_fd(), &SockaddrIn6::from(v6))
        }
    };
    bound.map_err(|e| io_error(addr, "bind", e))?;
    Ok(fd)
}
