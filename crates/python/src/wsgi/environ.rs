//! The PEP 3333 environ of one request, from its FastCGI params.
//!
//! Every CGI variable nginx sends becomes a native string decoded as latin-1 (PEP 3333's
//! rule for bytes from the server), but for the two header copies [`passed`] leaves out.
//! SCRIPT_NAME and PATH_INFO are recomputed from the request path and the pool's `mount`,
//! because nginx's fastcgi.conf sends the whole path as SCRIPT_NAME and no PATH_INFO.

use drover_fastcgi::Params;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// The request path, split at the mount point: (SCRIPT_NAME, PATH_INFO).
///
/// The path is DOCUMENT_URI (nginx's decoded, normalised `$uri`) when sent, else
/// SCRIPT_NAME + PATH_INFO as another server may split them. A path under `mount` loses
/// that prefix; any other path is passed whole.
pub fn split_path<'a>(params: &'a Params, mount: &'a str) -> (&'a [u8], Vec<u8>) {
    let full: Vec<u8> = match params.get("DOCUMENT_URI").filter(|uri| !uri.is_empty()) {
        Some(uri) => uri.to_vec(),
        None => {
            let mut path = params.get("SCRIPT_NAME").unwrap_or_default().to_vec();
            path.extend_from_slice(params.get("PATH_INFO").unwrap_or_default());
            path
        }
    };
    let mount = mount.as_bytes();
    if !mount.is_empty()
        && full.starts_with(mount)
        && matches!(full.get(mount.len()), None | Some(b'/'))
    {
        return (mount, full[mount.len()..].to_vec());
    }
    (mount, full)
}

/// Whether a FastCGI param becomes an environ entry. nginx passes every request header as
/// `HTTP_*`, Content-Type and Content-Length included, which CGI carries as CONTENT_TYPE
/// and CONTENT_LENGTH only: PEP 3333's validator (`wsgiref.validate`) refuses the `HTTP_`
/// copies, and gunicorn drops them too.
pub fn passed(name: &[u8]) -> bool {
    !matches!(name, b"HTTP_CONTENT_TYPE" | b"HTTP_CONTENT_LENGTH")
}

/// `wsgi.url_scheme`: "https" when nginx says HTTPS=on, else REQUEST_SCHEME, else "http".
pub fn url_scheme(params: &Params) -> &'static str {
    match params.get("HTTPS") {
        Some(v) if v.eq_ignore_ascii_case(b"on") || v == b"1" => return "https",
        _ => {}
    }
    match params.get("REQUEST_SCHEME") {
        Some(b"https") => "https",
        _ => "http",
    }
}

/// A Python str from bytes, decoded as latin-1 (every byte is one code point, so this
/// never fails).
pub fn latin1<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    // SAFETY: a valid pointer and length; PyUnicode_DecodeLatin1 returns a new reference
    // or NULL with an exception set, which from_owned_ptr_or_err turns into Err.
    unsafe {
        let ptr = pyo3::ffi::PyUnicode_DecodeLatin1(
            bytes.as_ptr().cast(),
            bytes.len() as pyo3::ffi::Py_ssize_t,
            std::ptr::null(),
        );
        Ok(Bound::from_owned_ptr_or_err(py, ptr)?.cast_into_unchecked())
    }
}

thread_local! {
    /// Param names seen before, as Python strings: nginx sends the same ~25 names with every
    /// request, and a reused str also keeps its hash, which the dict insert needs. Bounded, so
    /// that clients sending ever-new header names cannot grow it.
    static NAMES: std::cell::RefCell<std::collections::HashMap<Vec<u8>, Py<PyString>, Fnv>> = Default::default();
}

/// FNV-1a for the short names of [`NAMES`]: SipHash's flooding resistance is not needed for
/// a table that stops growing at [`NAMES_MAX`], and it showed in the per-request profile.
#[derive(Default, Clone, Copy)]
struct Fnv;

impl std::hash::BuildHasher for Fnv {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

struct FnvHasher(u64);

impl std::hash::Hasher for FnvHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}
const NAMES_MAX: usize = 512;

fn name<'py>(py: Python<'py>, bytes: &[u8]) -> PyResult<Bound<'py, PyString>> {
    NAMES.with_borrow_mut(|names| {
        if let Some(name) = names.get(bytes) {
            return Ok(name.bind(py).clone());
        }
        let name = latin1(py, bytes)?;
        if names.len() < NAMES_MAX {
            names.insert(bytes.to_vec(), name.clone().unbind());
        }
        Ok(name)
    })
}

