//! The request id: one name for one request in every line about it (the access log's `%I`,
//! the slowlog entry, a `request_terminate_timeout` kill, the worker's output while it runs)
//! and in what the app sees, so that one slow request can be followed across logs.
//!
//! Where it comes from, first found:
//!
//! 1. `HTTP_X_REQUEST_ID`: the request's `X-Request-Id` header, from the client or from the
//!    web server (`fastcgi_param HTTP_X_REQUEST_ID $request_id;`, which in nginx also hides
//!    the client's own; `proxy_set_header X-Request-Id $request_id;` for an HTTP pool);
//! 2. `REQUEST_ID`: a FastCGI param (`fastcgi_param REQUEST_ID $request_id;`), nginx's
//!    own id for a request that came without one;
//! 3. else the worker makes one: 32 hex digits, as nginx's `$request_id` looks.
//!
//! An id is taken only if it is 1 to [`MAX_LEN`] bytes of letters, digits and `-_.:+/=@`
//! (what UUIDs, nginx's ids, base64 and trace ids are made of): a longer one, or one with
//! spaces, quotes or control bytes (a client writing into the logs), is replaced by one the
//! worker makes. The app always finds the id as `HTTP_X_REQUEST_ID` ([`stamp`]): PHP's
//! `$_SERVER['HTTP_X_REQUEST_ID']`, WSGI's `environ["HTTP_X_REQUEST_ID"]`, an
//! `x-request-id` header in the ASGI scope.
//!
//! Made ids cost no system call: each worker draws a random key once (getrandom, at its
//! first id) and then mixes it with a counter.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use drover_fastcgi::Params;

/// The param the app sees the id in, and the first one taken.
pub const HEADER_PARAM: &str = "HTTP_X_REQUEST_ID";
/// The param nginx's `$request_id` is passed in when the header is left to the client.
pub const SERVER_PARAM: &str = "REQUEST_ID";
/// The longest id taken: what the scoreboard slot holds.
pub const MAX_LEN: usize = drover_scoreboard::REQUEST_ID_MAX;

/// Whether `id` may stand in the logs as it is.
pub fn valid(id: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&id.len())
        && id
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"-_.:+/=@".contains(&b))
}

/// The id the request came with, if it is one to keep ([`valid`]).
pub fn given(params: &Params) -> Option<&str> {
    [HEADER_PARAM, SERVER_PARAM]
        .into_iter()
        .filter_map(|name| params.get(name))
        .find(|id| valid(id))
        // Valid ids are ASCII.
        .and_then(|id| std::str::from_utf8(id).ok())
}

/// Makes sure the app sees the request's id as `HTTP_X_REQUEST_ID`: the header's when it
/// is valid (nothing changes), else `REQUEST_ID`'s, else one from `ids`. Returns the id.
pub fn stamp(params: &mut Params, ids: &Ids) -> String {
    if let Some(id) = params.get(HEADER_PARAM).filter(|id| valid(id)) {
        return String::from_utf8_lossy(id).into_owned();
    }
    let id = given(params).map_or_else(|| ids.make(), str::to_owned);
    params.set(HEADER_PARAM.as_bytes(), id.as_bytes());
    id
}

/// One worker's made ids: a random key drawn at the first, and a counter.
#[derive(Default)]
pub struct Ids {
    key: OnceLock<(u64, u64)>,
    next: AtomicU64,
}

impl Ids {
    /// A new id: 32 lowercase hex digits. Distinct within the worker (the counter goes
    /// through a bijection), and across workers and hosts as random 128-bit values are.
    pub fn make(&self) -> String {
        let (a, b) = *self.key.get_or_init(random_key);
        let n = self.next.fetch_add(1, Relaxed);
        format!("{:016x}{:016x}", mix(a ^ n), mix(b.wrapping_add(n)))
    }
}

/// The worker's key: from getrandom, else from its pid and the clocks (a kernel without
/// getrandom; ids then only need to differ, not to be unguessable).
fn random_key() -> (u64, u64) {
    let mut bytes = [0u8; 16];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer.
    let got = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if got != bytes.len() as isize {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let seed = mix(now ^ u64::from(std::process::id()) << 32) ^ drover_scoreboard::now_us();
        bytes[..8].copy_from_slice(&mix(seed).to_ne_bytes());
        bytes[8..].copy_from_slice(&mix(seed ^ 0x5bd1_e995).to_ne_bytes());
    }
    let (a, b) = bytes.split_at(8);
    let word = |half: &[u8]| u64::from_ne_bytes(half.try_into().unwrap_or_default());
    (word(a), word(b))
}

/// splitmix64's finalizer: a bijection on u64 that spreads every input bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn params_of(pairs: &[(&str, &str)]) -> Params {
        let mut raw = Vec::new();
        for (name, value) in pairs {
            drover_fastcgi::encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
        }
        Params::decode(raw).unwrap()
    }

    #[test]
    fn the_header_comes_first_then_the_servers_param() {
        let both = params_of(&[("REQUEST_ID", "nginx1"), ("HTTP_X_REQUEST_ID", "client-1")]);
        assert_eq!(given(&both), Some("client-1"));
        let server = params_of(&[("REQUEST_ID", "4f1c9e")]);
        assert_eq!(given(&server), Some("4f1c9e"));
        let bad_header = params_of(&[("HTTP_X_REQUEST_ID", "a b"), ("REQUEST_ID", "n-2")]);
        assert_eq!(given(&bad_header), Some("n-2"));
        assert_eq!(given(&params_of(&[])), None);
    }

    #[test]
    fn only_short_plain_ids_are_taken() {
        for id in [
            "0123456789abcdef0123456789abcdef",
            "550e8400-e29b-41d4-a716-446655440000",
            "Root=1-5759e988-bd862e3fe1be46a994272793",
            "dGVzdA==",
            "a",
        ] {
            assert!(valid(id.as_bytes()), "{id}");
        }
        let long = "a".repeat(MAX_LEN + 1);
        for id in ["", "a b", "a\"b", "a\nb", "a\\b", "é", "a;b", long.as_str()] {
            assert!(!valid(id.as_bytes()), "{id:?}");
        }
        assert!(valid("a".repeat(MAX_LEN).as_bytes()));
    }

    #[test]
    fn the_app_always_sees_the_id_as_the_header() {
        let ids = Ids::default();
        let mut kept = params_of(&[("HTTP_X_REQUEST_ID", "abc")]);
        assert_eq!(stamp(&mut kept, &ids), "abc");
        assert_eq!(kept.len(), 1);
        let mut from_nginx = params_of(&[("REQUEST_ID", "ngx"), ("A", "1")]);
        assert_eq!(stamp(&mut from_nginx, &ids), "ngx");
        assert_eq!(from_nginx.get(HEADER_PARAM), Some(&b"ngx"[..]));
        // A client's id that may not stand in a log is replaced, once, in what the app sees.
        let mut hostile = params_of(&[("HTTP_X_REQUEST_ID", "x\" injected=1")]);
        let made = stamp(&mut hostile, &ids);
        assert_eq!(made.len(), 32);
        assert_eq!(hostile.get(HEADER_PARAM), Some(made.as_bytes()));
        assert_eq!(hostile.iter().count(), 1);
    }

    #[test]
    fn made_ids_are_hex_and_distinct() {
        let ids = Ids::default();
        let made: HashSet<String> = (0..10_000).map(|_| ids.make()).collect();
        assert_eq!(made.len(), 10_000);
        assert!(made.iter().all(|id| {
            id.len() == 32
                && id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        }));
        // Another worker's key: other ids.
        let other = Ids::default();
        assert!(!made.contains(&other.make()));
    }
}
