//! Name-value pairs (spec §3.4): the content of PARAMS and GET_VALUES streams, and
//! [`Params`], a request's decoded CGI variables.
//!
//! Each length is one byte (0–127, high bit clear) or four bytes big-endian with the high
//! bit set (up to 2³¹−1); the name's length and the value's length come first, then the
//! name's bytes and the value's bytes.

use std::fmt;
use std::ops::Range;

use super::error::NameValueError;

/// A request's params, decoded in place: one buffer holds the raw PARAMS stream as it came
/// off the wire, and an index of offsets points into it, so decoding costs two allocations
/// however many variables nginx sends (about 25 for a GET).
#[derive(Clone, Default)]
pub struct Params {
    raw: Vec<u8>,
    pairs: Vec<Span>,
}

/// Where one pair lies in `raw`: the name is `name_start..value_start`, the value
/// `value_start..value_end`.
#[derive(Clone, Copy)]
struct Span {
    name_start: usize,
    value_start: usize,
    value_end: usize,
}

impl Params {
    /// Decodes a complete PARAMS stream (the contents of its records, concatenated: a pair
    /// may straddle two records).
    pub fn decode(raw: Vec<u8>) -> Result<Params, NameValueError> {
        let mut params = Params {
            raw,
            pairs: Vec::new(),
        };
        params.index()?;
        Ok(params)
    }

    /// Empties the params but keeps both allocations, and returns the raw buffer for the
    /// next stream to be read into; [`Self::index`] then decodes it.
    pub(super) fn reset(&mut self) -> &mut Vec<u8> {
        self.raw.clear();
        self.pairs.clear();
        &mut self.raw
    }

    /// The raw stream being read, as it is.
    pub(super) fn raw_mut(&mut self) -> &mut Vec<u8> {
        &mut self.raw
    }

    /// Indexes the pairs of the raw stream.
    pub(super) fn index(&mut self) -> Result<(), NameValueError> {
        // nginx's pairs average ~30 bytes (fastcgi.conf plus browser headers): reserving
        // one span per 16 bytes keeps `pairs` to one allocation for a typical request.
        self.pairs.reserve(self.raw.len() / 16 + 4);
        let mut pos = 0;
        while pos < self.raw.len() {
            let (name, value) = next_pair(&self.raw, pos)?;
            let span = Span {
                name_start: name.start,
                value_start: value.start,
                value_end: value.end,
            };
            self.pairs.push(span);
            pos = value.end;
        }
        Ok(())
    }

    /// The value of `name`. A name sent twice yields its last value, as in php-fpm.
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<&[u8]> {
        let name = name.as_ref();
        // Lengths first: most names differ in length, and comparing them costs no memcmp.
        let span = self.pairs.iter().rev().find(|span| {
            span.value_start - span.name_start == name.len()
                && self.raw[span.name_start..span.value_start] == *name
        })?;
        Some(&self.raw[span.value_start..span.value_end])
    }

    /// Sets `name` to `value`: a pair of that name that came is no longer seen (by
    /// [`Params::get`] or [`Params::iter`]: its bytes stay in the buffer, unindexed), and
    /// the new pair comes last. For what a worker adds to a request before the app sees it
    /// (drover's request id, `HTTP_X_REQUEST_ID`); costs one append, no copy of the rest.
    pub fn set(&mut self, name: &[u8], value: &[u8]) {
        let raw = &self.raw;
        self.pairs
            .retain(|span| raw[span.name_start..span.value_start] != *name);
        encode_pair(&mut self.raw, name, value);
        let value_end = self.raw.len();
        self.pairs.push(Span {
            name_start: value_end - value.len() - name.len(),
            value_start: value_end - value.len(),
            value_end,
        });
    }

    /// The pairs in the order the web server sent them.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            raw: &self.raw,
            spans: self.pairs.iter(),
        }
    }

    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Size of the raw stream, for the connection's next allocation and for limits.
    pub fn encoded_len(&self) -> usize {
        self.raw.len()
    }
}

impl<'a> IntoIterator for &'a Params {
    type Item = (&'a [u8], &'a [u8]);
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Shows names and values as (lossy) text: CGI variables are text in practice.
impl fmt::Debug for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        f.debug_map()
            .entries(self.iter().map(|(n, v)| (text(n), text(v))))
            .finish()
    }
}

/// Iterator over [`Params`], as `(name, value)` byte slices.
pub struct Iter<'a> {
    raw: &'a [u8],
    spans: std::slice::Iter<'a, Span>,
}

