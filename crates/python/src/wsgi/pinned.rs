//! A request's handle on its connection, inside the Python objects the app gets
//! (`wsgi.input`, `start_response`, `write`).
//!
//! Those objects may be freed on any thread: with `threads = N`, Python's cycle collector
//! runs on whichever thread allocates when it triggers, and frees the cycles the app left
//! (a Flask request context holds its environ, and the environ its `wsgi.input`). A pyo3
//! class marked `unsendable` that is freed on another thread is leaked with a
//! `RuntimeError` in the log, hundreds a minute under threads. So the handle, an `Rc`
//! that only its own thread may touch, is [`Pinned`]: used only on the thread that made
//! it, and let go of ([`Pinned::release`]) by that thread when the request ends; what is
//! freed later, anywhere, holds nothing.

use std::mem::ManuallyDrop;
use std::thread::ThreadId;

use pyo3::PyResult;
use pyo3::exceptions::PyRuntimeError;

pub struct Pinned<T> {
    value: Option<ManuallyDrop<T>>,
    owner: ThreadId,
}

// SAFETY: the value is reached only on `owner` (`get`, `release`, and `Drop`, which
// leaves it alone elsewhere), so it is never used, nor its `Rc` count changed, on two
// threads.
unsafe impl<T> Send for Pinned<T> {}
// SAFETY: as above: a shared reference reaches the value only on `owner`.
unsafe impl<T> Sync for Pinned<T> {}

impl<T> Pinned<T> {
    pub fn new(value: T) -> Pinned<T> {
        Pinned {
            value: Some(ManuallyDrop::new(value)),
            owner: std::thread::current().id(),
        }
    }

    /// The value, on its own thread while the request lasts.
    pub fn get(&self) -> PyResult<&T> {
        match &self.value {
            Some(value) if std::thread::current().id() == self.owner => Ok(value),
            Some(_) => Err(PyRuntimeError::new_err(
                "this request's object is used from another thread than its request's",
            )),
            None => Err(PyRuntimeError::new_err("this request has ended")),
        }
    }

    /// Lets the value go, on its own thread (elsewhere: nothing happens).
    pub fn release(&mut self) {
        if std::thread::current().id() == self.owner
            && let Some(mut value) = self.value.take()
        {
            // SAFETY: taken out of the Option, so dropped exactly once, on its thread.
            unsafe { ManuallyDrop::drop(&mut value) };
        }
    }
}

impl<T> Drop for Pinned<T> {
    /// On its own thread the value is dropped; on another, one the request did not
    /// release (an app that kept `wsgi.input` past its request) is leaked rather than
    /// dropped where its owner may be using it.
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_released_value_is_gone_and_another_thread_gets_an_error_not_the_value() {
        let shared = Rc::new(5);
        let mut pinned = Pinned::new(shared.clone());
        assert_eq!(**pinned.get().unwrap(), 5);
        assert_eq!(Rc::strong_count(&shared), 2);
        let moved = std::thread::scope(|s| s.spawn(|| pinned.get().is_err()).join().unwrap());
        assert!(moved);
        pinned.release();
        assert_eq!(Rc::strong_count(&shared), 1);
        assert!(pinned.get().is_err());
    }
}
