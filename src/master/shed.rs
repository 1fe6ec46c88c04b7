//! `queue_timeout`: when a pool is saturated, the master answers 503 (with `Retry-After`)
//! to the connections that have waited past the timeout in the listen queue, so that
//! nginx can try another host (`fastcgi_next_upstream http_503`) instead of hanging.
//!
//! The master stays off the request path: on each tick it only samples, per pool, the
//! connections the workers have taken (counted in the scoreboard at each `accept()`) and
//! the listen queue (TCP_INFO or sock_diag); the arithmetic of [`crate::pm::queue`] turns
//! those into how long the oldest waiting connection has waited. Only a connection that
//! has waited `queue_timeout` for sure, while no worker took it, is accepted by the master,
//! which answers it and closes it on a task of its own. docs/ARCHITECTURE.md ("Failing
//! fast when saturated") gives the reasons and the figures.
//!
//! The listener's file description is shared with the workers, who make it blocking
//! (FastCGI) or not (HTTP), so an `accept()` here may block when a worker takes the
//! connection first: each one is bounded by a timer that interrupts it
//! ([`ACCEPT_BOUND`]).

use std::collections::HashMap;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Master;
use crate::control::PoolStatus;
use crate::pm::queue::{Arrivals, retry_after};

/// The longest an `accept()` of the master may block, when a worker took the connection
/// it saw waiting.
const ACCEPT_BOUND: Duration = Duration::from_millis(5);
/// The most connections answered 503 per pool and tick.
const MOST_PER_TICK: u64 = 512;
/// How long an answered connection may take to send its request's first bytes, take the
/// 503 and close.
const ANSWER_BOUND: Duration = Duration::from_secs(2);

/// Each pool's queue, by pool name: it spans the pool's generations, as the listener does.
#[derive(Default)]
pub struct Queues {
    by_pool: HashMap<String, Queue>,
}

#[derive(Default)]
struct Queue {
    arrivals: Arrivals,
    /// Connections the master answered 503.
    timed_out: u64,
    /// The oldest waiting connection's wait, at least, at the last tick.
    oldest: Duration,
    /// Since when the current run of 503s goes, and how many it answered.
    episode: Option<(Instant, u64)>,
}

impl Queues {
    /// Adds what the queue knows to a pool's status.
    pub fn report(&self, status: &mut PoolStatus) {
        if let Some(queue) = self.by_pool.get(&status.pool) {
            status.queue.timed_out = queue.timed_out;
            status.queue.oldest_wait = Some(queue.oldest);
            status.queue.waits = Some(queue.arrivals.waits().clone());
        }
    }
}

impl Master {
    /// A serving generation's status, its pool's totals and queue in it.
    pub(super) fn status_of(&self, pool: &super::PoolRun, now: Instant) -> PoolStatus {
        let mut status = self.pools.status_of(pool, now);
        self.queues.report(&mut status);
        status
    }

    /// On the tick: samples every serving pool's queue and answers the connections that
    /// have waited past its `queue_timeout`.
    pub(super) fn shed(&mut self, now: Instant) {
        let names: Vec<String> = self.pools.serving().map(|p| p.name().to_owned()).collect();
        self.queues.by_pool.retain(|name, _| names.contains(name));
        for name in names {
            self.shed_pool(&name, now);
        }
    }

