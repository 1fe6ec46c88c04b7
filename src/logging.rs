//! The error log: stderr or a file that USR1 reopens (for logrotate).
//!
//! Every line goes through `tracing`; [`init`] installs a subscriber whose writer is a
//! [`LogFile`] handle and whose level and layout (`log_format`: text or one JSON object
//! per line) can be changed, and returns them as an [`ErrorLog`]. The handle is shared, so
//! the master can reopen the file, point the log at another destination, change its level
//! or its layout (a reload) without touching the subscriber. Worker output that a pool
//! passes through undecorated skips `tracing` and goes to [`LogFile::write_line`].
//!
//! Every log file drover writes (this one, the slowlogs, the access logs) is opened by the
//! master with [`open_append`]: created with mode 0600, as php-fpm creates its own, so that
//! one pool's user cannot read what another pool's scripts logged; a file that exists keeps
//! its mode (and owner), as under php-fpm, so that an operator's `chmod` or logrotate's
//! `create 0640 root adm` holds.
//!
//! The master opens them as root, often in a folder a pool's user can write (an app's
//! `storage/logs`), so [`open_append`] follows no link that such a user could have put
//! there: see its doc.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::prelude::*;
use tracing_subscriber::{Registry, reload};

use crate::config::logfile::{link_refused, not_plain, only_root_writes};

use crate::config::{LogFormat, LogLevel, LogTarget};

pub mod access;
mod json;

/// A handle to the error log's current destination.
#[derive(Clone)]
pub struct LogFile {
    inner: Arc<Mutex<Destination>>,
}

enum Destination {
    Stderr,
    File { path: PathBuf, file: File },
}

impl Destination {
    fn open(target: &LogTarget) -> io::Result<Destination> {
        Ok(match target {
            LogTarget::Stderr => Destination::Stderr,
            LogTarget::File(path) => Destination::File {
                path: path.clone(),
                file: open_append(path)?,
            },
        })
    }
}

impl LogFile {
    pub fn open(target: &LogTarget) -> io::Result<LogFile> {
        Ok(LogFile {
            inner: Arc::new(Mutex::new(Destination::open(target)?)),
        })
    }

    /// Points the log at `target` from the next line on. On failure the old one stays.
    pub fn retarget(&self, target: &LogTarget) -> io::Result<()> {
        let fresh = Destination::open(target)?;
        *self.lock() = fresh;
        Ok(())
    }

    /// Reopens the file by path (after logrotate moved it). On failure the old file stays.
    pub fn reopen(&self) -> io::Result<()> {
        let mut destination = self.lock();
        if let Destination::File { path, file } = &mut *destination {
            *file = open_append(path)?;
        }
        Ok(())
    }

    /// Writes `line` and a newline in one write(2), so that it stays whole between the
    /// master's own lines and in a file other processes append to.
    pub fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line);
        bytes.push(b'\n');
        LogWriter(self.lock()).write_all(&bytes)
    }

    fn lock(&self) -> MutexGuard<'_, Destination> {
        // A panic while holding the lock leaves a usable File behind; keep logging.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Opens a log file for appending (O_APPEND: each write lands whole at its end, whoever
/// else appends), creating it with mode 0600 (php-fpm's `S_IRUSR | S_IWUSR`, under the
/// umask); an existing file keeps its mode. Close-on-exec, as std opens every file.
///
/// Root opens these on a pool's behalf, so nothing at the path may lead it to a file the
/// pool's user chose. The file's folder is opened first, and the name looked up in that
/// folder's descriptor, so that what is checked is what is opened:
/// - in a folder only root (drover's user) can write (`/var/log/drover`, `/dev`,
///   `/proc/self/fd`), the name is trusted: a link there was put by root, so it is
///   followed, and any file it names is opened (`/dev/stderr`, a container's pipe);
/// - in any other folder the name must be a regular file with no other hard link, opened
///   without following a link (O_NOFOLLOW): a link, a FIFO, a device or a second name of
///   another file is refused, with the reason, and nothing is written through it.
///
/// The folders above the file's own are followed as they are: keep them writable by root
/// only (docs/logs.md, "Log files").
pub fn open_append(path: &Path) -> io::Result<File> {
    let refuse = |why: String| io::Error::new(io::ErrorKind::PermissionDenied, why);
    let (Some(name), folder) = (path.file_name(), path.parent()) else {
        return Err(refuse(format!("{} names no file", path.display())));
    };
    let folder = match folder {
        Some(f) if !f.as_os_str().is_empty() => f,
        _ => Path::new("."),
    };
    let dir = File::open(folder)?;
    let trusted = only_root_writes(&dir.metadata()?);
    let mut flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC;
    flags |= libc::O_NOCTTY;
    if !trusted {
        // A FIFO a pool's user made must not block the master's open.
        flags |= libc::O_NOFOLLOW | libc::O_NONBLOCK;
    }
    let file = openat(&dir, name, flags, 0o600).map_err(|err| {
        if err.raw_os_error() == Some(libc::ELOOP) {
            refuse(link_refused(path))
        } else {
            err
        }
    })?;
    if trusted {
        return Ok(file);
    }
    match not_plain(path, &file.metadata()?) {
        Some(why) => Err(refuse(why)),
        None => Ok(file),
    }
}

