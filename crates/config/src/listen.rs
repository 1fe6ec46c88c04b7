//! Listen addresses as written (`/run/www.sock`, `127.0.0.1:9000`, `[::1]:9000`, a bare
//! port `9000` for every address, as php-fpm reads it) and the check that no two listeners in the whole configuration share one.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::model::ListenAddr;
use super::value::resolve;

/// `sun_path` holds 108 bytes including the terminating NUL.
const MAX_UNIX_PATH: usize = 107;

pub(super) fn parse_listen(base: &Path, s: &str) -> Result<ListenAddr, String> {
    if s.starts_with('/') || s.starts_with('.') {
        return unix_socket(resolve(base, s)?).map(ListenAddr::Unix);
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(ListenAddr::Tcp(addr));
    }
    // Both would otherwise become a unix socket file named like an address, which binds
    // fine and then nothing can connect to it.
    if s.contains(':') {
        return Err(
            "not an IP address and port like 127.0.0.1:9000 or [::1]:9000 \
                    (host names are not resolved); write ./NAME for a unix socket"
                .into(),
        );
    }
    // php-fpm's reading: a bare port is every address. A file named only with digits
    // is written ./9000.
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return match s.parse::<u16>() {
            Ok(port) if port > 0 => Ok(ListenAddr::AnyAddress(port)),
            _ => Err(format!(
                "port {s} is out of range (1 to 65535); write ./{s} for a unix socket"
            )),
        };
    }
    unix_socket(resolve(base, s)?).map(ListenAddr::Unix)
}

pub(super) fn unix_socket(path: PathBuf) -> Result<PathBuf, String> {
    let len = path.as_os_str().len();
    if len > MAX_UNIX_PATH {
        return Err(format!(
            "unix socket path {} is {len} bytes; the kernel allows {MAX_UNIX_PATH}",
            path.display()
        ));
    }
    Ok(path)
}

/// One address taken by one listener, remembered to find a second listener on it.
pub(super) struct Claim {
    pub addr: ListenAddr,
    /// Index of the file (and pool) that owns it, in load order.
    pub file: usize,
    pub pool: String,
    /// `listen`, `status_listen` or `control.listen`.
    pub key: &'static str,
    pub offset: usize,
    pub written: Option<String>,
}

/// Whether two listeners cannot both bind: the same address, or a bare port (every
/// address, IPv4 and IPv6) and any TCP address on that port.
pub(super) fn overlap(a: &ListenAddr, b: &ListenAddr) -> bool {
    match (a, b) {
        (ListenAddr::AnyAddress(port), ListenAddr::Tcp(addr))
        | (ListenAddr::Tcp(addr), ListenAddr::AnyAddress(port)) => addr.port() == *port,
        _ => a == b,
    }
}

/// For each claim that repeats an earlier one's address: (index of the later claim, index of
/// the earlier one). Claims within one pool are checked by the pool itself.
pub(super) fn collisions(claims: &[Claim]) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    for (later, claim) in claims.iter().enumerate() {
        let earlier = claims[..later]
            .iter()
            .position(|c| overlap(&c.addr, &claim.addr) && c.file != claim.file);
        if let Some(earlier) = earlier {
            found.push((later, earlier));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<ListenAddr, String> {
        parse_listen(Path::new("/etc/drover"), s)
    }

    #[test]
    fn addresses_are_tcp_and_everything_else_a_path() {
        assert_eq!(
            parse("127.0.0.1:9000"),
            Ok(ListenAddr::Tcp("127.0.0.1:9000".parse().unwrap()))
        );
        assert_eq!(
            parse("[::1]:9000"),
            Ok(ListenAddr::Tcp("[::1]:9000".parse().unwrap()))
        );
        assert_eq!(
            parse("/run/www.sock"),
            Ok(ListenAddr::Unix("/run/www.sock".into()))
        );
        assert_eq!(
            parse("./www.sock"),
            Ok(ListenAddr::Unix("/etc/drover/www.sock".into()))
        );
        assert_eq!(
            parse("run/www.sock"),
            Ok(ListenAddr::Unix("/etc/drover/run/www.sock".into()))
        );
    }

    #[test]
    fn a_bare_port_is_every_address_as_in_php_fpm() {
        assert_eq!(parse("9000"), Ok(ListenAddr::AnyAddress(9000)));
        assert_eq!(parse("65535"), Ok(ListenAddr::AnyAddress(65535)));
        assert_eq!(ListenAddr::AnyAddress(9000).to_string(), "9000");
        assert_eq!(
            parse("./9000"),
            Ok(ListenAddr::Unix("/etc/drover/9000".into()))
        );
    }

    #[test]
    fn a_bare_port_overlaps_every_address_on_its_port() {
        let tcp = |s: &str| ListenAddr::Tcp(s.parse().unwrap());
        let any = ListenAddr::AnyAddress(9000);
        assert!(overlap(&any, &tcp("127.0.0.1:9000")));
        assert!(overlap(&tcp("[::1]:9000"), &any));
        assert!(overlap(&any, &any));
        assert!(!overlap(&any, &tcp("127.0.0.1:9001")));
        assert!(!overlap(&any, &ListenAddr::Unix("/etc/drover/9000".into())));
        assert!(!overlap(&tcp("127.0.0.1:9000"), &tcp("127.0.0.2:9000")));
    }

    #[test]
    fn lookalikes_of_addresses_are_refused() {
        assert!(parse("localhost:9000").unwrap_err().contains("host names"));
        assert!(parse("0").unwrap_err().contains("out of range"));
        assert!(parse("65536").unwrap_err().contains("out of range"));
        assert!(parse("").is_err());
        assert!(
            parse(&format!("/{}", "x".repeat(200)))
                .unwrap_err()
                .contains("kernel")
        );
    }
}