    fn shed_pool(&mut self, name: &str, now: Instant) {
        let running = self.phase == super::Phase::Running;
        // Every generation on the listener must count its accepts (a draining php-cgi one
        // would take connections unseen, which would make the rest look older).
        let counted = self
            .pools
            .iter()
            .filter(|p| p.name() == name)
            .all(|p| p.counts_connections());
        let Some(i) = self.pools.serving_of(name) else {
            return;
        };
        let taken_by_workers = match self.pools.totals_of(name).requests {
            Some(view) if counted => view.connections,
            _ => {
                self.queues.by_pool.remove(name);
                return;
            }
        };
        let pool = &self.pools[i];
        let queue = self.queues.by_pool.entry(name.to_owned()).or_default();
        let taken = taken_by_workers + queue.timed_out;
        let Some(queued) = pool.listen_queue() else {
            return;
        };
        queue.arrivals.sample(now, taken, u64::from(queued));
        let timeout = pool.config.queue_timeout.filter(|_| running);
        let mut answered = 0;
        if let Some(timeout) = timeout {
            let overdue = queue.arrivals.overdue(now, taken, timeout);
            let http = pool.config.http.is_some();
            let retry = retry_after(timeout);
            let listener = pool.listener.fd.as_fd();
            if overdue > 0
                && let Some(bound) = Bound::new()
            {
                for _ in 0..overdue.min(MOST_PER_TICK) {
                    let Some(conn) = bound.accept(listener) else {
                        break;
                    };
                    answered += 1;
                    tokio::spawn(answer(conn, http, retry));
                }
            }
        }
        queue.timed_out += answered;
        let taken = taken + answered;
        queue.oldest = queue
            .arrivals
            .oldest(now, taken)
            .map_or(Duration::ZERO, |w| w.least);
        match (&mut queue.episode, answered) {
            (None, 0) => {}
            (None, n) => {
                queue.episode = Some((now, n));
                tracing::warn!(
                    "pool {name}: no worker took {n} connections within queue_timeout \
                     {}: answered 503",
                    humantime::format_duration(timeout.unwrap_or_default())
                );
            }
            (Some((_, count)), n) if n > 0 => *count += n,
            (Some((since, count)), _) => {
                tracing::info!(
                    "pool {name}: queue_timeout: answered 503 to {count} connections in {}",
                    humantime::format_duration(Duration::from_millis(
                        now.saturating_duration_since(*since).as_millis() as u64
                    ))
                );
                queue.episode = None;
            }
        }
    }
}

/// A timer that interrupts this thread's blocked `accept()` ([`ACCEPT_BOUND`]): a signal
/// of its own, to this thread only, whose handler does nothing and which is installed
/// without `SA_RESTART`, so that the `accept()` returns EINTR.
struct Bound {
    timer: libc::timer_t,
}

fn bound_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

extern "C" fn interrupted(_: libc::c_int) {}

impl Bound {
    fn new() -> Option<Bound> {
        static INSTALL: std::sync::Once = std::sync::Once::new();
        INSTALL.call_once(|| {
            // SAFETY: a handler that does nothing, for a signal only this module sends.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = interrupted as *const () as usize;
                libc::sigemptyset(&mut action.sa_mask);
                libc::sigaction(bound_signal(), &action, std::ptr::null_mut());
            }
        });
        // SAFETY: a zeroed sigevent, filled as timer_create wants for SIGEV_THREAD_ID.
        let mut event: libc::sigevent = unsafe { std::mem::zeroed() };
        event.sigev_notify = libc::SIGEV_THREAD_ID;
        event.sigev_signo = bound_signal();
        // SAFETY: gettid has no preconditions.
        event.sigev_notify_thread_id = unsafe { libc::gettid() };
        let mut timer: libc::timer_t = std::ptr::null_mut();
        // SAFETY: valid pointers to a sigevent and a timer_t we own.
        let rc = unsafe { libc::timer_create(libc::CLOCK_MONOTONIC, &mut event, &mut timer) };
        (rc == 0).then_some(Bound { timer })
    }

    fn arm(&self, after: Duration) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a timer this value created; a valid itimerspec.
        unsafe { libc::timer_settime(self.timer, 0, &spec, std::ptr::null_mut()) };
    }

    /// One connection off `listener`, or None when none came within [`ACCEPT_BOUND`].
    fn accept(&self, listener: BorrowedFd<'_>) -> Option<OwnedFd> {
        self.arm(ACCEPT_BOUND);
        // SAFETY: accept4 on a listening socket we hold; null address pointers are allowed.
        let fd = unsafe {
            libc::accept4(
                listener.as_raw_fd(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            )
        };
        self.arm(Duration::ZERO);
        // SAFETY: accept4 succeeded: a new descriptor nothing else owns.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        // SAFETY: a timer this value created, deleted once.
        unsafe { libc::timer_delete(self.timer) };
    }
}

/// Answers one connection 503 and closes it once the client has read it.
async fn answer(conn: OwnedFd, http: bool, retry: u64) {
    let mut domain: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_DOMAIN into an int of the size given, on a descriptor we own.
    unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&raw mut domain).cast(),
            &mut len,
        )
    };
    let answered = if domain == libc::AF_UNIX {
        let std = std::os::unix::net::UnixStream::from(conn);
        match tokio::net::UnixStream::from_std(std) {
            Ok(stream) => tokio::time::timeout(ANSWER_BOUND, respond(stream, http, retry)).await,
            Err(_) => return,
        }
    } else {
        let std = std::net::TcpStream::from(conn);
        match tokio::net::TcpStream::from_std(std) {
            Ok(stream) => tokio::time::timeout(ANSWER_BOUND, respond(stream, http, retry)).await,
            Err(_) => return,
        }
    };
    drop(answered);
}

