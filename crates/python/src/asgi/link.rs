//! The socket calls of a FastCGI connection that the loop's thread drives itself
//! (`server.py`'s `Link`, in place of an asyncio transport): non-blocking `recv()` into
//! Rust buffers ([`FastCgi::pump`](super::conn::FastCgi)), `send()`, `shutdown()` and
//! `close()` on the raw descriptor the acceptor handed over. No socket object, no
//! transport and no task is made per connection.

use pyo3::prelude::*;

/// One non-blocking `recv()` of at most `max` bytes, appended to `data`: the bytes read (0
/// at the end of the stream), or the errno (EAGAIN: nothing to read now). EINTR is retried.
pub(super) fn recv_into(fd: i32, data: &mut Vec<u8>, max: usize) -> Result<usize, i32> {
    data.reserve(max);
    loop {
        let spare = data.spare_capacity_mut();
        // SAFETY: recv writes at most `max` bytes into the spare capacity reserved above,
        // which is at least that long; MSG_DONTWAIT keeps it from blocking.
        let n = unsafe {
            libc::recv(
                fd,
                spare.as_mut_ptr().cast(),
                max.min(spare.len()),
                libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            let n = n as usize;
            // SAFETY: recv initialised the first `n` bytes of the spare capacity.
            unsafe { data.set_len(data.len() + n) };
            return Ok(n);
        }
        let errno = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        if errno != libc::EINTR {
            return Err(errno);
        }
    }
}

/// Sends what it can of `data` on `fd` without blocking: the bytes sent, or -errno (0 when
/// the socket's buffer is full: EAGAIN). A peer that is gone is an error (EPIPE), not a
/// SIGPIPE.
#[pyfunction]
pub(super) fn send(fd: i32, data: &Bound<'_, PyAny>) -> PyResult<isize> {
    let buffer = pyo3::buffer::PyBuffer::<u8>::get(data)?;
    let len = buffer.len_bytes();
    if !buffer.is_c_contiguous() {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "send() takes contiguous bytes",
        ));
    }
    let ptr = buffer.buf_ptr();
    loop {
        // SAFETY: the buffer is held (and so valid and contiguous) for `len` bytes until
        // `buffer` drops; send only reads them.
        let n = unsafe { libc::send(fd, ptr, len, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n);
        }
        match std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
        {
            libc::EINTR => continue,
            libc::EAGAIN => return Ok(0),
            errno => return Ok(-(errno as isize)),
        }
    }
}

/// Our end of `fd` says it will send nothing more (`shutdown(SHUT_WR)`): the web server
/// reads the response to its end while what it still sends is read and dropped.
#[pyfunction]
pub(super) fn shut(fd: i32) {
    // SAFETY: shutdown on a descriptor this connection owns; an error (already gone) is
    // of no consequence.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

/// Closes the connection's descriptor (once, by the connection that owns it).
#[pyfunction]
pub(super) fn close(fd: i32) {
    // SAFETY: the connection owns `fd` and closes it once, after the loop stopped
    // watching it.
    unsafe { libc::close(fd) };
}
