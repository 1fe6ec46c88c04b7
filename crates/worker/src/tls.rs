//! One TLS connection of an HTTP pool with `certfile`, sans I/O: bytes that came on the
//! socket in, plaintext and the records to write out ([`Session::open`]); plaintext in,
//! records out ([`Session::seal`]). It never reads or writes a socket, so every driver
//! decides how it waits: the ASGI worker's hub (non-blocking, in its epoll set) and the
//! blocking WSGI loop's [`crate::socket::Socket`] drive the same session, over the
//! rustls config the zygote built from the master's memfd (`drover_proto::tls`).
//!
//! What rustls bounds for us, and the drivers rely on: a handshake message past 64 KiB
//! (a ClientHello that says it is 16 MiB) is refused with an alert before it is
//! buffered, as is anything that is not a TLS record (plain HTTP on the TLS port).

use std::io::{self, Read, Write};
use std::sync::Arc;

use drover_fastcgi::Params;

/// A server-side TLS connection.
pub struct Session {
    conn: rustls::ServerConnection,
    /// [`Session::open`] failed: its alert was the last word, nothing is sealed after it.
    failed: bool,
}

/// What the bytes given to [`Session::open`] made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opened {
    /// The client sent close_notify: nothing more will come.
    pub closed: bool,
}

impl Session {
    /// A session for a connection just accepted. Writes are never held back: what
    /// [`Session::seal`] takes comes out whole, and the driver's own buffer (the hub's
    /// backpressure, a blocking write) bounds it.
    pub fn new(config: &Arc<rustls::ServerConfig>) -> io::Result<Session> {
        let mut conn = rustls::ServerConnection::new(config.clone()).map_err(io::Error::other)?;
        conn.set_buffer_limit(None);
        Ok(Session {
            conn,
            failed: false,
        })
    }

    /// The handshake has not completed.
    pub fn handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Takes `data`, as read from the socket: the plaintext it holds is appended to
    /// `plain`, the records due in answer (the handshake's, session tickets) to `wire`.
    /// Err: the connection must end, once `wire` (which then holds the alert that says
    /// why, when there is one) is written; the reason is for the log. From then on the
    /// session seals nothing, close_notify included.
    pub fn open(
        &mut self,
        data: &[u8],
        plain: &mut Vec<u8>,
        wire: &mut Vec<u8>,
    ) -> Result<Opened, String> {
        if self.failed {
            return Err("TLS: the session failed already".into());
        }
        let opened = self.take(data, plain, wire);
        self.failed = opened.is_err();
        opened
    }

    fn take(
        &mut self,
        mut data: &[u8],
        plain: &mut Vec<u8>,
        wire: &mut Vec<u8>,
    ) -> Result<Opened, String> {
        let mut opened = Opened::default();
        while !data.is_empty() {
            // rustls takes at most a record's worth (and refuses a handshake message past
            // its bound) per call: the plaintext is taken out between calls.
            if let Err(err) = self.conn.read_tls(&mut data) {
                self.drain(wire);
                return Err(format!("TLS: {err}"));
            }
            let state = match self.conn.process_new_packets() {
                Ok(state) => state,
                Err(err) => {
                    self.drain(wire);
                    return Err(format!("TLS: {err}"));
                }
            };
            let n = state.plaintext_bytes_to_read();
            if n > 0 {
                let at = plain.len();
                plain.resize(at + n, 0);
                if let Err(err) = self.conn.reader().read_exact(&mut plain[at..]) {
                    plain.truncate(at);
                    return Err(format!("TLS: {err}"));
                }
            }
            opened.closed |= state.peer_has_closed();
        }
        self.drain(wire);
        Ok(opened)
    }

    /// Appends to `wire` the records that carry `plain`.
    pub fn seal(&mut self, plain: &[u8], wire: &mut Vec<u8>) {
        if self.failed {
            return;
        }
        // Never short: the buffer limit is off (`new`).
        let _ = self.conn.writer().write_all(plain);
        self.drain(wire);
    }

    /// Appends to `wire` the alert that says the stream ends here (a client reading a
    /// response to the connection's end takes a close without it as a truncation); none
    /// mid-handshake.
    pub fn close_notify(&mut self, wire: &mut Vec<u8>) {
        if !(self.failed || self.conn.is_handshaking()) {
            self.conn.send_close_notify();
            self.drain(wire);
        }
    }