impl<'a> Iter<'a> {
    fn pair(&self, span: &Span) -> (&'a [u8], &'a [u8]) {
        let raw: &'a [u8] = self.raw;
        (
            &raw[span.name_start..span.value_start],
            &raw[span.value_start..span.value_end],
        )
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let span = self.spans.next()?;
        Some(self.pair(span))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.spans.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        let span = self.spans.next_back()?;
        Some(self.pair(span))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Iterates over the pairs of a name-value stream without copying; stops after the first
/// error. Used for GET_VALUES, where the pairs are looked at once.
pub fn name_values(data: &[u8]) -> NameValues<'_> {
    NameValues { data, pos: 0 }
}

pub struct NameValues<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Iterator for NameValues<'a> {
    type Item = Result<(&'a [u8], &'a [u8]), NameValueError>;

    fn next(&mut self) -> Option<Self::Item> {
        let data: &'a [u8] = self.data;
        if self.pos >= data.len() {
            return None;
        }
        match next_pair(data, self.pos) {
            Ok((name, value)) => {
                self.pos = value.end;
                Some(Ok((&data[name], &data[value])))
            }
            Err(err) => {
                self.pos = data.len();
                Some(Err(err))
            }
        }
    }
}

/// Decodes the pair starting at `pos` (< `data.len()`): the byte ranges of its name and
/// value, both checked to lie inside `data`.
#[inline]
fn next_pair(data: &[u8], pos: usize) -> Result<(Range<usize>, Range<usize>), NameValueError> {
    let (name_len, value_len, start) = match data.get(pos..pos + 2) {
        // Nearly every CGI variable has a name and a value under 128 bytes: both lengths
        // in one check, which halves the cost of decoding nginx's params.
        Some(&[name_len, value_len]) if (name_len | value_len) & 0x80 == 0 => {
            (u32::from(name_len), u32::from(value_len), pos + 2)
        }
        _ => {
            let (name_len, after_name_len) = decode_length(data, pos)?;
            let (value_len, start) = decode_length(data, after_name_len)?;
            (name_len, value_len, start)
        }
    };
    let available = data.len() - start;
    let declared = u64::from(name_len) + u64::from(value_len);
    if declared > available as u64 {
        return Err(NameValueError::TruncatedData {
            offset: pos,
            declared,
            available,
        });
    }
    // Both lengths fit in `available` (checked above), so these sums stay in bounds.
    let value_start = start + name_len as usize;
    Ok((
        start..value_start,
        value_start..value_start + value_len as usize,
    ))
}

/// One length at `pos`: returns it and the position after it.
#[inline]
fn decode_length(data: &[u8], pos: usize) -> Result<(u32, usize), NameValueError> {
    let truncated = NameValueError::TruncatedLength { offset: pos };
    let first = *data.get(pos).ok_or(truncated.clone())?;
    if first & 0x80 == 0 {
        return Ok((u32::from(first), pos + 1));
    }
    let bytes = data.get(pos..pos + 4).ok_or(truncated)?;
    let length = u32::from_be_bytes([bytes[0] & 0x7f, bytes[1], bytes[2], bytes[3]]);
    Ok((length, pos + 4))
}

/// Appends one pair, choosing the 1- or 4-byte form of each length.
///
/// # Panics
/// If a length exceeds 2³¹−1 bytes, which the format cannot express. drover only encodes
/// its own short GET_VALUES answers; clients and tests encode what they build.
pub fn encode_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    encode_length(out, name.len());
    encode_length(out, value.len());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

