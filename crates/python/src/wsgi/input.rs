//! `wsgi.input`: the request body, streamed from FCGI_STDIN records and bounded by
//! CONTENT_LENGTH; read(n), read(), readline(n), readlines(hint) and iteration.

use std::cell::RefCell;
use std::rc::Rc;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::Conn;
use super::pinned::Pinned;

const CHUNK: usize = 64 * 1024;

#[pyclass(module = "drover")]
pub struct Input {
    conn: Pinned<Rc<RefCell<Conn>>>,
    /// Body bytes not yet read from the socket; `usize::MAX` when no CONTENT_LENGTH was
    /// sent (the body then ends with its STDIN stream).
    remaining: usize,
    /// Read ahead by `readline`, not yet returned.
    buffered: Vec<u8>,
}

impl Input {
    pub fn new(conn: Rc<RefCell<Conn>>, content_length: Option<usize>) -> Input {
        Input {
            conn: Pinned::new(conn),
            remaining: content_length.unwrap_or(usize::MAX),
            buffered: Vec::new(),
        }
    }

    /// The request ended: its connection is let go of (see `pinned.rs`).
    pub fn release(&mut self) {
        self.conn.release();
    }

    /// Moves up to `want` more bytes from the socket into `buffered`; false at the end.
    fn fill(&mut self, want: usize) -> PyResult<bool> {
        let want = want.min(self.remaining).min(CHUNK);
        if want == 0 {
            return Ok(false);
        }
        let start = self.buffered.len();
        self.buffered.resize(start + want, 0);
        let n = self
            .conn
            .get()?
            .borrow_mut()
            .read_stdin(&mut self.buffered[start..]);
        let n = match n {
            Ok(n) => n,
            Err(err) => {
                self.buffered.truncate(start);
                return Err(PyOSError::new_err(format!(
                    "reading the request body: {err}"
                )));
            }
        };
        self.buffered.truncate(start + n);
        if n == 0 {
            self.remaining = 0;
            return Ok(false);
        }
        self.remaining = self.remaining.saturating_sub(n);
        Ok(true)
    }

    fn take(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.buffered.len());
        self.buffered.drain(..n).collect()
    }

    fn read_line(&mut self, limit: usize) -> PyResult<Vec<u8>> {
        let mut scanned = 0;
        loop {
            if let Some(i) = self.buffered[scanned..].iter().position(|&b| b == b'\n') {
                return Ok(self.take((scanned + i + 1).min(limit)));
            }
            scanned = self.buffered.len();
            if scanned >= limit || !self.fill(limit - scanned)? {
                return Ok(self.take(limit));
            }
        }
    }
}

fn limit(size: Option<isize>) -> usize {
    match size {
        Some(n) if n >= 0 => n as usize,
        _ => usize::MAX,
    }
}

#[pymethods]
impl Input {
    #[pyo3(signature = (size=None))]
    fn read<'py>(&mut self, py: Python<'py>, size: Option<isize>) -> PyResult<Bound<'py, PyBytes>> {
        let want = limit(size);
        while self.buffered.len() < want && self.fill(want - self.buffered.len())? {}
        let data = self.take(want);
        Ok(PyBytes::new(py, &data))
    }

    #[pyo3(signature = (size=None))]
    fn readline<'py>(
        &mut self,
        py: Python<'py>,
        size: Option<isize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let line = self.read_line(limit(size))?;
        Ok(PyBytes::new(py, &line))
    }

    #[pyo3(signature = (hint=None))]
    fn readlines<'py>(
        &mut self,
        py: Python<'py>,
        hint: Option<isize>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let hint = limit(hint);
        let mut lines = Vec::new();
        let mut total = 0;
        loop {
            let line = self.read_line(usize::MAX)?;
            if line.is_empty() {
                return Ok(lines);
            }
            total += line.len();
            lines.push(PyBytes::new(py, &line));
            if total >= hint {
                return Ok(lines);
            }
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let line = self.read_line(usize::MAX)?;
        Ok((!line.is_empty()).then(|| PyBytes::new(py, &line)))
    }
}
