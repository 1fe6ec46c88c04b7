//! The chunked transfer coding's two pieces of syntax that are not data (RFC 9112 §7.1):
//! the chunk-size line and the trailer section. Pure and shared: the WSGI connection
//! ([`super::HttpConn`]) and the ASGI one read bodies through these.
//!
//! Stricter than `httparse::parse_chunk_size`, which ends a line at a bare LF and lets
//! any byte through an extension: a front end that ends the line elsewhere would read a
//! different body (`3;x\nabc\r\n...` is a smuggling shape). Refused: a line not ended
//! by CRLF, a CR or other control byte before it, no hex digit, a sign, whitespace not
//! followed by an extension, a size past 64 bits; and in the trailers, the fields a
//! recipient must not act on after the body ([`FORBIDDEN_TRAILERS`]).

/// The longest chunk-size line or trailer section read before the body is refused.
pub const MAX_CHUNK_META: usize = 8 * 1024;

/// Trailer fields refused (RFC 9110 §6.5.1: fields that must be known before the content:
/// framing, routing, request modifiers, authentication, content format, connection
/// handling). drover drops trailers; a proxy in front that merges them would not.
pub const FORBIDDEN_TRAILERS: &[&str] = &[
    // framing
    "content-length",
    "transfer-encoding",
    "trailer",
    // routing
    "host",
    // request modifiers: controls and conditionals
    "te",
    "expect",
    "max-forwards",
    "cache-control",
    "pragma",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "if-range",
    // authentication
    "authorization",
    "proxy-authorization",
    "cookie",
    // content format
    "content-type",
    "content-encoding",
    "content-range",
    // connection handling
    "connection",
    "keep-alive",
    "upgrade",
];

/// Parses a chunk-size line at the start of `input`: Ok(Some((used, size))), or Ok(None)
/// when the line is not all here yet.
pub fn size_line(input: &[u8]) -> Result<Option<(usize, u64)>, &'static str> {
    let Some(lf) = input.iter().position(|&b| b == b'\n') else {
        if input.len() >= MAX_CHUNK_META {
            return Err("chunk-size line too long");
        }
        // Refused as early as it can be: no later byte makes these valid. A CR at the
        // end may be the first half of the CRLF.
        let seen = input.strip_suffix(b"\r").unwrap_or(input);
        return match check_line(seen) {
            Err(why) => Err(why),
            Ok(()) => Ok(None),
        };
    };
    if lf >= MAX_CHUNK_META {
        return Err("chunk-size line too long");
    }
    if lf == 0 || input[lf - 1] != b'\r' {
        return Err("chunk-size line not ended by CRLF (bare LF)");
    }
    let line = &input[..lf - 1];
    check_line(line)?;
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err("invalid chunk size");
    }
    if digits > 16 {
        return Err("chunk size too large");
    }
    let rest = &line[digits..];
    let ows = rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    if !rest.is_empty() && rest.get(ows) != Some(&b';') {
        return Err("invalid chunk size");
    }
    // ASCII hex digits, at most 16 of them: the conversion cannot fail.
    let size = std::str::from_utf8(&line[..digits])
        .ok()
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or("invalid chunk size")?;
    Ok(Some((lf + 1, size)))
}

/// A chunk-size line's bytes before its CRLF: no CR, LF or other control byte (HTAB
/// aside), wherever it falls, an extension included.
fn check_line(line: &[u8]) -> Result<(), &'static str> {
    match line
        .iter()
        .find(|&&b| (b < 0x20 && b != b'\t') || b == 0x7f)
    {
        Some(b'\r') => Err("bare CR in a chunk-size line"),
        Some(_) => Err("control byte in a chunk extension"),
        None => Ok(()),
    }
}

