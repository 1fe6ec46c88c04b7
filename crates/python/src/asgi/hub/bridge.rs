//! A WebSocket over TLS. Over plain HTTP the hub hands a WebSocket's socket to asyncio
//! (`http.py`'s `WsConn`, on the `websockets` codec); over TLS the session's state is
//! here, in Rust, so asyncio gets one end of a socketpair instead, and the hub pumps
//! between the other end and the client: records in, plaintext to the app; the app's
//! bytes out, sealed. Both ends sit in the hub's set (ids with [`BRIDGE`], and [`APP`]
//! for the socketpair's), and each direction holds back as the hub's writes do: the side
//! that feeds a direction is not read while more than `WRITE_HIGH` waits in it.
//!
//! The bridge ends when the client goes (the app's end closes: `WsConn` sees the
//! connection lost) or when the app closes its end (then close_notify, and the client's
//! socket closes once what the app wrote has gone). asyncio's `connection_lost` releases
//! the connection at the acceptor, as for a plain WebSocket: the bridge does not.

use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

use drover_worker::tls::Session;
use pyo3::prelude::*;

use super::{Hub, READ, Slot, WRITE, WRITE_HIGH, ctl, send};
use crate::asgi::conn::read_all;

/// The id bit of a bridge's descriptors in the set (connection ids count up from 1).
pub(super) const BRIDGE: u64 = 1 << 62;
/// With [`BRIDGE`]: the socketpair's end, not the client's socket.
const APP: u64 = 1 << 61;

/// Bytes on their way to one side, and what of them has gone.
#[derive(Default)]
struct Pipe {
    bytes: Vec<u8>,
    sent: usize,
}

impl Pipe {
    fn pending(&self) -> usize {
        self.bytes.len() - self.sent
    }

    fn push(&mut self, data: &[u8]) {
        if self.pending() == 0 {
            self.bytes.clear();
            self.sent = 0;
        }
        self.bytes.extend_from_slice(data);
    }

    /// Sends what it can to `fd`; false: the peer is gone.
    fn flush(&mut self, fd: RawFd) -> bool {
        if self.pending() == 0 {
            return true;
        }
        match send(fd, &self.bytes[self.sent..]) {
            Ok(n) => {
                self.sent += n;
                if self.pending() == 0 {
                    self.bytes = Vec::new();
                    self.sent = 0;
                }
                true
            }
            Err(_) => false,
        }
    }
}

pub(super) struct Bridge {
    client: OwnedFd,
    tls: Box<Session>,
    /// The hub's end of the socketpair; None once the app closed its end.
    app: Option<OwnedFd>,
    /// Records for the client.
    to_client: Pipe,
    /// Plaintext for the app.
    to_app: Pipe,
    watching_client: u32,
    watching_app: u32,
}

impl Bridge {
    /// Connection `id` (out of the hub's slots) becomes a bridge; returns the descriptor
    /// asyncio gets. What the slot had not written yet goes first.
    pub(super) fn start(hub: &mut Hub, id: u64, slot: Slot, tls: Box<Session>) -> PyResult<RawFd> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: socketpair writes two new descriptors into the array.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if made < 0 {
            ctl(&hub.epoll, libc::EPOLL_CTL_DEL, slot.fd.as_raw_fd(), 0, id);
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: socketpair made both descriptors; nothing else owns them.
        let app = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        // SAFETY: as above; asyncio takes this one over.
        let theirs = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        let mut to_client = Pipe::default();
        to_client.push(&slot.out[slot.sent..]);
        let mut bridge = Bridge {
            client: slot.fd,
            tls,
            app: Some(app),
            to_client,
            to_app: Pipe::default(),
            watching_client: READ,
            watching_app: READ,
        };
        let wanted = bridge.wanted_client();
        bridge.watching_client = wanted;
        ctl(
            &hub.epoll,
            libc::EPOLL_CTL_MOD,
            bridge.client.as_raw_fd(),
            wanted,
            id | BRIDGE,
        );
        if let Some(app) = &bridge.app {
            ctl(
                &hub.epoll,
                libc::EPOLL_CTL_ADD,
                app.as_raw_fd(),
                READ,
                id | BRIDGE | APP,
            );
        }
        if let Some(side) = &mut hub.http {
            side.bridges.insert(id, bridge);
        }
        Ok(theirs.into_raw_fd())
    }