/// Fills `environ` (a copy of the pool's constant `wsgi.*` entries) with the request.
pub fn fill(
    py: Python<'_>,
    environ: &Bound<'_, PyDict>,
    params: &Params,
    mount: &str,
) -> PyResult<()> {
    for (key, value) in params.iter().filter(|(key, _)| passed(key)) {
        environ.set_item(name(py, key)?, latin1(py, value)?)?;
    }
    let (script_name, path_info) = split_path(params, mount);
    environ.set_item(pyo3::intern!(py, "SCRIPT_NAME"), latin1(py, script_name)?)?;
    environ.set_item(pyo3::intern!(py, "PATH_INFO"), latin1(py, &path_info)?)?;
    let scheme = match url_scheme(params) {
        "https" => pyo3::intern!(py, "https"),
        _ => pyo3::intern!(py, "http"),
    };
    environ.set_item(pyo3::intern!(py, "wsgi.url_scheme"), scheme)?;
    // PEP 3333's required variables, for a web server that leaves some out.
    let required = [
        (
            "REQUEST_METHOD",
            pyo3::intern!(py, "REQUEST_METHOD"),
            pyo3::intern!(py, "GET"),
        ),
        (
            "QUERY_STRING",
            pyo3::intern!(py, "QUERY_STRING"),
            pyo3::intern!(py, ""),
        ),
        (
            "SERVER_NAME",
            pyo3::intern!(py, "SERVER_NAME"),
            pyo3::intern!(py, "localhost"),
        ),
        (
            "SERVER_PORT",
            pyo3::intern!(py, "SERVER_PORT"),
            pyo3::intern!(py, "80"),
        ),
        (
            "SERVER_PROTOCOL",
            pyo3::intern!(py, "SERVER_PROTOCOL"),
            pyo3::intern!(py, "HTTP/1.0"),
        ),
    ];
    for (raw, key, default) in required {
        if params.get(raw).is_none() {
            environ.set_item(key, default)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use drover_fastcgi::encode_pair;

    fn params(pairs: &[(&str, &str)]) -> Params {
        let mut raw = Vec::new();
        for (name, value) in pairs {
            encode_pair(&mut raw, name.as_bytes(), value.as_bytes());
        }
        Params::decode(raw).unwrap()
    }

    #[test]
    fn nginx_paths_split_at_the_mount() {
        let p = params(&[
            ("SCRIPT_NAME", "/app/users/7"),
            ("DOCUMENT_URI", "/app/users/7"),
        ]);
        assert_eq!(split_path(&p, "/app"), (&b"/app"[..], b"/users/7".to_vec()));
        assert_eq!(split_path(&p, ""), (&b""[..], b"/app/users/7".to_vec()));
    }

    #[test]
    fn the_mount_itself_gives_an_empty_path_info() {
        let p = params(&[("DOCUMENT_URI", "/app")]);
        assert_eq!(split_path(&p, "/app"), (&b"/app"[..], b"".to_vec()));
    }

    #[test]
    fn a_path_that_only_shares_a_prefix_is_not_under_the_mount() {
        let p = params(&[("DOCUMENT_URI", "/application")]);
        assert_eq!(split_path(&p, "/app").1, b"/application".to_vec());
    }

    #[test]
    fn without_document_uri_script_name_and_path_info_are_joined() {
        let p = params(&[("SCRIPT_NAME", "/app"), ("PATH_INFO", "/x")]);
        assert_eq!(split_path(&p, "/app").1, b"/x".to_vec());
    }

    #[test]
    fn the_http_copies_of_content_type_and_length_are_left_out() {
        assert!(!passed(b"HTTP_CONTENT_TYPE"));
        assert!(!passed(b"HTTP_CONTENT_LENGTH"));
        for name in [
            "CONTENT_TYPE",
            "CONTENT_LENGTH",
            "HTTP_ACCEPT",
            "HTTP_CONTENT_MD5",
        ] {
            assert!(passed(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn url_scheme_follows_https_then_request_scheme() {
        assert_eq!(url_scheme(&params(&[("HTTPS", "on")])), "https");
        assert_eq!(
            url_scheme(&params(&[("HTTPS", ""), ("REQUEST_SCHEME", "http")])),
            "http"
        );
        assert_eq!(url_scheme(&params(&[("REQUEST_SCHEME", "https")])), "https");
        assert_eq!(url_scheme(&params(&[])), "http");
    }
}
