//! Writing an import's files into the `-o` folder, and nowhere else.
//!
//! An import is often run as root with `-o` a folder someone else can write to, so no
//! link there is followed: `pools.d` is opened with `O_NOFOLLOW`, a new file is created
//! with `O_CREAT | O_EXCL` (which fails on anything already there, a symbolic link
//! included), and `--force` writes a new file beside the old one and renames it over
//! the old one, which replaces a link itself, never the file it points to. The `-o`
//! folder itself is the operator's: it is taken as named. Each path is checked to be
//! `drover.toml` or `pools.d/NAME.toml` with a plain NAME before anything is written.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, renameat};
use nix::sys::stat::{Mode, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use super::Output;

/// The mode of the written files (before the umask): the master, as root, reads them,
/// and nobody else may change what it runs, whatever the umask.
const FILE_MODE: u32 = 0o644;
const FOLDER_MODE: u32 = 0o755;

/// Refuses to replace any existing file unless `--force`, before writing any.
pub fn write_all(output: &Output, files: &[(PathBuf, String)]) -> Result<(), String> {
    let targets = files
        .iter()
        .map(|(path, _)| target(path))
        .collect::<Result<Vec<_>, _>>()?;
    std::fs::create_dir_all(&output.dir)
        .map_err(|e| format!("cannot create {}: {e}", output.dir.display()))?;
    let flags = OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    let top = openat(nix::fcntl::AT_FDCWD, &output.dir, flags, Mode::empty())
        .map_err(|e| format!("cannot open {}: {e}", output.dir.display()))?;
    let pools = if targets.iter().any(|(folder, _)| folder.is_some()) {
        Some(pools_folder(&top, &output.dir)?)
    } else {
        None
    };
    let folder = |sub: &Option<&str>| match sub {
        Some(_) => pools.as_ref().unwrap_or(&top),
        None => &top,
    };
    let existing: Vec<String> = files
        .iter()
        .zip(&targets)
        .filter(|(_, (sub, name))| {
            fstatat(folder(sub), *name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
        })
        .map(|((path, _), _)| output.dir.join(path).display().to_string())
        .collect();
    if !existing.is_empty() && !output.force {
        return Err(format!(
            "{} already exist{}; nothing written (--force replaces them)",
            existing.join(", "),
            if existing.len() == 1 { "s" } else { "" }
        ));
    }
    for ((path, text), (sub, name)) in files.iter().zip(&targets) {
        let shown = output.dir.join(path);
        let at = folder(sub);
        let result = if output.force {
            replace(at, name, text)
        } else {
            create(at, name, text)
        };
        result.map_err(|e| format!("cannot write {}: {e}", shown.display()))?;
    }
    Ok(())
}

/// `path` as (`Some("pools.d")` or `None`, its file name), if it is one an import writes.
fn target(path: &Path) -> Result<(Option<&str>, &str), String> {
    // The path as written, split by hand: `Path::components` would drop a `.` in it.
    let parts: Vec<&str> = path
        .to_str()
        .map(|p| p.split('/').collect())
        .unwrap_or_default();
    let plain = |name: &str| {
        name.strip_suffix(".toml")
            .is_some_and(|stem| super::name::refusal(stem).is_none())
    };
    match parts.as_slice() {
        [name] if *name == "drover.toml" => Ok((None, name)),
        [folder, name] if *folder == "pools.d" && plain(name) => Ok((Some(folder), name)),
        _ => Err(format!(
            "refused to write {}: an import writes drover.toml and pools.d/NAME.toml only; \
             nothing written",
            path.display()
        )),
    }
}

/// `pools.d` in the output folder, made if missing, refused if it is a link.
fn pools_folder(top: &OwnedFd, dir: &Path) -> Result<OwnedFd, String> {
    let shown = dir.join("pools.d");
    match mkdirat(top, "pools.d", Mode::from_bits_truncate(FOLDER_MODE)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(format!("cannot create {}: {e}", shown.display())),
    }
    let flags = OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_RDONLY | OFlag::O_CLOEXEC;
    openat(top, "pools.d", flags, Mode::empty()).map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => format!(
            "{} is a symbolic link or not a folder: an import follows no link in the output \
             folder; nothing written",
            shown.display()
        ),
        e => format!("cannot open {}: {e}", shown.display()),
    })
}

/// A new file `name`, refused if anything (a link included) is there.
fn create(folder: &OwnedFd, name: &str, text: &str) -> nix::Result<()> {
    let flags =
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let fd = openat(folder, name, flags, Mode::from_bits_truncate(FILE_MODE))?;
    std::fs::File::from(fd)
        .write_all(text.as_bytes())
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// `name` replaced by a new file with `text`: written beside it, then renamed over it.
fn replace(folder: &OwnedFd, name: &str, text: &str) -> nix::Result<()> {
    let temporary = format!(".{name}.drover-import-{}", std::process::id());
    let written = create(folder, &temporary, text)
        .and_then(|()| renameat(folder, temporary.as_str(), folder, name));
    if written.is_err() {
        let _ = unlinkat(folder, temporary.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(dir: &Path, force: bool) -> Output {
        Output {
            dir: dir.to_path_buf(),
            force,
        }
    }

    fn files(pool: &str) -> Vec<(PathBuf, String)> {
        vec![
            (PathBuf::from("drover.toml"), "include = []\n".into()),
            (
                Path::new("pools.d").join(format!("{pool}.toml")),
                "x\n".into(),
            ),
        ]
    }

    #[test]
    fn only_drover_toml_and_plain_pool_files_are_written() {
        let dir = tempfile::tempdir().unwrap();
        for pool in ["../../x", "/abs/x", "./a", ".hidden", "a/b"] {
            let error = write_all(&output(dir.path(), true), &files(pool)).unwrap_err();
            assert!(error.contains("refused to write"), "{pool}: {error}");
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        write_all(&output(dir.path(), false), &files("www")).unwrap();
        assert!(dir.path().join("pools.d/www.toml").is_file());
    }

    #[test]
    fn links_in_the_output_folder_are_never_followed() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "root's\n").unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(out.join("pools.d")).unwrap();
        symlink(&victim, out.join("pools.d/www.toml")).unwrap();
        // Without --force the link is an existing file: refused, nothing written.
        let error = write_all(&output(&out, false), &files("www")).unwrap_err();
        assert!(error.contains("already exist"), "{error}");
        assert!(!out.join("drover.toml").exists());
        // With --force the link itself is replaced, and what it pointed to is untouched.
        write_all(&output(&out, true), &files("www")).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "root's\n");
        let written = out.join("pools.d/www.toml");
        assert!(!written.symlink_metadata().unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&written).unwrap(), "x\n");
        let mode = written.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o022, 0, "{mode:o}");
        // pools.d itself a link to another folder: refused before anything is written.
        let elsewhere = dir.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let out = dir.path().join("out2");
        std::fs::create_dir(&out).unwrap();
        symlink(&elsewhere, out.join("pools.d")).unwrap();
        let error = write_all(&output(&out, true), &files("www")).unwrap_err();
        assert!(error.contains("symbolic link"), "{error}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
        assert!(!out.join("drover.toml").exists());
    }
}
