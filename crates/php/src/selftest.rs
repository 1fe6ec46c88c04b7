//! `drover-php --bind-direct`'s self-test: a bound copy of libphp is installed only once
//! it has run PHP scripts that exercise the engine, OPcache and the common extensions
//! (`crates/php/selftest/`, built into the binary) with the same output, byte for byte, as
//! the libphp drover-php loads without it (Debian's).
//!
//! [`compare`] runs this program twice as a child ([`SELFTEST_ARG`], [`child`]): once
//! with the copy first in `LD_LIBRARY_PATH`, under the name drover-php's `DT_NEEDED` asks
//! for, and once without. Each child names the libphp it loaded, then runs every script
//! twice in one process (the second time from OPcache's shared memory) as a GET request
//! with no client, headers and body on its stdout. The copy passes when its child loaded
//! it (not Debian's), exited 0 within 120 seconds, and wrote what the other child wrote.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The hidden first argument that makes `drover-php` the self-test's child:
/// `drover-php --bind-direct-selftest DIR` runs DIR's scripts (see [`child`]).
pub const SELFTEST_ARG: &str = "--bind-direct-selftest";

/// The scripts, by file name; `.php` ones are run, in this order, the others included.
pub const SCRIPTS: &[(&str, &str)] = &[
    ("engine.php", include_str!("../selftest/engine.php")),
    ("extensions.php", include_str!("../selftest/extensions.php")),
    ("opcache.php", include_str!("../selftest/opcache.php")),
    (
        "opcache-lib.inc",
        include_str!("../selftest/opcache-lib.inc"),
    ),
];

/// How many times a child runs each script.
const PASSES: usize = 2;

/// The longest a child may take (both run a few hundred milliseconds here).
const TIMEOUT: Duration = Duration::from_secs(120);

/// The first line a child writes: this prefix and the path of the libphp it loaded.
const LOADED: &str = "libphp ";

/// PHP's settings in the child, on top of php.ini: errors in the output, where the
/// comparison sees them.
const INI: &str = "display_errors=1\nhtml_errors=0\nlog_errors=0\nerror_reporting=-1\n\
                   opcache.file_update_protection=0\n";

/// Runs the self-test on `copy` (the bound library's bytes), which drover-php finds under
/// `needed` (its `DT_NEEDED` name, the source's SONAME), in a scratch folder made inside
/// `work` and removed after. Ok: one line saying what matched; Err: why the copy is not
/// to be installed.
pub fn compare(copy: &[u8], needed: &OsStr, work: &Path) -> Result<String, String> {
    let scratch = Scratch::new(work)?;
    let lib = scratch.0.join("lib");
    let scripts = scratch.0.join("scripts");
    for dir in [&lib, &scripts] {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let put = |path: PathBuf, bytes: &[u8], mode: u32| {
        std::fs::write(&path, bytes)
            .and_then(|()| std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)))
            .map_err(|e| format!("{}: {e}", path.display()))
    };
    put(lib.join(needed), copy, 0o644)?;
    for (name, text) in SCRIPTS {
        put(scripts.join(name), text.as_bytes(), 0o644)?;
    }
    let reference = run_child(&scripts, None)?;
    let bound = run_child(&scripts, Some(&lib))?;
    let (ref_lib, ref_out) = reference
        .split_once('\n')
        .and_then(|(first, rest)| Some((first.strip_prefix(LOADED)?, rest)))
        .ok_or_else(|| format!("the child on the installed libphp said {reference:?}"))?;
    let (bound_lib, bound_out) = bound
        .split_once('\n')
        .and_then(|(first, rest)| Some((first.strip_prefix(LOADED)?, rest)))
        .ok_or_else(|| format!("the child on the copy said {bound:?}"))?;
    let canonical = |path: &Path| std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    if canonical(Path::new(bound_lib)) != canonical(&lib.join(needed)) {
        return Err(format!(
            "the child given the copy as {} loaded {bound_lib} instead",
            needed.to_string_lossy()
        ));
    }
    if let Some(why) = first_difference(ref_out, bound_out) {
        return Err(format!("the copy's output differs from {ref_lib}'s: {why}"));
    }
    Ok(format!(
        "self-test passed ({} scripts run {PASSES} times, {} lines the same as {ref_lib}'s)",
        SCRIPTS
            .iter()
            .filter(|(name, _)| name.ends_with(".php"))
            .count(),
        ref_out.lines().count()
    ))
}

