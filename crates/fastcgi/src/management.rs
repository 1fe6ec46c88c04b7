//! Management records (request id 0, spec §4): what this responder answers to
//! FCGI_GET_VALUES. (Other management types get UNKNOWN_TYPE, see `record.rs`.)

use super::error::NameValueError;
use super::params::{encode_pair, name_values};

/// The variables a web server may ask about, and drover's values: a worker is one process
/// serving one connection and one request at a time.
const VALUES: [(&[u8], &[u8]); 3] = [
    (b"FCGI_MAX_CONNS", b"1"),
    (b"FCGI_MAX_REQS", b"1"),
    (b"FCGI_MPXS_CONNS", b"0"),
];

/// The content of the GET_VALUES_RESULT answering a GET_VALUES `query`: the known names
/// asked for, each once with its value; unknown names are left out, as the spec says.
pub fn get_values_result(query: &[u8]) -> Result<Vec<u8>, NameValueError> {
    let mut answer = Vec::new();
    let mut answered = [false; VALUES.len()];
    for pair in name_values(query) {
        let (name, _) = pair?;
        let Some(slot) = VALUES.iter().position(|(known, _)| *known == name) else {
            continue;
        };
        // Each name once, so the answer can never outgrow one record.
        if !std::mem::replace(&mut answered[slot], true) {
            encode_pair(&mut answer, name, VALUES[slot].1);
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(names: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        for name in names {
            encode_pair(&mut out, name, b"");
        }
        out
    }

    #[test]
    fn known_names_are_answered_once_unknown_ones_left_out() {
        let q = query(&[
            b"FCGI_MPXS_CONNS",
            b"FCGI_UNKNOWN",
            b"FCGI_MAX_CONNS",
            b"FCGI_MAX_CONNS",
        ]);
        let answer = get_values_result(&q).unwrap();
        let pairs: Vec<_> = name_values(&answer).map(Result::unwrap).collect();
        assert_eq!(
            pairs,
            [
                (&b"FCGI_MPXS_CONNS"[..], &b"0"[..]),
                (b"FCGI_MAX_CONNS", b"1")
            ]
        );
    }

    #[test]
    fn an_empty_query_gets_an_empty_answer() {
        assert_eq!(get_values_result(b"").unwrap(), b"");
    }

    #[test]
    fn a_malformed_query_is_an_error() {
        assert!(get_values_result(&[14, 0, b'F']).is_err());
    }
}
