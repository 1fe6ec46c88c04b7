//! What makes a log file safe to append to, in a folder users other than root can write:
//! the master's open (drover's `logging`) and the loader's check (`drover -t`, before it)
//! say the same, from here.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Why the file at `path`, in a folder users other than root can write, is not one to
/// append to: not a regular file (a FIFO, a device), or one with a second hard link (it
/// may be another file's second name). `None` for a plain file. The master's open and
/// `drover -t` before it say the same.
pub fn not_plain(path: &Path, meta: &std::fs::Metadata) -> Option<String> {
    if !meta.file_type().is_file() {
        return Some(format!(
            "{} is not a regular file, in a folder that users other than root can write",
            path.display()
        ));
    }
    (meta.nlink() > 1).then(|| {
        format!(
            "{} has {} hard links, in a folder that users other than root can write: \
             it may be another file's second name",
            path.display(),
            meta.nlink()
        )
    })
}

/// Why a log path that is a link in a folder others can write is refused (by the master's
/// open, and by `drover -t` before it).
pub fn link_refused(path: &Path) -> String {
    format!(
        "{} is a symbolic link in a folder that users other than root can write: drover \
         follows no link there (name the file itself)",
        path.display()
    )
}

/// Whether only root, or drover's own user, can add or replace names in a folder: it is
/// theirs and neither its group nor others may write it.
pub fn only_root_writes(folder: &std::fs::Metadata) -> bool {
    let owner = folder.uid();
    (owner == 0 || owner == nix::unistd::Uid::effective().as_raw()) && folder.mode() & 0o022 == 0
}