fn encode_length(out: &mut Vec<u8>, length: usize) {
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let length = u32::try_from(length).ok().filter(|l| *l <= 0x7fff_ffff);
        let length = length.expect("a name-value length fits in 31 bits");
        out.extend_from_slice(&(length | 0x8000_0000).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, value) in pairs {
            encode_pair(&mut out, name, value);
        }
        out
    }

    #[test]
    fn a_pair_set_replaces_every_one_of_its_name_and_comes_last() {
        let raw = encode(&[(b"A", b"1"), (b"ID", b"x y"), (b"B", b"2"), (b"ID", b"z")]);
        let mut params = Params::decode(raw).unwrap();
        params.set(b"ID", b"abc");
        params.set(b"NEW", b"");
        assert_eq!(params.get("ID"), Some(&b"abc"[..]));
        let pairs: Vec<_> = params.iter().collect();
        let expected: Vec<(&[u8], &[u8])> =
            vec![(b"A", b"1"), (b"B", b"2"), (b"ID", b"abc"), (b"NEW", b"")];
        assert_eq!(pairs, expected);
        assert_eq!(params.len(), 4);
    }

    #[test]
    fn short_lengths_take_one_byte() {
        let out = encode(&[(b"SCRIPT_NAME", b"/index.php")]);
        assert_eq!(&out[..2], &[11, 10]);
        assert_eq!(&out[2..], b"SCRIPT_NAME/index.php");
    }

    #[test]
    fn lengths_from_128_take_four_bytes_with_the_high_bit_set() {
        let value = vec![b'x'; 128];
        let out = encode(&[(b"N", &value)]);
        assert_eq!(&out[..5], &[1, 0x80, 0, 0, 128]);
        let out = encode(&[(&[b'n'; 127], b"")]);
        assert_eq!(out[0], 127, "127 still fits one byte");
    }

    #[test]
    fn four_byte_lengths_decode_with_the_high_bit_masked() {
        let value = vec![b'v'; 70_000];
        let raw = encode(&[(b"HTTP_COOKIE", &value), (b"A", b"b")]);
        assert_eq!(&raw[1..5], &[0x80, 0x01, 0x11, 0x70]);
        let params = Params::decode(raw).unwrap();
        assert_eq!(params.get("HTTP_COOKIE").map(<[u8]>::len), Some(70_000));
        assert_eq!(params.get(b"A"), Some(&b"b"[..]));
    }

    #[test]
    fn a_four_byte_length_may_encode_a_short_value() {
        // Legal, if wasteful: senders are not required to use the short form.
        let raw = vec![0x80, 0, 0, 1, 0x80, 0, 0, 2, b'N', b'v', b'w'];
        let params = Params::decode(raw).unwrap();
        assert_eq!(
            params.iter().collect::<Vec<_>>(),
            vec![(&b"N"[..], &b"vw"[..])]
        );
    }

    #[test]
    fn params_keep_order_allow_empty_values_and_last_duplicate_wins() {
        let raw = encode(&[(b"A", b"1"), (b"EMPTY", b""), (b"A", b"2")]);
        let params = Params::decode(raw).unwrap();
        assert_eq!(params.len(), 3);
        assert_eq!(params.get("A"), Some(&b"2"[..]));
        assert_eq!(params.get("EMPTY"), Some(&b""[..]));
        assert_eq!(params.get("MISSING"), None);
        let names: Vec<_> = params.iter().map(|(n, _)| n).collect();
        assert_eq!(names, [&b"A"[..], b"EMPTY", b"A"]);
        assert_eq!(
            format!("{params:?}"),
            r#"{"A": "1", "EMPTY": "", "A": "2"}"#
        );
    }

    #[test]
    fn an_empty_stream_is_no_params() {
        let params = Params::decode(Vec::new()).unwrap();
        assert!(params.is_empty());
        assert_eq!(name_values(b"").count(), 0);
    }

    #[test]
    fn a_cut_off_length_is_malformed() {
        assert_eq!(
            Params::decode(vec![0x80, 0, 0]).unwrap_err(),
            NameValueError::TruncatedLength { offset: 0 }
        );
        // Name length present, value length missing.
        assert_eq!(
            Params::decode(encode(&[(b"A", b"1")]).into_iter().chain([3]).collect()).unwrap_err(),
            NameValueError::TruncatedLength { offset: 5 }
        );
    }

    #[test]
    fn lengths_past_the_end_are_malformed() {
        let err = Params::decode(vec![5, 5, b'n', b'a', b'm', b'e', b'v']).unwrap_err();
        assert_eq!(
            err,
            NameValueError::TruncatedData {
                offset: 0,
                declared: 10,
                available: 5
            }
        );
        // The largest lengths the format allows must not overflow the bounds check.
        let huge = vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, b'x'];
        assert!(matches!(
            Params::decode(huge).unwrap_err(),
            NameValueError::TruncatedData {
                declared: 0xffff_fffe,
                available: 1,
                ..
            }
        ));
    }

    #[test]
    fn name_values_iterates_and_stops_after_an_error() {
        let mut raw = encode(&[(b"FCGI_MAX_CONNS", b""), (b"FCGI_MPXS_CONNS", b"")]);
        raw.push(9);
        let items: Vec<_> = name_values(&raw).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[1], Ok((&b"FCGI_MPXS_CONNS"[..], &b""[..])));
        assert!(items[2].is_err());
    }
}
