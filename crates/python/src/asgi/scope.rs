//! The ASGI HTTP scope of a request, from its FastCGI params, built in Rust (the per-request
//! work the event loop would otherwise do in Python).
//!
//! - `path` is nginx's decoded, normalised `DOCUMENT_URI` (else SCRIPT_NAME + PATH_INFO),
//!   the whole path: `root_path` is the pool's `mount` and, as uvicorn and Starlette read
//!   it, `path` still starts with it.
//! - `raw_path` is `REQUEST_URI` as the client sent it, without its query.
//! - `headers` are nginx's `HTTP_*` params, back to lowercase names with `-`; Content-Type
//!   and Content-Length come from CONTENT_TYPE / CONTENT_LENGTH when nginx sent no `HTTP_`
//!   copy.

use std::cell::RefCell;
use std::collections::HashMap;

use drover_fastcgi::Params;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::wsgi::environ::{latin1, url_scheme};

/// The request's full path: DOCUMENT_URI, else SCRIPT_NAME + PATH_INFO.
pub fn full_path(params: &Params) -> Vec<u8> {
    match params.get("DOCUMENT_URI").filter(|uri| !uri.is_empty()) {
        Some(uri) => uri.to_vec(),
        None => {
            let mut path = params.get("SCRIPT_NAME").unwrap_or_default().to_vec();
            path.extend_from_slice(params.get("PATH_INFO").unwrap_or_default());
            path
        }
    }
}

/// `http_version` from SERVER_PROTOCOL ("HTTP/1.1" → "1.1", "HTTP/2.0" → "2").
pub fn http_version(protocol: Option<&[u8]>) -> &'static str {
    match protocol {
        Some(b"HTTP/1.0") => "1.0",
        Some(b"HTTP/2.0" | b"HTTP/2") => "2",
        Some(b"HTTP/3.0" | b"HTTP/3") => "3",
        _ => "1.1",
    }
}

/// The header name of a param: `HTTP_USER_AGENT` → `user-agent`; None for other params.
pub fn header_name(param: &[u8]) -> Option<Vec<u8>> {
    let name = param.strip_prefix(b"HTTP_")?;
    Some(
        name.iter()
            .map(|&b| {
                if b == b'_' {
                    b'-'
                } else {
                    b.to_ascii_lowercase()
                }
            })
            .collect(),
    )
}

/// The raw path: REQUEST_URI up to its query.
pub fn raw_path(params: &Params) -> Option<&[u8]> {
    let uri = params.get("REQUEST_URI")?;
    Some(uri.split(|&b| b == b'?').next().unwrap_or(uri))
}

/// A (host, port) pair from an address param and a port param.
fn address<'py>(
    py: Python<'py>,
    host: Option<&[u8]>,
    port: Option<&[u8]>,
) -> PyResult<Bound<'py, PyAny>> {
    let port = port.and_then(|p| std::str::from_utf8(p).ok()?.parse::<u16>().ok());
    match (host, port) {
        (Some(host), Some(port)) if !host.is_empty() => Ok(PyTuple::new(
            py,
            [
                latin1(py, host)?.into_any(),
                port.into_pyobject(py)?.into_any(),
            ],
        )?
        .into_any()),
        _ => Ok(py.None().into_bound(py)),
    }
}

thread_local! {
    /// Header names seen before, as Python bytes, by param name: nginx sends the same
    /// dozen with every request. Bounded, so that ever-new names cannot grow it.
    static NAMES: RefCell<HashMap<Vec<u8>, Py<PyBytes>>> = RefCell::new(HashMap::new());
}
const NAMES_MAX: usize = 512;

fn cached_name<'py>(py: Python<'py>, param: &[u8]) -> Option<Bound<'py, PyBytes>> {
    // Most of nginx's params are no header: they are told apart before they are hashed.
    if !param.starts_with(b"HTTP_") {
        return None;
    }
    NAMES.with_borrow_mut(|names| {
        if let Some(name) = names.get(param) {
            return Some(name.bind(py).clone());
        }
        let name = PyBytes::new(py, &header_name(param)?);
        if names.len() < NAMES_MAX {
            names.insert(param.to_vec(), name.clone().unbind());
        }
        Some(name)
    })
}

/// The scope's headers.
fn headers<'py>(py: Python<'py>, params: &Params) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    let (mut has_type, mut has_length) = (false, false);
    for (key, value) in params.iter() {
        let Some(name) = cached_name(py, key) else {
            continue;
        };
        has_type |= key == b"HTTP_CONTENT_TYPE";
        has_length |= key == b"HTTP_CONTENT_LENGTH";
        list.append(PyTuple::new(
            py,
            [name.into_any(), PyBytes::new(py, value).into_any()],
        )?)?;
    }
    for (has, param, name) in [
        (has_type, "CONTENT_TYPE", &b"content-type"[..]),
        (has_length, "CONTENT_LENGTH", &b"content-length"[..]),
    ] {
        if let Some(value) = params.get(param).filter(|v| !has && !v.is_empty()) {
            list.append((PyBytes::new(py, name), PyBytes::new(py, value)))?;
        }
    }
    Ok(list)
}