/// `openat(2)` of `name` in `dir` with `flags`, creating it with `mode`.
fn openat(dir: &File, name: &std::ffi::OsStr, flags: i32, mode: libc::mode_t) -> io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a log path"))?;
    // SAFETY: a valid directory descriptor and a NUL-terminated name that outlives the call.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// One log event's writer: holds the lock for the event, so lines never interleave.
pub struct LogWriter<'a>(MutexGuard<'a, Destination>);

impl Write for LogWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut *self.0 {
            Destination::Stderr => io::stderr().write(buf),
            Destination::File { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut *self.0 {
            Destination::Stderr => io::stderr().flush(),
            Destination::File { file, .. } => file.flush(),
        }
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = LogWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter(self.lock())
    }
}

/// The master's error log: where it goes ([`LogFile`]), the level and the layout it keeps.
pub struct ErrorLog {
    pub file: LogFile,
    level: reload::Handle<LevelFilter, Registry>,
    /// Read by the event formatter at each line: true writes JSON.
    json: Arc<AtomicBool>,
}

impl ErrorLog {
    /// Changes the level from the next event on.
    pub fn set_level(&self, level: LogLevel) -> Result<(), reload::Error> {
        self.level.reload(filter(level))
    }

    /// Changes the layout from the next line on.
    pub fn set_format(&self, format: LogFormat) {
        self.json
            .store(format == LogFormat::Json, Ordering::Relaxed);
    }
}

fn filter(level: LogLevel) -> LevelFilter {
    match level {
        LogLevel::Error => LevelFilter::ERROR,
        LogLevel::Warn => LevelFilter::WARN,
        LogLevel::Info => LevelFilter::INFO,
        LogLevel::Debug => LevelFilter::DEBUG,
        LogLevel::Trace => LevelFilter::TRACE,
    }
}

/// Installs the global subscriber. Called once, by the master, after the configuration is
/// valid (configuration errors go to stderr before this).
pub fn init(target: &LogTarget, level: LogLevel, format: LogFormat) -> io::Result<ErrorLog> {
    let file = LogFile::open(target)?;
    let (level, handle) = reload::Layer::new(filter(level));
    let json = Arc::new(AtomicBool::new(format == LogFormat::Json));
    let text = tracing_subscriber::fmt::format()
        .with_ansi(false)
        .with_target(false);
    let format = tracing_subscriber::fmt::layer()
        .with_writer(file.clone())
        .with_ansi(false)
        .event_format(json::Layout::new(text, json.clone()));
    let _ = tracing_subscriber::registry()
        .with(level)
        .with(format)
        .try_init();
    Ok(ErrorLog {
        file,
        level: handle,
        json,
    })
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_log_file_is_0600_and_an_existing_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh.log");
        open_append(&fresh).unwrap();
        assert_eq!(mode(&fresh), 0o600);
        let kept = dir.path().join("kept.log");
        std::fs::write(&kept, "before\n").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        open_append(&kept).unwrap().write_all(b"after\n").unwrap();
        assert_eq!(mode(&kept), 0o640);
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "before\nafter\n");
    }

    /// A folder a pool's user could write: world-writable, as the tests run as root.
    fn open_folder() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        dir
    }

    #[test]
    fn in_a_folder_others_can_write_a_link_is_refused_and_its_target_untouched() {
        let dir = open_folder();
        let target = dir.path().join("root-only");
        std::fs::write(&target, "secret\n").unwrap();
        let link = dir.path().join("access.log");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = open_append(&link).unwrap_err();
        assert!(err.to_string().contains("is a symbolic link"), "{err}");
        // A dangling link is not created through either.
        let dangling = dir.path().join("slow.log");
        std::os::unix::fs::symlink(dir.path().join("made"), &dangling).unwrap();
        assert!(open_append(&dangling).is_err());
        assert!(!dir.path().join("made").exists(), "created through a link");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret\n");
    }

    #[test]
    fn in_a_folder_others_can_write_a_hard_link_or_a_fifo_is_refused() {
        let dir = open_folder();
        let target = dir.path().join("root-only");
        std::fs::write(&target, "secret\n").unwrap();
        let second = dir.path().join("access.log");
        std::fs::hard_link(&target, &second).unwrap();
        let err = open_append(&second).unwrap_err();
        assert!(err.to_string().contains("2 hard links"), "{err}");
        let fifo = dir.path().join("fifo.log");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o666)).unwrap();
        // No reader: without O_NONBLOCK this open would block the master for good.
        let err = open_append(&fifo).unwrap_err();
        assert!(err.raw_os_error() == Some(libc::ENXIO), "{err}");
        // A plain file there is appended to as before.
        let plain = dir.path().join("plain.log");
        open_append(&plain).unwrap().write_all(b"line\n").unwrap();
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "line\n");
    }

    #[test]
    fn in_a_folder_only_root_writes_a_link_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("stderr.log");
        std::os::unix::fs::symlink("/dev/null", &link).unwrap();
        open_append(&link).unwrap().write_all(b"gone\n").unwrap();
        open_append(Path::new("/dev/stderr")).unwrap();
    }
}