    fn wanted_client(&self) -> u32 {
        let read = if self.app.is_some() && self.to_app.pending() <= WRITE_HIGH {
            READ
        } else {
            0
        };
        let write = if self.to_client.pending() > 0 {
            WRITE
        } else {
            0
        };
        read | write
    }

    fn wanted_app(&self) -> u32 {
        let read = if self.to_client.pending() <= WRITE_HIGH {
            READ
        } else {
            0
        };
        let write = if self.to_app.pending() > 0 { WRITE } else { 0 };
        read | write
    }

    /// The client's socket has news. False: the bridge ends (the client is gone, or
    /// broke the session).
    fn client_ready(&mut self, flags: u32) -> bool {
        if flags & WRITE != 0 && !self.to_client.flush(self.client.as_raw_fd()) {
            return false;
        }
        if flags & !WRITE == 0 || self.app.is_none() {
            return true;
        }
        let (data, end) = read_all(self.client.as_raw_fd());
        let mut plain = Vec::new();
        let mut wire = Vec::new();
        let opened = self.tls.open(&data, &mut plain, &mut wire);
        self.to_client.push(&wire);
        self.to_app.push(&plain);
        match opened {
            Ok(seen) if !seen.closed && end == 0 => true,
            _ => {
                // The client is leaving: what it sent last (its close frame) and the
                // alert, if any, on a best-effort basis.
                if let Some(app) = &self.app {
                    self.to_app.flush(app.as_raw_fd());
                }
                self.to_client.flush(self.client.as_raw_fd());
                false
            }
        }
    }

    /// The app's end has news. False: the bridge ends now.
    fn app_ready(&mut self, flags: u32) -> bool {
        let Some(app) = &self.app else {
            return true;
        };
        if flags & WRITE != 0 && !self.to_app.flush(app.as_raw_fd()) {
            return false;
        }
        if flags & !WRITE == 0 {
            return true;
        }
        let (data, end) = read_all(app.as_raw_fd());
        if !data.is_empty() {
            let mut wire = Vec::new();
            self.tls.seal(&data, &mut wire);
            self.to_client.push(&wire);
        }
        if end != 0 {
            // The app closed the WebSocket: the session ends after what it wrote.
            let mut wire = Vec::new();
            self.tls.close_notify(&mut wire);
            self.to_client.push(&wire);
            self.app = None;
        }
        true
    }

    /// Sends what each side can take; false: the client is gone, or the app closed and
    /// all it wrote has gone.
    fn flush(&mut self) -> bool {
        if !self.to_client.flush(self.client.as_raw_fd()) {
            return false;
        }
        if let Some(app) = &self.app
            && !self.to_app.flush(app.as_raw_fd())
        {
            return false;
        }
        self.app.is_some() || self.to_client.pending() > 0
    }
}

impl Hub {
    /// A bridge's descriptor is ready (`key`: the id with [`BRIDGE`], and [`APP`] for the
    /// socketpair's end).
    pub(super) fn bridged(&mut self, key: u64, flags: u32) {
        let id = key & !(BRIDGE | APP);
        let Some(side) = &mut self.http else {
            return;
        };
        let Some(bridge) = side.bridges.get_mut(&id) else {
            return;
        };
        let going = if key & APP != 0 {
            bridge.app_ready(flags)
        } else {
            bridge.client_ready(flags)
        };
        if !(going && bridge.flush()) {
            let bridge = side.bridges.remove(&id).expect("found above");
            ctl(
                &self.epoll,
                libc::EPOLL_CTL_DEL,
                bridge.client.as_raw_fd(),
                0,
                key,
            );
            if let Some(app) = &bridge.app {
                ctl(&self.epoll, libc::EPOLL_CTL_DEL, app.as_raw_fd(), 0, key);
            }
            // Dropped: the client's socket closes, and asyncio sees its end closed.
            return;
        }
        let wanted = bridge.wanted_client();
        if wanted != bridge.watching_client {
            bridge.watching_client = wanted;
            ctl(
                &self.epoll,
                libc::EPOLL_CTL_MOD,
                bridge.client.as_raw_fd(),
                wanted,
                id | BRIDGE,
            );
        }
        let wanted = bridge.wanted_app();
        let Some(app) = &bridge.app else {
            return;
        };
        if wanted != bridge.watching_app {
            bridge.watching_app = wanted;
            ctl(
                &self.epoll,
                libc::EPOLL_CTL_MOD,
                app.as_raw_fd(),
                wanted,
                id | BRIDGE | APP,
            );
        }
    }
}
