//! The runtimes write a CGI response (a `Status:` line, headers, a blank line, the body),
//! as nginx reads it from FastCGI; on an HTTP connection that head becomes an HTTP/1.1
//! status line and headers, and the body's framing is chosen here: Content-Length when the
//! app gave one, else chunked (HTTP/1.1) or delimited by the close (HTTP/1.0). Pure.

/// How the response body is delimited on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body may be sent (HEAD, 1xx, 204, 304).
    None,
    /// Content-Length: this many bytes are left to send.
    Length(u64),
    Chunked,
    /// Ends with the connection (HTTP/1.0 without a length).
    Close,
}

/// What the request asked that shapes the response.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    pub minor: u8,
    pub keep_alive: bool,
    pub head_method: bool,
}

/// Parses the CGI head at the start of `cgi`. Ok(None): not complete yet. On success:
/// the HTTP head to send, the framing, whether the connection may be kept, the bytes of
/// `cgi` the head took, and the status. `complete`: `cgi` holds the whole response, so a
/// body without Content-Length gets one instead of chunks (a WSGI app's `[body]`).
pub fn translate(cgi: &[u8], ask: Ask, complete: bool) -> Result<Option<Translated>, String> {
    let mut fields = [httparse::EMPTY_HEADER; 128];
    let (len, fields) = match httparse::parse_headers(cgi, &mut fields) {
        Ok(httparse::Status::Complete((len, fields))) => (len, fields),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(err) => return Err(format!("the app's response head is malformed: {err}")),
    };
    let mut status: &[u8] = b"200 OK";
    let mut length: Option<u64> = None;
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 ");
    let mut headers = Vec::with_capacity(cgi.len() + 64);
    for field in fields.iter() {
        if field.name.eq_ignore_ascii_case("status") {
            status = field.value;
            continue;
        }
        if field.name.eq_ignore_ascii_case("content-length") {
            length = std::str::from_utf8(field.value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
        }
        // Framing headers are ours to set.
        if field.name.eq_ignore_ascii_case("transfer-encoding")
            || field.name.eq_ignore_ascii_case("connection")
        {
            continue;
        }
        headers.extend_from_slice(field.name.as_bytes());
        headers.extend_from_slice(b": ");
        headers.extend_from_slice(field.value);
        headers.extend_from_slice(b"\r\n");
    }
    let code = status
        .get(..3)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse::<u16>().ok())
        .filter(|c| (100..=999).contains(c))
        .ok_or_else(|| format!("invalid Status {:?}", String::from_utf8_lossy(status)))?;
    out.extend_from_slice(status);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&headers);
    let no_body = ask.head_method || code < 200 || code == 204 || code == 304;
    let body = match length {
        _ if no_body => Body::None,
        None if complete => {
            let n = cgi.len() - len;
            out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes());
            length = Some(n as u64);
            Body::Length(n as u64)
        }
        Some(n) => Body::Length(n),
        None if ask.minor == 1 => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            Body::Chunked
        }
        None => Body::Close,
    };
    // A HEAD response without a length says nothing of the framing a GET would get; an
    // HTTP/1.0 client can keep only a connection whose response has a length.
    let keep = ask.keep_alive && body != Body::Close && !(ask.minor == 0 && length.is_none());
    if !keep {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if ask.minor == 0 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"Date: ");
    out.extend_from_slice(httpdate::fmt_http_date(std::time::SystemTime::now()).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    Ok(Some(Translated {
        head: out,
        body,
        keep,
        consumed: len,
        status: code,
    }))
}

/// A translated head.
#[derive(Debug)]
pub struct Translated {
    pub head: Vec<u8>,
    pub body: Body,
    pub keep: bool,
    /// The CGI head's length; what follows in the buffer is body.
    pub consumed: usize,
    pub status: u16,
}

/// The response to a refused head: a plain-text body, and the connection closes.
pub fn refusal(status: u16, reason: &str) -> Vec<u8> {
    let phrase = match status {
        400 => "Bad Request",
        408 => "Request Timeout",
        413 => "Content Too Large",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        _ => "Error",
    };
    let body = format!("{phrase}: {reason}\n");
    format!(
        "HTTP/1.1 {status} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GET11: Ask = Ask {
        minor: 1,
        keep_alive: true,
        head_method: false,
    };

    fn text(t: &Translated) -> String {
        String::from_utf8(t.head.clone()).unwrap()
    }

    #[test]
    fn a_length_is_kept_and_the_status_becomes_the_status_line() {
        let cgi =
            b"Status: 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc";
        let t = translate(cgi, GET11, false).unwrap().unwrap();
        assert!(text(&t).starts_with("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"));
        assert_eq!(t.body, Body::Length(3));
        assert_eq!(&cgi[t.consumed..], b"abc");
        assert!(t.keep);
        assert_eq!(t.status, 404);
        assert!(!text(&t).contains("Status:"));
    }

    #[test]
    fn without_a_length_http11_is_chunked_and_http10_closes() {
        let cgi = b"Status: 200 OK\r\n\r\n";
        let t = translate(cgi, GET11, false).unwrap().unwrap();
        assert_eq!(t.body, Body::Chunked);
        assert!(text(&t).contains("Transfer-Encoding: chunked\r\n"));
        let ask = Ask {
            minor: 0,
            keep_alive: true,
            head_method: false,
        };
        let t = translate(cgi, ask, false).unwrap().unwrap();
        assert_eq!(t.body, Body::Close);
        assert!(!t.keep);
        assert!(text(&t).contains("Connection: close\r\n"));
    }

    #[test]
    fn a_complete_response_gets_a_length_instead_of_chunks() {
        let cgi = b"Status: 200 OK\r\n\r\nhello";
        let t = translate(cgi, GET11, true).unwrap().unwrap();
        assert_eq!(t.body, Body::Length(5));
        assert!(text(&t).contains("Content-Length: 5\r\n"));
        assert!(!text(&t).contains("chunked"));
    }

    #[test]
    fn head_204_and_304_have_no_body() {
        let head = Ask {
            head_method: true,
            ..GET11
        };
        let t = translate(b"Status: 200 OK\r\nContent-Length: 9\r\n\r\n", head, false)
            .unwrap()
            .unwrap();
        assert_eq!(t.body, Body::None);
        assert!(t.keep);
        let t = translate(b"Status: 204 No Content\r\n\r\n", GET11, false)
            .unwrap()
            .unwrap();
        assert_eq!(t.body, Body::None);
        assert!(!text(&t).contains("chunked"));
    }

    #[test]
    fn an_incomplete_head_waits_and_a_bad_status_is_an_error() {
        assert!(
            translate(b"Status: 200 OK\r\nX: y", GET11, true)
                .unwrap()
                .is_none()
        );
        assert!(translate(b"Status: abc\r\n\r\n", GET11, false).is_err());
    }

    #[test]
    fn the_app_cannot_set_the_framing() {
        let cgi = b"Status: 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: upgrade\r\n\r\n";
        let t = translate(cgi, GET11, false).unwrap().unwrap();
        assert!(!text(&t).contains("gzip"));
        assert!(!text(&t).contains("upgrade"));
    }
}