/// Builds the HTTP scope; `asgi` is the worker's shared `{"version": "3.0", ...}`.
pub fn build<'py>(
    py: Python<'py>,
    params: &Params,
    mount: &Bound<'py, PyString>,
    asgi: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    let scope = PyDict::new(py);
    let path = full_path(params);
    scope.set_item(pyo3::intern!(py, "type"), pyo3::intern!(py, "http"))?;
    scope.set_item(pyo3::intern!(py, "asgi"), asgi)?;
    let version = match http_version(params.get("SERVER_PROTOCOL")) {
        "1.0" => pyo3::intern!(py, "1.0"),
        "2" => pyo3::intern!(py, "2"),
        "3" => pyo3::intern!(py, "3"),
        _ => pyo3::intern!(py, "1.1"),
    };
    scope.set_item(pyo3::intern!(py, "http_version"), version)?;
    let method = match params.get("REQUEST_METHOD") {
        None | Some(b"GET") => pyo3::intern!(py, "GET").clone(),
        Some(b"POST") => pyo3::intern!(py, "POST").clone(),
        Some(other) => latin1(py, other)?,
    };
    scope.set_item(pyo3::intern!(py, "method"), method)?;
    let scheme = match url_scheme(params) {
        "https" => pyo3::intern!(py, "https"),
        _ => pyo3::intern!(py, "http"),
    };
    scope.set_item(pyo3::intern!(py, "scheme"), scheme)?;
    scope.set_item(
        pyo3::intern!(py, "path"),
        PyString::new(py, &String::from_utf8_lossy(&path)),
    )?;
    let raw = raw_path(params).unwrap_or(&path);
    scope.set_item(pyo3::intern!(py, "raw_path"), PyBytes::new(py, raw))?;
    scope.set_item(
        pyo3::intern!(py, "query_string"),
        PyBytes::new(py, params.get("QUERY_STRING").unwrap_or_default()),
    )?;
    scope.set_item(pyo3::intern!(py, "root_path"), mount)?;
    scope.set_item(pyo3::intern!(py, "headers"), headers(py, params)?)?;
    // A client address from X-Forwarded-For (an HTTP pool's trusted proxy) has no port:
    // 0, as uvicorn's proxy headers give it, so that `client` still names the client.
    let remote_port = match params.get("REMOTE_PORT") {
        None if params.get("REMOTE_ADDR").is_some_and(|a| !a.is_empty()) => Some(&b"0"[..]),
        port => port,
    };
    scope.set_item(
        pyo3::intern!(py, "client"),
        address(py, params.get("REMOTE_ADDR"), remote_port)?,
    )?;
    let host = params
        .get("SERVER_NAME")
        .filter(|h| !h.is_empty())
        .or_else(|| params.get("SERVER_ADDR"));
    scope.set_item(
        pyo3::intern!(py, "server"),
        address(py, host, params.get("SERVER_PORT"))?,
    )?;
    Ok(scope)
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
    fn header_names_come_back_lowercase_with_dashes() {
        assert_eq!(header_name(b"HTTP_USER_AGENT").unwrap(), b"user-agent");
        assert_eq!(header_name(b"HTTP_X_REQUEST_ID").unwrap(), b"x-request-id");
        assert_eq!(header_name(b"REMOTE_ADDR"), None);
    }

    #[test]
    fn the_path_is_document_uri_and_the_raw_path_is_request_uri_without_query() {
        let p = params(&[
            ("DOCUMENT_URI", "/app/caf\u{e9}/a b"),
            ("REQUEST_URI", "/app/caf%C3%A9/a%20b?x=1"),
        ]);
        assert_eq!(full_path(&p), "/app/caf\u{e9}/a b".as_bytes());
        assert_eq!(raw_path(&p).unwrap(), b"/app/caf%C3%A9/a%20b");
        let p = params(&[("SCRIPT_NAME", "/app"), ("PATH_INFO", "/x")]);
        assert_eq!(full_path(&p), b"/app/x");
        assert_eq!(raw_path(&p), None);
    }

    #[test]
    fn http_versions_are_asgi_s_spelling() {
        assert_eq!(http_version(Some(b"HTTP/1.0")), "1.0");
        assert_eq!(http_version(Some(b"HTTP/1.1")), "1.1");
        assert_eq!(http_version(Some(b"HTTP/2.0")), "2");
        assert_eq!(http_version(None), "1.1");
    }
}