    /// Whatever rustls has to send, into `wire`.
    fn drain(&mut self, wire: &mut Vec<u8>) {
        while self.conn.wants_write() {
            match self.conn.write_tls(wire) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }
}

/// A request that came over TLS says so as nginx's `fastcgi_params` do (`HTTPS=on`, the
/// scheme), whatever X-Forwarded-Proto says; a Host without a port means 443. The WSGI
/// environ and the ASGI scope (`"scheme": "https"`, `"wss"`) are built from these.
pub fn mark_https(params: &mut Params) {
    params.set(b"HTTPS", b"on");
    params.set(b"REQUEST_SCHEME", b"https");
    let host = params.get("HTTP_HOST").unwrap_or_default();
    let has_port = host
        .iter()
        .rposition(|&b| b == b':')
        .is_some_and(|i| !host[i..].contains(&b']'));
    if !host.is_empty() && !has_port {
        params.set(b"SERVER_PORT", b"443");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session on a self-signed P-256 certificate made with `openssl`.
    fn session() -> Session {
        // A folder per call: the tests run in parallel.
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("drover-tls-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("c.key"));
        let made = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
            .args(["-subj", "/CN=t", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output()
            .expect("openssl");
        assert!(made.status.success(), "{made:?}");
        let material = drover_proto::tls::Material {
            cert: std::fs::read(&cert).unwrap(),
            key: std::fs::read(&key).unwrap(),
            ca: None,
        };
        let _ = std::fs::remove_dir_all(&dir);
        let config =
            drover_proto::tls::server_config(&material, &Default::default()).expect("config");
        Session::new(&Arc::new(config)).unwrap()
    }

    #[test]
    fn plain_http_gets_an_alert_and_an_error() {
        let mut tls = session();
        let (mut plain, mut wire) = (Vec::new(), Vec::new());
        let err = tls
            .open(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", &mut plain, &mut wire)
            .unwrap_err();
        assert!(err.starts_with("TLS: "), "{err}");
        assert!(plain.is_empty());
        assert_eq!(wire.first(), Some(&0x15), "an alert record: {wire:?}");
    }

    /// A ClientHello that says it is 16 MiB long is refused long before that much is
    /// buffered (rustls takes 64 KiB of handshake at most).
    #[test]
    fn a_huge_client_hello_is_refused_early() {
        let mut tls = session();
        let (mut plain, mut wire) = (Vec::new(), Vec::new());
        let mut fed = 0;
        let refused = (0..64).any(|i| {
            let mut record = vec![0x16, 0x03, 0x01, 0x40, 0x00];
            if i == 0 {
                record.extend_from_slice(&[0x01, 0xff, 0xff, 0xff]);
            }
            record.resize(5 + 16 * 1024, 0x41);
            fed += record.len();
            tls.open(&record, &mut plain, &mut wire).is_err()
        });
        assert!(refused && fed <= 128 << 10, "fed {fed} bytes");
        assert!(plain.is_empty());
    }

    /// Part of a ClientHello: nothing to say yet, and the handshake goes on.
    #[test]
    fn a_partial_client_hello_waits_for_the_rest() {
        let mut tls = session();
        let (mut plain, mut wire) = (Vec::new(), Vec::new());
        let opened = tls
            .open(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01], &mut plain, &mut wire)
            .unwrap();
        assert_eq!(opened, Opened::default());
        assert!(plain.is_empty() && wire.is_empty());
        assert!(tls.handshaking());
        let mut notify = Vec::new();
        tls.close_notify(&mut notify);
        assert!(notify.is_empty(), "no close_notify mid-handshake");
    }

    #[test]
    fn https_params_say_so_and_a_host_without_a_port_means_443() {
        let mut params = Params::default();
        params.set(b"HTTP_HOST", b"example.org");
        mark_https(&mut params);
        assert_eq!(params.get("HTTPS"), Some(&b"on"[..]));
        assert_eq!(params.get("REQUEST_SCHEME"), Some(&b"https"[..]));
        assert_eq!(params.get("SERVER_PORT"), Some(&b"443"[..]));
        let mut params = Params::default();
        params.set(b"HTTP_HOST", b"[::1]:8443");
        params.set(b"SERVER_PORT", b"8443");
        mark_https(&mut params);
        assert_eq!(params.get("SERVER_PORT"), Some(&b"8443"[..]));
    }
}
