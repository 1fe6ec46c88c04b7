//! `drover-php --bind-direct [SRC DEST]`: writes the copy of libphp whose calls to its own
//! functions and loads of its own globals are direct (`elfbind`), which the master then
//! gives a pool's zygote through `LD_LIBRARY_PATH` (docs/php.md, "PHP's calls bound
//! directly"). Run by drover-php's postinst and by its dpkg trigger when libphp changes.
//!
//! With no more arguments the source is the libphp this process loaded, and the copy goes
//! to [`direct_libphp_dir`] (`/var/lib/drover/libphp`, or `DROVER_LIBPHP_DIR`) under the
//! source's file name, with the source's SONAME as a symlink to it (the name drover-php's
//! `DT_NEEDED` asks for). The symbols kept interposable are those of the objects loaded
//! before libphp in this process, drover-php itself first: what they define wins over
//! libphp's own definition in the loader's search order, so a call bound to libphp's would
//! change what runs.
//!
//! The copy is installed only once [`selftest::compare`] found that, loaded in a child in
//! place of the source, it gives the source's output on the self-test's scripts; otherwise
//! nothing is written, and the exit is 1 with the reason.

use std::ffi::{CStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use drover_proto::zygote::direct_libphp_dir;
use elfbind::mark::{self, Marker};

use crate::selftest;

/// The variable by which the loader finds the copy: the master sets it for a pool's
/// zygote, which removes it before PHP starts (`zygote::forget_loader_path`).
pub const LIBRARY_PATH: &str = "LD_LIBRARY_PATH";

/// The objects loaded in this process, in the loader's search order: this program first
/// (as `/proc/self/exe`), then each library by the path the loader opened.
pub fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn each(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: dl_iterate_phdr passes the Vec given below as `data`, and a valid
        // `info` whose name is NUL-terminated (empty for the program and the vDSO).
        let (objects, name) = unsafe {
            (
                &mut *data.cast::<Vec<OsString>>(),
                CStr::from_ptr((*info).dlpi_name),
            )
        };
        objects.push(std::ffi::OsStr::from_bytes(name.to_bytes()).to_owned());
        0
    }
    let mut names: Vec<OsString> = Vec::new();
    // SAFETY: `each` only reads `info` and pushes to the Vec `data` points to, which
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), (&raw mut names).cast()) };
    let mut objects = vec![PathBuf::from("/proc/self/exe")];
    // The first entry is the program; the vDSO (`linux-vdso.so.1`, or unnamed) has no
    // file, and every library is named by the path the loader opened.
    objects.extend(
        names
            .into_iter()
            .skip(1)
            .map(PathBuf::from)
            .filter(|name| name.is_absolute()),
    );
    objects
}

/// The libphp this process loaded, resolved (`/usr/lib/libphp8.2.so`), if any.
pub fn linked_libphp() -> Option<PathBuf> {
    let libphp = loaded_objects()
        .into_iter()
        .skip(1)
        .find(|path| is_libphp(path))?;
    std::fs::canonicalize(&libphp).ok().or(Some(libphp))
}

fn is_libphp(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with("libphp") && name.contains(".so"))
}

/// `drover-php --bind-direct [SRC DEST]`: 0 when the copy is written, else 1 with the
/// reason on stderr.
pub fn run(args: &[OsString]) -> u8 {
    let (source, dest) = match args {
        [] => match linked_libphp() {
            Some(source) => {
                let name = source.file_name().unwrap_or_default().to_owned();
                let dir = match direct_libphp_dir() {
                    Ok(dir) => dir,
                    Err(why) => {
                        eprintln!("drover-php: --bind-direct: {why}");
                        return 1;
                    }
                };
                let dir = dir.as_path();
                // The master uses the copy only from a folder no one else may write.
                let made = std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o755)
                    .create(dir)
                    .and_then(|()| {
                        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
                    });
                if let Err(e) = made {
                    eprintln!("drover-php: --bind-direct: {}: {e}", dir.display());
                    return 1;
                }
                (source, dir.join(name))
            }
            None => {
                eprintln!("drover-php: --bind-direct: this drover-php loaded no libphp");
                return 1;
            }
        },
        [source, dest] => (PathBuf::from(source), PathBuf::from(dest)),
        _ => {
            eprintln!("drover-php: usage: drover-php --bind-direct [SRC DEST]");
            return 1;
        }
    };
    match write(&source, &dest) {
        Ok(summary) => {
            println!(
                "drover-php: {} bound directly into {}: {summary}",
                source.display(),
                dest.display()
            );
            0
        }
        Err(why) => {
            eprintln!("drover-php: --bind-direct {}: {why}", source.display());
            1
        }
    }
}

