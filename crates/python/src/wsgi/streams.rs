//! `wsgi.errors` (to the pool's log, tagged with the worker's pid by the master) and
//! `wsgi.file_wrapper` (a file-like object served in blocks).

use std::io::Write;

use pyo3::prelude::*;

/// Writes to the worker's stderr, which is the pool's output socket: the master logs each
/// line as `pool NAME: worker PID: line`.
#[pyclass(module = "drover")]
pub struct Errors;

#[pymethods]
impl Errors {
    fn write(&self, text: &str) -> usize {
        let _ = std::io::stderr().write_all(text.as_bytes());
        text.chars().count()
    }

    fn writelines(&self, lines: &Bound<'_, PyAny>) -> PyResult<()> {
        for line in lines.try_iter()? {
            self.write(line?.extract::<&str>()?);
        }
        Ok(())
    }

    fn flush(&self) {}
}

/// PEP 3333's optional `wsgi.file_wrapper(filelike, block_size=8192)`.
#[pyclass(module = "drover")]
pub struct FileWrapper {
    filelike: Py<PyAny>,
    block_size: usize,
}

#[pymethods]
impl FileWrapper {
    #[new]
    #[pyo3(signature = (filelike, block_size=8192))]
    fn new(filelike: Py<PyAny>, block_size: usize) -> FileWrapper {
        FileWrapper {
            filelike,
            block_size: block_size.max(1),
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let block = self
            .filelike
            .bind(py)
            .call_method1("read", (self.block_size,))?;
        Ok((block.len()? > 0).then_some(block))
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let filelike = self.filelike.bind(py);
        if filelike.hasattr("close")? {
            filelike.call_method0("close")?;
        }
        Ok(())
    }
}
