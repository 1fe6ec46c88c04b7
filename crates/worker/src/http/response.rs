//! The runtimes write a CGI response (a `Status:` line, headers, a blank line, the body),
//! as nginx reads it from FastCGI; on an HTTP connection that head becomes an HTTP/1.1
//! status line and headers, and the body's framing is chosen here: Content-Length when the
//! app gave one, else chunked (HTTP/1.1) or delimited by the close (HTTP/1.0). Pure.
//! An ASGI app gives its status and headers as values: [`frame`] writes its HTTP head
//! directly, with the same framing.

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
    let status = fields
        .iter()
        .rev()
        .find(|f| f.name.eq_ignore_ascii_case("status"))
        .map_or(&b"200 OK"[..], |f| f.value);
    let code = status
        .get(..3)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse::<u16>().ok())
        .filter(|c| (100..=999).contains(c))
        .ok_or_else(|| format!("invalid Status {:?}", String::from_utf8_lossy(status)))?;
    let mut head = Head::new(cgi.len() + 64);
    head.status_line(status);
    for field in fields.iter() {
        if !field.name.eq_ignore_ascii_case("status") {
            head.field(field.name.as_bytes(), field.value);
        }
    }
    let whole = complete.then(|| (cgi.len() - len) as u64);
    let (body, keep) = head.end(code, ask, whole);
    Ok(Some(Translated {
        head: head.out,
        body,
        keep,
        consumed: len,
        status: code,
    }))
}

/// The HTTP head of a response whose status and headers the app gave as values (ASGI's
/// `http.response.start`), framed as [`translate`] frames a CGI head, without one being
/// written and parsed again. `whole`: the body's length when it is all here (it then gets
/// a Content-Length instead of chunks). A header name must be an HTTP token and a value
/// must hold no CR, LF or NUL ([`check_field`]).
pub fn frame<'a>(
    status: u16,
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ask: Ask,
    whole: Option<u64>,
) -> Result<Translated, String> {
    if !(100..=999).contains(&status) {
        return Err(format!("status {status} is not a 3-digit HTTP status"));
    }
    let mut head = Head::new(256);
    let mut line = [0u8; 3];
    // Three digits: 100..=999.
    for (i, divisor) in [100, 10, 1].into_iter().enumerate() {
        line[i] = b'0' + (status / divisor % 10) as u8;
    }
    head.out.extend_from_slice(b"HTTP/1.1 ");
    head.out.extend_from_slice(&line);
    head.out.push(b' ');
    head.out.extend_from_slice(reason(status).as_bytes());
    head.out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        check_field(name, value)?;
        head.field(name, value);
    }
    let (body, keep) = head.end(status, ask, whole);
    Ok(Translated {
        head: head.out,
        body,
        keep,
        consumed: 0,
        status,
    })
}

/// A response header an app gives: the name an HTTP token, the value free of CR, LF and
/// NUL, so that the app cannot split the response (a client or nginx would read a second
/// header block).
pub fn check_field(name: &[u8], value: &[u8]) -> Result<(), String> {
    if name.is_empty() || !name.iter().all(|&b| is_token(b)) {
        return Err(format!(
            "header name {:?} is not an HTTP token",
            String::from_utf8_lossy(name)
        ));
    }
    if value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(format!(
            "the value of header {:?} holds CR, LF or NUL",
            String::from_utf8_lossy(name)
        ));
    }
    Ok(())
}