/// What the loader lets interpose libphp's symbols: the objects before it.
fn interposers() -> Result<elfbind::Keep, String> {
    let objects = loaded_objects();
    let mut keep = elfbind::Keep::new();
    for (i, object) in objects.iter().enumerate() {
        if i > 0 && is_libphp(object) {
            break;
        }
        let data = std::fs::read(object).map_err(|e| format!("{}: {e}", object.display()))?;
        let names = if i == 0 {
            elfbind::interposers(&data)
        } else {
            elfbind::exports(&data)
        };
        keep.extend(names.map_err(|e| format!("{}: {e}", object.display()))?);
    }
    Ok(keep)
}

/// Binds `source` into `dest` (and its SONAME beside it), each written to a temporary
/// file and renamed over the old one, so that a zygote starting meanwhile loads the old
/// copy or the new one, never half of one; the self-test first. Returns the analysis'
/// summary and the self-test's.
fn write(source: &Path, dest: &Path) -> Result<String, String> {
    let data = std::fs::read(source).map_err(|e| e.to_string())?;
    let build_id = mark::build_id(source)
        .map_err(|e| e.to_string())?
        .ok_or("it has no build-id, by which the master would tell a stale copy")?;
    let (mut bound, analysis) = elfbind::bind(&data, &interposers()?).map_err(|e| e.to_string())?;
    let soname = elfbind::soname(&data)
        .map_err(|e| e.to_string())?
        .map(|name| String::from_utf8_lossy(&name).into_owned())
        .unwrap_or_default();
    // Its own build-id: a core dump or debuginfod does not take the rewritten code for
    // the source's. The marker keeps both (the master matches the source's to the libphp
    // drover-php loads, and the copy's to the copy).
    let copy_build_id = mark::own_build_id(&mut bound);
    let marker = Marker {
        source: source.to_owned(),
        build_id,
        copy_build_id,
        soname: soname.clone(),
        summary: analysis.summary(),
    };
    bound.extend(marker.encode().ok_or("its path holds a newline")?);

    let dir = dest.parent().unwrap_or(Path::new("."));
    let name = dest.file_name().ok_or("no file name to write")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    // Nothing is installed unless the copy runs PHP as the source does.
    let needed = if soname.is_empty() {
        name
    } else {
        std::ffi::OsStr::new(&soname)
    };
    let tested = selftest::compare(&bound, needed, dir)
        .map_err(|why| format!("the copy is not installed: {why}"))?;
    let temp = dir.join(format!(
        ".{}.{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(&bound)?;
        file.set_permissions(std::fs::Permissions::from_mode(0o644))?;
        file.sync_all()?;
        std::fs::rename(&temp, dest)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(format!("{}: {e}", dest.display()));
    }
    if !soname.is_empty() && std::ffi::OsStr::new(&soname) != name {
        let link = dir.join(&soname);
        let temp = dir.join(format!(".{soname}.{}", std::process::id()));
        let _ = std::fs::remove_file(&temp);
        std::os::unix::fs::symlink(name, &temp)
            .and_then(|()| std::fs::rename(&temp, &link))
            .map_err(|e| format!("{}: {e}", link.display()))?;
    }
    Ok(format!("{}; {tested}", analysis.summary()))
}