/// Where `bound`'s output first differs from `reference`'s: the script and the lines.
fn first_difference(reference: &str, bound: &str) -> Option<String> {
    let mut script = "";
    let mut theirs = bound.lines();
    for (n, ours) in reference.lines().enumerate() {
        if let Some(name) = ours.strip_prefix("== ") {
            script = name;
        }
        match theirs.next() {
            Some(line) if line == ours => continue,
            Some(line) => {
                return Some(format!(
                    "{script}, line {}: expected {ours:?}, got {line:?}",
                    n + 1
                ));
            }
            None => return Some(format!("{script}, line {}: its output ends there", n + 1)),
        }
    }
    theirs
        .next()
        .map(|line| format!("it wrote more, from {line:?}"))
}

/// Runs this program as the self-test's child on `scripts`, with `lib` as its
/// `LD_LIBRARY_PATH` (none when `None`): its stdout, when it exited 0 in time.
fn run_child(scripts: &Path, lib: Option<&Path>) -> Result<String, String> {
    let which = if lib.is_some() {
        "the copy"
    } else {
        "the installed libphp"
    };
    let exe = std::env::current_exe().map_err(|e| format!("this program's path: {e}"))?;
    let mut command = Command::new(&exe);
    command
        .arg(SELFTEST_ARG)
        .arg(scripts)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(lib) = lib {
        command.env("LD_LIBRARY_PATH", lib);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "PHP on {which} did not finish the self-test within {}s",
                    TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("waiting for the self-test's child: {e}")),
        }
    };
    let out = String::from_utf8_lossy(&stdout.join().unwrap_or_default()).into_owned();
    let err = String::from_utf8_lossy(&stderr.join().unwrap_or_default()).into_owned();
    if status.success() {
        return Ok(out);
    }
    let how = match (status.code(), status.signal()) {
        (_, Some(signal)) => format!("died of signal {signal}"),
        (Some(code), None) => format!("exited {code}"),
        (None, None) => "ended".to_owned(),
    };
    let last = out
        .lines()
        .rev()
        .find(|line| line.starts_with("== "))
        .unwrap_or("before the first script");
    let said = err.lines().last().unwrap_or_default();
    Err(format!(
        "PHP on {which} {how} in the self-test ({}){}",
        last.trim_start_matches("== "),
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    ))
}

/// The self-test's folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(work: &Path) -> Result<Scratch, String> {
        let dir = work.join(format!(".selftest.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `drover-php --bind-direct-selftest DIR`: the child. Names the libphp it loaded, starts
/// PHP, then runs DIR's scripts ([`SCRIPTS`]) twice, each after a `== pass N
/// NAME` line and followed by a `== status S` line. Exits 0 once all ran (whatever they
/// printed), 1 when PHP does not start.
#[cfg(not(no_php))]
pub fn child(args: &[std::ffi::OsString]) -> u8 {
    use std::ffi::CString;
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;

    let [dir] = args else {
        eprintln!("drover-php: usage: drover-php {SELFTEST_ARG} DIR");
        return 1;
    };
    let libphp = crate::direct::linked_libphp().unwrap_or_default();
    println!("{LOADED}{}", libphp.display());
    let Ok(ini) = CString::new(INI) else {
        return 1;
    };
    // SAFETY: NUL-terminated strings that outlive the call (PHP copies them); PHP is not
    // started yet.
    if unsafe { crate::ffi::drover_php_startup(std::ptr::null(), ini.as_ptr()) } != 0 {
        eprintln!("drover-php: PHP failed to start");
        return 1;
    }
    for pass in 1..=PASSES {
        for (name, _) in SCRIPTS.iter().filter(|(name, _)| name.ends_with(".php")) {
            let path = Path::new(dir).join(name);
            let Ok(file) = CString::new(path.as_os_str().as_bytes()) else {
                return 1;
            };
            println!("== pass {pass} {name}");
            let _ = std::io::stdout().flush();
            let status = crate::request::run_to_stdout(&file);
            println!("\n== status {status}");
        }
    }
    let _ = std::io::stdout().flush();
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_names_the_script_and_both_lines() {
        let reference = "== pass 1 a.php\nx\ny\n== pass 1 b.php\nz\n";
        assert_eq!(first_difference(reference, reference), None);
        assert_eq!(
            first_difference(reference, "== pass 1 a.php\nx\ny\n== pass 1 b.php\nZ\n"),
            Some("pass 1 b.php, line 5: expected \"z\", got \"Z\"".into())
        );
        assert_eq!(
            first_difference(reference, "== pass 1 a.php\nx\n"),
            Some("pass 1 a.php, line 3: its output ends there".into())
        );
        assert!(first_difference(reference, &format!("{reference}more\n")).is_some());
    }
}
