//! A pool's access log as the master holds it: the master opens the file (as root, before
//! it execs the pool's zygote, as php-fpm's master opens `access.log` before it forks) and
//! passes it to the zygote at [`drover_proto::zygote::ACCESS_LOG_FD`]; the workers write
//! their lines to that descriptor. So the pool's user needs no right on the file or its
//! folder: php-fpm's usual `/var/log/php-fpm/www.access.log`, in a folder only root may
//! write, works for a pool of `www-data` or `nobody`.
//!
//! Each generation of a pool opens its own ([`AccessLogFile::open`], when the generation is
//! made). USR1 asks [`AccessLogFile::moved`] whether the path still names the open file:
//! when logrotate has renamed or removed it, the pool gets a new generation, which opens a
//! fresh file at the path, while the old generation's workers finish their requests and
//! write their last lines to the renamed file; the socket never closes, so no request is
//! lost, and no line either (keep the renamed file a rotation longer: `delaycompress`).
//! php-fpm does the same with its children (USR1: reopen, then SIGQUIT to every child).

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The open access log of one generation of a pool.
#[derive(Debug)]
pub struct AccessLogFile {
    path: PathBuf,
    file: File,
}

impl AccessLogFile {
    /// Opens (appends to, creates with mode 0600) the pool's `access_log`.
    pub fn open(path: &Path) -> io::Result<AccessLogFile> {
        Ok(AccessLogFile {
            path: path.to_path_buf(),
            file: super::open_append(path)?,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The descriptor every zygote of the generation gets.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Whether the path no longer names the open file: it was renamed or removed (by
    /// logrotate), so that the workers' lines would go where nobody looks.
    pub fn moved(&self) -> bool {
        let Ok(open) = self.file.metadata() else {
            return false;
        };
        match std::fs::metadata(&self.path) {
            Ok(now) => (now.dev(), now.ino()) != (open.dev(), open.ino()),
            Err(err) => err.kind() == io::ErrorKind::NotFound,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renamed_or_removed_file_is_moved_and_one_in_place_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("www.access");
        let log = AccessLogFile::open(&path).unwrap();
        assert!(!log.moved());
        std::fs::rename(&path, dir.path().join("www.access.1")).unwrap();
        assert!(log.moved(), "renamed");
        let log = AccessLogFile::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(log.moved(), "removed");
    }
}
