//! The reads of a FastCGI connection that the loop's thread drives itself (`hub.rs`):
//! non-blocking `recv()` into Rust buffers. No socket object, no transport and no task is
//! made per connection.

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