/// RFC 9110's token characters.
fn is_token(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An HTTP head being written: the status line, the app's fields, then ours.
struct Head {
    out: Vec<u8>,
    /// The app's Content-Length, if it gave one that parses.
    length: Option<u64>,
}

impl Head {
    fn new(capacity: usize) -> Head {
        Head {
            out: Vec::with_capacity(capacity),
            length: None,
        }
    }

    fn status_line(&mut self, status: &[u8]) {
        self.out.extend_from_slice(b"HTTP/1.1 ");
        self.out.extend_from_slice(status);
        self.out.extend_from_slice(b"\r\n");
    }

    /// One of the app's fields; the framing ones are ours to set and are dropped.
    fn field(&mut self, name: &[u8], value: &[u8]) {
        if name.eq_ignore_ascii_case(b"content-length") {
            self.length = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
        }
        if name.eq_ignore_ascii_case(b"transfer-encoding")
            || name.eq_ignore_ascii_case(b"connection")
        {
            return;
        }
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
    }

    /// The framing, `Connection`, `Date` and the blank line; the body's framing and
    /// whether the connection may be kept.
    fn end(&mut self, code: u16, ask: Ask, whole: Option<u64>) -> (Body, bool) {
        let no_body = ask.head_method || code < 200 || code == 204 || code == 304;
        let body = match (self.length, whole) {
            _ if no_body => Body::None,
            (None, Some(n)) => {
                self.out.extend_from_slice(b"Content-Length: ");
                self.out.extend_from_slice(n.to_string().as_bytes());
                self.out.extend_from_slice(b"\r\n");
                self.length = Some(n);
                Body::Length(n)
            }
            (Some(n), _) => Body::Length(n),
            (None, None) if ask.minor == 1 => {
                self.out
                    .extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                Body::Chunked
            }
            (None, None) => Body::Close,
        };
        // A HEAD response without a length says nothing of the framing a GET would get; an
        // HTTP/1.0 client can keep only a connection whose response has a length.
        let keep =
            ask.keep_alive && body != Body::Close && !(ask.minor == 0 && self.length.is_none());
        if !keep {
            self.out.extend_from_slice(b"Connection: close\r\n");
        } else if ask.minor == 0 {
            self.out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        self.out.extend_from_slice(b"Date: ");
        date(&mut self.out);
        self.out.extend_from_slice(b"\r\n\r\n");
        (body, keep)
    }
}

/// Appends the `Date` value, formatted once a second (a response per few microseconds
/// would otherwise format the same date each time).
fn date(out: &mut Vec<u8>) {
    thread_local! {
        static DATE: std::cell::RefCell<(u64, String)> = const {
            std::cell::RefCell::new((u64::MAX, String::new()))
        };
    }
    let now = std::time::SystemTime::now();
    let secs = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    DATE.with_borrow_mut(|(at, text)| {
        if *at != secs {
            *at = secs;
            *text = httpdate::fmt_http_date(now);
        }
        out.extend_from_slice(text.as_bytes());
    });
}

/// The reason phrase of a status, as HTTP/1.1 clients show it (HTTP/2 has none).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => match status / 100 {
            1 => "Informational",
            2 => "Success",
            3 => "Redirection",
            4 => "Client Error",
            _ => "Server Error",
        },
    }
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

    /// The head without its Date line, which changes with the second.
    fn dateless(head: &[u8]) -> String {
        let text = String::from_utf8(head.to_vec()).unwrap();
        text.lines()
            .filter(|l| !l.starts_with("Date: "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_framed_head_is_the_translated_cgi_head() {
        let headers: [(&[u8], &[u8]); 3] = [
            (b"content-type", b"application/json"),
            (b"transfer-encoding", b"gzip"),
            (b"set-cookie", b"a=1"),
        ];
        let cgi = b"Status: 201 Created\r\ncontent-type: application/json\r\ntransfer-encoding: gzip\r\nset-cookie: a=1\r\n\r\n";
        let head = Ask {
            head_method: true,
            ..GET11
        };
        let http10 = Ask { minor: 0, ..GET11 };
        for ask in [GET11, head, http10] {
            for whole in [None, Some(5)] {
                let mut response = cgi.to_vec();
                if whole.is_some() {
                    response.extend_from_slice(b"hello");
                }
                let t = translate(&response, ask, whole.is_some()).unwrap().unwrap();
                let f = frame(201, headers, ask, whole).unwrap();
                assert_eq!(dateless(&f.head), dateless(&t.head));
                assert_eq!((f.body, f.keep, f.status), (t.body, t.keep, t.status));
            }
        }
    }

    #[test]
    fn a_framed_head_refuses_what_would_split_the_response() {
        let bad: [(&[u8], &[u8]); 3] = [(b"x", b"a\r\nStatus: 302"), (b"x y", b"1"), (b"", b"1")];
        for header in bad {
            assert!(frame(200, [header], GET11, None).is_err(), "{header:?}");
        }
        assert!(frame(99, [], GET11, None).is_err());
        assert!(frame(1000, [], GET11, None).is_err());
        assert_eq!(reason(418), "Client Error");
        assert_eq!(reason(404), "Not Found");
    }
}
