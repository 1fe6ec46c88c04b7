//! The response head, checked as PEP 3333 asks of a server: a status line "NNN Reason"
//! and header names and values the web server can pass on. Pure: no Python here.

/// Headers a WSGI app may not set: they belong to the connection, which nginx owns.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// "200 OK": three digits, a space, a reason without control characters.
pub fn check_status(status: &[u8]) -> Result<(), String> {
    let valid = status.len() >= 4
        && status[..3].iter().all(u8::is_ascii_digit)
        && status[3] == b' '
        && status[4..]
            .iter()
            .all(|&b| b == b'\t' || !b.is_ascii_control());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "invalid status {:?}: expected like \"200 OK\"",
            String::from_utf8_lossy(status)
        ))
    }
}

pub fn check_header(name: &[u8], value: &[u8]) -> Result<(), String> {
    let token = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if name.is_empty() || !name.iter().all(token) {
        return Err(format!(
            "invalid header name {:?}",
            String::from_utf8_lossy(name)
        ));
    }
    if value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
        return Err(format!(
            "invalid value for header {}: it contains a line break or NUL",
            String::from_utf8_lossy(name)
        ));
    }
    let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
    if HOP_BY_HOP.contains(&lower.as_str()) {
        return Err(format!(
            "hop-by-hop header {} is not allowed in a WSGI response",
            String::from_utf8_lossy(name)
        ));
    }
    Ok(())
}

/// The CGI response head nginx reads from FCGI_STDOUT.
pub fn encode_head(out: &mut Vec<u8>, status: &[u8], headers: &[(Vec<u8>, Vec<u8>)]) {
    out.extend_from_slice(b"Status: ");
    out.extend_from_slice(status);
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses() {
        assert!(check_status(b"200 OK").is_ok());
        assert!(check_status(b"404 Not Found").is_ok());
        assert!(check_status(b"200").is_err());
        assert!(check_status(b"2000 OK").is_err());
        assert!(check_status(b"OK 200").is_err());
        assert!(check_status(b"200 OK\r\nX: y").is_err());
    }

    #[test]
    fn headers() {
        assert!(check_header(b"Content-Type", b"text/plain").is_ok());
        assert!(check_header(b"Set-Cookie", b"a=1; Path=/").is_ok());
        assert!(check_header(b"", b"x").is_err());
        assert!(check_header(b"Bad Name", b"x").is_err());
        assert!(check_header(b"X-Split", b"a\r\nInjected: 1").is_err());
        assert!(check_header(b"Transfer-Encoding", b"chunked").is_err());
        assert!(check_header(b"connection", b"close").is_err());
    }

    #[test]
    fn head_encoding() {
        let mut out = Vec::new();
        let headers = vec![
            (b"Set-Cookie".to_vec(), b"a=1".to_vec()),
            (b"Set-Cookie".to_vec(), b"b=2".to_vec()),
        ];
        encode_head(&mut out, b"201 Created", &headers);
        assert_eq!(
            out,
            b"Status: 201 Created\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n"
        );
    }
}