async fn respond<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, http: bool, retry: u64) {
    let response = if http {
        http_503(retry)
    } else {
        // nginx sends its request at once; the answer needs its id (nginx's is 1).
        let mut head = [0u8; 8];
        let id = match stream.read_exact(&mut head).await {
            Ok(_) if head[0] == 1 && head[1] == BEGIN_REQUEST => {
                u16::from_be_bytes([head[2], head[3]])
            }
            _ => 1,
        };
        fastcgi_503(id, retry)
    };
    if stream.write_all(&response).await.is_err() {
        return;
    }
    let _ = stream.shutdown().await;
    // Read what the client still sends until it closes: a close with unread bytes would
    // reset the connection, and the client might lose the 503 it has not read yet.
    let mut sink = [0u8; 4096];
    while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
}

const BODY: &str = "503 Service Unavailable: no worker was free within the pool's queue_timeout\n";
const BEGIN_REQUEST: u8 = 1;
const END_REQUEST: u8 = 3;
const STDOUT: u8 = 6;

/// The CGI response both protocols carry.
fn cgi_head(retry: u64) -> String {
    format!(
        "Status: 503 Service Unavailable\r\nRetry-After: {retry}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        BODY.len()
    )
}

/// The 503 as FastCGI records: STDOUT with the response, the empty STDOUT, END_REQUEST.
pub fn fastcgi_503(id: u16, retry: u64) -> Vec<u8> {
    let content = format!("{}{BODY}", cgi_head(retry));
    let mut out = Vec::with_capacity(content.len() + 40);
    let mut record = |kind: u8, body: &[u8]| {
        let [hi, lo] = id.to_be_bytes();
        let [len_hi, len_lo] = (body.len() as u16).to_be_bytes();
        out.extend_from_slice(&[1, kind, hi, lo, len_hi, len_lo, 0, 0]);
        out.extend_from_slice(body);
    };
    record(STDOUT, content.as_bytes());
    record(STDOUT, &[]);
    // appStatus 0, FCGI_REQUEST_COMPLETE.
    record(END_REQUEST, &[0, 0, 0, 0, 0, 0, 0, 0]);
    out
}

/// The 503 as an HTTP/1.1 response, closing the connection.
pub fn http_503(retry: u64) -> Vec<u8> {
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {retry}\r\n\
         Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
        BODY.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastcgi_answer_is_three_records_of_the_request_id() {
        let out = fastcgi_503(7, 2);
        assert_eq!(&out[..4], &[1, STDOUT, 0, 7]);
        let len = usize::from(u16::from_be_bytes([out[4], out[5]]));
        let text = std::str::from_utf8(&out[8..8 + len]).unwrap();
        assert!(text.starts_with("Status: 503 Service Unavailable\r\nRetry-After: 2\r\n"));
        assert!(text.ends_with(BODY));
        let rest = &out[8 + len..];
        assert_eq!(&rest[..8], &[1, STDOUT, 0, 7, 0, 0, 0, 0]);
        assert_eq!(&rest[8..16], &[1, END_REQUEST, 0, 7, 0, 8, 0, 0]);
        assert_eq!(rest.len(), 24);
    }

    #[test]
    fn the_http_answer_closes_and_says_when_to_retry() {
        let text = String::from_utf8(http_503(1)).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"));
        assert!(text.contains("Connection: close\r\n"));
        let (_, body) = text.split_once("\r\n\r\n").unwrap();
        assert_eq!(body, BODY);
    }

    #[test]
    fn a_bounded_accept_returns_when_nothing_comes() {
        let dir = tempfile::tempdir().unwrap();
        let listener = std::os::unix::net::UnixListener::bind(dir.path().join("s")).unwrap();
        let bound = Bound::new().unwrap();
        let started = Instant::now();
        assert!(bound.accept(listener.as_fd()).is_none());
        assert!(started.elapsed() < Duration::from_secs(1));
        let _client = std::os::unix::net::UnixStream::connect(dir.path().join("s")).unwrap();
        assert!(bound.accept(listener.as_fd()).is_some());
    }
}
