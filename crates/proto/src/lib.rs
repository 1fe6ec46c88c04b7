//! What the drover master and the runtime processes it execs share, so that neither side
//! depends on the other:
//!
//! - [`access`]: the access log's format, parsed by the master (to check it) and the
//!   zygote (to render it).
//! - [`zygote`]: the protocol between the master and a zygote (`drover-python`,
//!   `drover-php`): its command line, the scoreboard's fd number, its report lines, a PHP
//!   worker's stack lines and its exit codes.
//! - [`terms`]: the terms a zygote is started on ([`terms::Terms`]), one typed and versioned
//!   structure the master writes into a memfd and the zygote reads back.
//! - [`sealed_memfd`], [`read_memfd`]: the sealed memfds that carry the terms and the TLS
//!   material from the master to a zygote.
//! - [`tls`]: TLS on an HTTP pool's listener: the files the master reads, checked by
//!   building the workers' rustls config, and the memfd that carries them to the zygote.
//! - [`Backoff`], [`EmergencyRestart`]: what a worker's exit means for the next spawn. The
//!   master applies them to the processes it execs, a zygote to the workers it forks.
//! - [`max_requests`]: the request limit a worker is given.
//! - [`resident_memory`]: a process's RSS, read by the master for every worker and by a
//!   Python worker for itself (`max_memory`).
//! - [`push_json_string`]: a JSON string literal, for the logs both sides write as JSON
//!   (the master's slowlog, a worker's access log).
//! - [`push_log_text`], [`log_text`]: a client's text (a URI, a user, a header) as a text
//!   log line may show it: with no line break nor any other control character of its own.

pub mod access;
mod backoff;
pub mod terms;
pub mod tls;
pub mod zygote;

pub use backoff::{Backoff, EmergencyRestart, Respawn, STARTUP_WINDOW};

/// The request limit one worker (or php-cgi generation) is given: `max_requests` plus a
/// draw in `0..=max_requests_jitter`, so that workers do not all recycle at once. 0 = never.
pub fn max_requests(max_requests: u32, jitter: u32, draw: impl FnOnce(u32) -> u32) -> u32 {
    if max_requests == 0 {
        return 0;
    }
    max_requests.saturating_add(draw(jitter).min(jitter))
}

/// A memfd holding `bytes`, sealed (nothing can write, grow or shrink it after this), which
/// closes on exec: the spawn moves it to the descriptor number the zygote reads it at.
pub fn sealed_memfd(name: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<std::os::fd::OwnedFd> {
    use nix::sys::memfd::{MFdFlags, memfd_create};
    let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    let mut file = std::fs::File::from(fd);
    std::io::Write::write_all(&mut file, bytes)?;
    // SAFETY: fcntl on the memfd just written; the seals only restrict it.
    let sealed = unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE,
        )
    };
    if sealed < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(file.into())
}

/// The zygote's side of [`sealed_memfd`]: the file at `fd` read whole from its start (the
/// zygotes of one pool may share one), taken and closed. Call it once per descriptor.
pub fn read_memfd(fd: i32) -> std::io::Result<Vec<u8>> {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::FileExt;
    // Refused before it is taken: a descriptor that is not open is not this process's to close.
    // SAFETY: fcntl F_GETFD only reads the descriptor's flags.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the master put the memfd at this descriptor for the zygote alone, and it is
    // open (checked above); it is taken (and closed) here once.
    let file = unsafe { std::fs::File::from_raw_fd(fd) };
    let len = usize::try_from(file.metadata()?.len()).unwrap_or(usize::MAX);
    let mut bytes = vec![0; len];
    file.read_exact_at(&mut bytes, 0)?;
    Ok(bytes)
}

/// Appends `value` to `out` as a JSON string literal, quotes included: `"` and `\\`
/// escaped, control characters as `\n`, `\r`, `\t` or `\u00XX`, the rest as is (JSON
/// text is UTF-8).
pub fn push_json_string(out: &mut String, value: &str) {
    use std::fmt::Write as _;
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Appends `value` to `out` for a text log line: each control character (C0, DEL) as
/// `\xHH`, as nginx's access log escapes them, the rest as is. What a client sends (a URI
/// with `%0A` decoded, a Basic-auth user, a header) can then never end the line and start
/// one of its own choosing, nor move a terminal's cursor.
pub fn push_log_text(out: &mut String, value: &str) {
    use std::fmt::Write as _;
    for c in value.chars() {
        if c.is_ascii_control() {
            let _ = write!(out, "\\x{:02X}", c as u32);
        } else {
            out.push(c);
        }
    }
}

/// `value` as [`push_log_text`] writes it; borrowed when it has nothing to escape.
pub fn log_text(value: &str) -> std::borrow::Cow<'_, str> {
    if !value.chars().any(|c| c.is_ascii_control()) {
        return std::borrow::Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    push_log_text(&mut out, value);
    std::borrow::Cow::Owned(out)
}

/// Resident memory in bytes of a process (`None`: this one), from /proc/PID/statm (its
/// second field, in pages).
pub fn resident_memory(pid: Option<nix::unistd::Pid>) -> Option<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/statm"),
        None => "/proc/self/statm".to_owned(),
    };
    let statm = std::fs::read_to_string(path).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).unwrap_or(4096))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_text_escapes_every_control_character_and_keeps_the_rest() {
        assert_eq!(
            log_text("/x\nGET /fake\r\t\x1b[2J\x7f"),
            "/x\\x0AGET /fake\\x0D\\x09\\x1B[2J\\x7F"
        );
        assert!(matches!(
            log_text("/caf\u{e9}?a=b"),
            std::borrow::Cow::Borrowed("/caf\u{e9}?a=b")
        ));
    }

    #[test]
    fn max_requests_zero_means_never_whatever_the_jitter() {
        assert_eq!(max_requests(0, 10, |_| 7), 0);
    }

    #[test]
    fn max_requests_adds_the_draw_bounded_by_jitter() {
        assert_eq!(max_requests(500, 50, |j| j), 550);
        assert_eq!(max_requests(500, 50, |_| 0), 500);
        assert_eq!(max_requests(500, 50, |_| 999), 550, "a bad draw is clamped");
    }

    #[test]
    fn a_json_string_escapes_quotes_backslashes_and_control_characters_only() {
        let mut out = String::from("x=");
        push_json_string(&mut out, "say \"hi\"\\ \t\r\n\u{1}é/");
        assert_eq!(out, r#"x="say \"hi\"\\ \t\r\n\u0001é/""#);
    }
}