/// Parses the trailer section at the start of `input` (after the last chunk's size
/// line): Ok(Some(used)), or Ok(None) when it is not all here yet. Its fields are checked,
/// then dropped (as gunicorn and nginx drop them).
pub fn trailers(input: &[u8]) -> Result<Option<usize>, String> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let used = match httparse::parse_headers(input, &mut fields) {
        Ok(httparse::Status::Complete((used, _))) => used,
        Ok(httparse::Status::Partial) if input.len() < MAX_CHUNK_META => return Ok(None),
        Ok(httparse::Status::Partial) => return Err("chunked trailer section too large".into()),
        Err(err) => return Err(format!("invalid chunked trailer: {err}")),
    };
    let bare_lf = input[..used]
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || input[i - 1] != b'\r'));
    if bare_lf {
        return Err("chunked trailer line not ended by CRLF (bare LF)".into());
    }
    let forbidden = fields.iter().take_while(|f| !f.name.is_empty()).find(|f| {
        FORBIDDEN_TRAILERS
            .iter()
            .any(|name| f.name.eq_ignore_ascii_case(name))
    });
    match forbidden {
        Some(field) => Err(format!("{} in the chunked trailers", field.name)),
        None => Ok(Some(used)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_lines_take_hex_sizes_and_extensions() {
        assert_eq!(size_line(b"5\r\nhello"), Ok(Some((3, 5))));
        assert_eq!(size_line(b"00A\r\n"), Ok(Some((5, 10))));
        assert_eq!(size_line(b"1f;name=value\r\n"), Ok(Some((15, 31))));
        assert_eq!(size_line(b"3 ; a=\"q s\"\r\n"), Ok(Some((13, 3))));
        assert_eq!(size_line(b"0\r\n"), Ok(Some((3, 0))));
        assert_eq!(size_line(b"5"), Ok(None));
        assert_eq!(size_line(b"5;ext"), Ok(None));
        assert_eq!(size_line(b"5\r"), Ok(None));
    }

    #[test]
    fn size_lines_a_front_end_could_read_otherwise_are_refused() {
        let refused: &[&[u8]] = &[
            b"3;x\nabc\r\n",      // bare LF inside an extension (issue 24)
            b"5\n",               // bare LF after the size
            b"5\n;\r\n",          // bare LF, then what looks like an extension
            b"5;ext=val\rue\r\n", // bare CR inside an extension
            b"5;a\x00b\r\n",      // NUL
            b"5;a\x7fb\r\n",      // DEL
            b"5;a\x0bb",          // a control byte, before the line is complete
            b"0 \r\n",            // whitespace with no extension
            b" 0\r\n",            // whitespace before the size
            b"6_0\r\n",           // not a hex digit
            b"-5\r\n",
            b"+5\r\n",
            b"\r\n", // no size
            b" ;foo=bar\r\n",
            b"10000000000000000\r\n", // past 64 bits
        ];
        for line in refused {
            assert!(
                size_line(line).is_err(),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
        assert!(size_line(&[b'a'; MAX_CHUNK_META]).is_err());
    }

    #[test]
    fn trailers_are_dropped_unless_they_would_change_the_request() {
        assert_eq!(trailers(b"\r\n"), Ok(Some(2)));
        assert_eq!(trailers(b"Checksum: x\r\n\r\nnext"), Ok(Some(15)));
        assert_eq!(trailers(b"Checksum: x\r\n"), Ok(None));
        for forbidden in [
            "Content-Length: 99",
            "Host: evil.example",
            "Transfer-Encoding: chunked",
            "TE: trailers",
            "Authorization: Basic eA==",
            "Content-Type: text/html",
            "trailer: x",
        ] {
            let section = format!("X-Ok: 1\r\n{forbidden}\r\n\r\n");
            assert!(trailers(section.as_bytes()).is_err(), "{forbidden}");
        }
        assert!(trailers(b"A: 1\nB: 2\r\n\r\n").is_err());
        assert!(trailers(&[b'a'; MAX_CHUNK_META]).is_err());
    }
}
