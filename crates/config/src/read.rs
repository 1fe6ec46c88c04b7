//! Reading one configuration file without trusting what its path names. Pool files are
//! picked by a glob in a folder an operator (or a package, or a deploy script) fills, so the
//! path may name a FIFO (opening it would block the master), `/dev/zero` (reading it would
//! never end), a directory, a socket or a symlink loop. Only a regular file is read (a
//! symlink to one is fine: operators symlink pool files), opened without blocking and read
//! up to [`MAX_FILE_BYTES`]; anything else is an error that says what the path is.

use std::fmt;
use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// The largest configuration file drover reads. A real pool file is a few KiB; the bound
/// keeps a mistaken (or hostile) file from filling the master's memory.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What a path names when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Directory,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    /// A type Linux adds later; still not something to read.
    Unknown,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Directory => "a directory",
            Kind::Fifo => "a FIFO (named pipe)",
            Kind::Socket => "a socket",
            Kind::CharDevice => "a character device",
            Kind::BlockDevice => "a block device",
            Kind::Unknown => "not a regular file",
        })
    }
}

/// Why a configuration file was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "is {0}, not a regular file: a configuration file must be a regular file (a symlink to one is fine)"
    )]
    NotRegular(Kind),
    #[error(
        "is larger than {MAX_FILE_BYTES} bytes (1 MiB), the most a configuration file may hold"
    )]
    TooLarge,
    #[error("is a symlink loop (too many levels of symbolic links)")]
    Loop,
    #[error("is not UTF-8 text")]
    NotUtf8,
    #[error("cannot read: {0}")]
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        match e.raw_os_error() {
            Some(libc::ELOOP) => ReadError::Loop,
            _ => ReadError::Io(e),
        }
    }
}

/// The kind of a file from its `st_mode`; `None` for a regular file.
pub fn kind(mode: u32) -> Option<Kind> {
    Some(match mode & libc::S_IFMT {
        libc::S_IFREG => return None,
        libc::S_IFDIR => Kind::Directory,
        libc::S_IFIFO => Kind::Fifo,
        libc::S_IFSOCK => Kind::Socket,
        libc::S_IFCHR => Kind::CharDevice,
        libc::S_IFBLK => Kind::BlockDevice,
        _ => Kind::Unknown,
    })
}

/// Refuses what is not a regular file of at most [`MAX_FILE_BYTES`] (as its size says).
pub fn check(mode: u32, size: u64) -> Result<(), ReadError> {
    match kind(mode) {
        Some(kind) => Err(ReadError::NotRegular(kind)),
        None if size > MAX_FILE_BYTES => Err(ReadError::TooLarge),
        None => Ok(()),
    }
}

/// The text of the regular file at `path`, never blocking and never reading more than
/// [`MAX_FILE_BYTES`].
pub fn read_text(path: &Path) -> Result<String, ReadError> {
    // stat first, so that a FIFO or a device is never opened at all (opening some devices
    // acts on them).
    let meta = std::fs::metadata(path)?;
    check(meta.mode(), meta.size())?;
    // The path may be swapped between the stat and the open: O_NONBLOCK keeps a FIFO put
    // there from blocking the open, and the fstat below refuses it.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    check(meta.mode(), meta.size())?;
    // The size may grow while we read, and files in /proc say 0: the bound is on the read.
    let mut bytes = Vec::with_capacity(meta.size() as usize);
    file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge);
    }
    String::from_utf8(bytes).map_err(|_| ReadError::NotUtf8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_pass() {
        assert!(check(libc::S_IFREG | 0o644, 10).is_ok());
        for (mode, kind) in [
            (libc::S_IFDIR, Kind::Directory),
            (libc::S_IFIFO, Kind::Fifo),
            (libc::S_IFSOCK, Kind::Socket),
            (libc::S_IFCHR, Kind::CharDevice),
            (libc::S_IFBLK, Kind::BlockDevice),
        ] {
            match check(mode | 0o644, 0) {
                Err(ReadError::NotRegular(k)) => assert_eq!(k, kind),
                other => panic!("mode {mode:o}: {other:?}"),
            }
        }
    }

    #[test]
    fn size_is_bounded() {
        assert!(check(libc::S_IFREG, MAX_FILE_BYTES).is_ok());
        assert!(matches!(
            check(libc::S_IFREG, MAX_FILE_BYTES + 1),
            Err(ReadError::TooLarge)
        ));
    }

    #[test]
    fn messages_say_what_the_path_is() {
        let e = ReadError::NotRegular(Kind::Fifo).to_string();
        assert!(
            e.starts_with("is a FIFO (named pipe), not a regular file"),
            "{e}"
        );
        let e = ReadError::from(io::Error::from_raw_os_error(libc::ELOOP)).to_string();
        assert!(e.contains("symlink loop"), "{e}");
    }

    #[test]
    fn odd_files_on_disk_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        assert!(matches!(
            read_text(&fifo),
            Err(ReadError::NotRegular(Kind::Fifo))
        ));
        let zero = dir.path().join("zero.toml");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        assert!(matches!(
            read_text(&zero),
            Err(ReadError::NotRegular(Kind::CharDevice))
        ));
        let looped = dir.path().join("loop.toml");
        std::os::unix::fs::symlink(&looped, &looped).unwrap();
        assert!(matches!(read_text(&looped), Err(ReadError::Loop)));
        let big = dir.path().join("big.toml");
        std::fs::write(&big, vec![b'#'; MAX_FILE_BYTES as usize + 1]).unwrap();
        assert!(matches!(read_text(&big), Err(ReadError::TooLarge)));
        let good = dir.path().join("good.toml");
        std::fs::write(&good, "a = 1\n").unwrap();
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert_eq!(read_text(&link).unwrap(), "a = 1\n");
    }
}
