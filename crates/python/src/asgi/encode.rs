//! An ASGI response as FastCGI records: the CGI head (`Status:` and the app's headers),
//! STDOUT records and END_REQUEST. Records are unpadded and at most 65,535 bytes, as
//! `drover_fastcgi` writes them; a response that fits is one buffer and one `write()`.

use drover_fastcgi::{HEADER_LEN, Header, MAX_CONTENT_LEN, ProtocolStatus, RecordType};
use drover_worker::http::response::{check_field, reason};

/// Appends the CGI head of a response: `Status: 200 OK`, each header, the blank line.
/// A header name must be an HTTP token and a value must hold no CR, LF or NUL
/// (`check_field`, the HTTP listener's rule): an app must not split the response.
pub fn head<'a>(
    out: &mut Vec<u8>,
    status: u16,
    headers: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<(), String> {
    if !(100..=999).contains(&status) {
        return Err(format!("status {status} is not a 3-digit HTTP status"));
    }
    out.extend_from_slice(b"Status: ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        check_field(name, value)?;
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// Appends `first` then `second` as STDOUT records of request `id` (none when both are
/// empty: an empty STDOUT record would end the stream).
pub fn stdout(out: &mut Vec<u8>, id: u16, first: &[u8], second: &[u8]) {
    let total = first.len() + second.len();
    out.reserve(total + HEADER_LEN * (total / MAX_CONTENT_LEN + 1));
    let (mut a, mut b) = (first, second);
    while !a.is_empty() || !b.is_empty() {
        let len = (a.len() + b.len()).min(MAX_CONTENT_LEN);
        // `len` is at most MAX_CONTENT_LEN, a u16.
        let header = Header::new(RecordType::Stdout, id, len as u16);
        out.extend_from_slice(&header.encode());
        let from_a = len.min(a.len());
        out.extend_from_slice(&a[..from_a]);
        a = &a[from_a..];
        let from_b = len - from_a;
        out.extend_from_slice(&b[..from_b]);
        b = &b[from_b..];
    }
}

/// Appends the end of request `id`: the empty STDOUT record that closes the stream, then
/// END_REQUEST with `app_status` (non-zero: the app failed after its head went out).
pub fn end(out: &mut Vec<u8>, id: u16, app_status: u32) {
    out.extend_from_slice(&Header::new(RecordType::Stdout, id, 0).encode());
    out.extend_from_slice(&Header::new(RecordType::EndRequest, id, 8).encode());
    out.extend_from_slice(&drover_fastcgi::end_request_body(
        app_status,
        ProtocolStatus::RequestComplete,
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_cgi_status_then_headers() {
        let mut out = Vec::new();
        let headers: [(&[u8], &[u8]); 2] = [
            (b"content-type", b"application/json"),
            (b"set-cookie", b"a=1"),
        ];
        head(&mut out, 201, headers).unwrap();
        assert_eq!(
            out,
            b"Status: 201 Created\r\ncontent-type: application/json\r\nset-cookie: a=1\r\n\r\n"
        );
    }

    #[test]
    fn headers_that_would_split_the_response_are_refused() {
        let mut out = Vec::new();
        let bad: [(&[u8], &[u8]); 3] = [(b"x", b"a\r\nStatus: 302"), (b"x y", b"1"), (b"", b"1")];
        for header in bad {
            assert!(head(&mut out, 200, [header]).is_err(), "{header:?}");
        }
        assert!(head(&mut out, 99, []).is_err());
        assert!(head(&mut out, 1000, []).is_err());
    }

    #[test]
    fn a_large_body_is_cut_into_records_of_at_most_65535_bytes() {
        let body = vec![7u8; MAX_CONTENT_LEN * 2 + 10];
        let mut out = Vec::new();
        stdout(&mut out, 3, b"head", &body);
        let mut pos = 0;
        let mut contents = Vec::new();
        while pos < out.len() {
            let header = Header::decode(out[pos..pos + 8].try_into().unwrap()).unwrap();
            assert_eq!(
                (header.record_type, header.request_id),
                (RecordType::Stdout, 3)
            );
            let len = usize::from(header.content_length);
            assert!(len > 0);
            contents.extend_from_slice(&out[pos + 8..pos + 8 + len]);
            pos += 8 + len;
        }
        assert_eq!(&contents[..4], b"head");
        assert_eq!(contents[4..], body[..]);
    }

    #[test]
    fn nothing_to_send_gives_no_record_and_the_end_is_two() {
        let mut out = Vec::new();
        stdout(&mut out, 1, b"", b"");
        assert!(out.is_empty());
        end(&mut out, 1, 0);
        assert_eq!(out.len(), 8 + 16);
        assert_eq!(out[1], RecordType::Stdout.as_u8());
        assert_eq!(out[9], RecordType::EndRequest.as_u8());
    }

    #[test]
    fn every_status_has_a_reason() {
        assert_eq!(reason(418), "Client Error");
        assert_eq!(reason(599), "Server Error");
        assert_eq!(reason(404), "Not Found");
    }
}
