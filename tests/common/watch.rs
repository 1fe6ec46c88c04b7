//! [`FolderWatch`]: which entries were created, moved or removed in a folder, seen by
//! inotify, so that a file that appears and goes again before the test looks is still seen.
//! (A read-only folder would prove nothing when the tests run as root, as they do in CI.)

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Watches one folder (not its subfolders) from [`FolderWatch::new`] on.
pub struct FolderWatch {
    inotify: File,
}

impl FolderWatch {
    pub fn new(folder: &Path) -> FolderWatch {
        // SAFETY: no pointer arguments; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1: {}", io::Error::last_os_error());
        // SAFETY: inotify_init1 returned a new descriptor that nothing else owns.
        let inotify = unsafe { File::from_raw_fd(fd) };
        let path = CString::new(folder.as_os_str().as_bytes()).expect("a path without NUL");
        let mask = libc::IN_CREATE | libc::IN_DELETE | libc::IN_MOVED_FROM | libc::IN_MOVED_TO;
        // SAFETY: a valid inotify descriptor and a NUL-terminated path that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) };
        assert!(
            wd >= 0,
            "inotify_add_watch {}: {}",
            folder.display(),
            io::Error::last_os_error()
        );
        FolderWatch { inotify }
    }

    /// The entries created, removed or moved since the last call (or since
    /// [`FolderWatch::new`]), as "created NAME" and the like, in the kernel's order.
    pub fn changes(&mut self) -> Vec<String> {
        const HEADER: usize = size_of::<libc::inotify_event>();
        let mut names = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match self.inotify.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return names,
                Err(e) => panic!("reading inotify events: {e}"),
            };
            let mut at = 0;
            while at + HEADER <= n {
                // `struct inotify_event`: wd, mask, cookie, len (u32 each), then the name,
                // padded with NULs to len bytes.
                let field = |i: usize| {
                    u32::from_ne_bytes(buf[at + 4 * i..at + 4 * i + 4].try_into().unwrap())
                };
                let (mask, len) = (field(1), field(3) as usize);
                let name = &buf[at + HEADER..at + HEADER + len];
                let name = name.split(|&b| b == 0).next().unwrap_or_default();
                let what = match mask & !libc::IN_ISDIR {
                    libc::IN_CREATE => "created",
                    libc::IN_DELETE => "removed",
                    libc::IN_MOVED_FROM => "moved away",
                    libc::IN_MOVED_TO => "moved in",
                    _ => "changed",
                };
                names.push(format!(
                    "{what} {}",
                    OsStr::from_bytes(name).to_string_lossy()
                ));
                at += HEADER + len;
            }
        }
    }
}
