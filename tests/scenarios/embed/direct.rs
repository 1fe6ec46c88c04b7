//! PHP on a copy of libphp bound directly (`drover-php --bind-direct SRC DEST`): the copy
//! serves a script that works PHP's engine (classes, closures, generators, exceptions,
//! arrays, strings, regular expressions, JSON) with the answer Debian's php8.2 gives, its
//! worker maps the copy, and the master, whose pool names the folder in `[env]`
//! `LD_LIBRARY_PATH`, leaves that pool alone (no "bound directly" line of its own). The
//! zygote drops that `LD_LIBRARY_PATH` once the loader used it: `getenv()`, `$_SERVER`,
//! `$_ENV` and a program the script runs do not see it.
//!
//! The self-test at bind time: a copy made from a libphp whose `PHP_MD5Final` was broken
//! (it returns at once, so md5() prints what the stack held; or it traps, so PHP dies) is
//! not installed, and `--bind-direct` exits 1 saying why.
//!
//! The master's own choice, from a folder the test names (`DROVER_LIBPHP_DIR`): a copy
//! that dies at PHP's start (its `php_module_startup` made to trap after the self-test
//! passed) leaves the pool serving on the linked libphp after one warning; a pool whose
//! `[env]` preloads a library (`LD_PRELOAD`, libc's own) runs the linked libphp and says
//! why; a folder named by a relative path is refused with a warning, and the pool runs the
//! linked libphp.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Embed;
use crate::common::{Drover, Nginx, Site, Stack, TIMEOUT, http, php_runtime};

const SCRIPT: &str = r#"<?php
interface Shape { public function area(): float; }
final class Rect implements Shape {
    public function __construct(private float $w, private float $h) {}
    public function area(): float { return $this->w * $this->h; }
}
function shapes(int $n): Generator { for ($i = 1; $i <= $n; $i++) { yield new Rect($i, $i / 2); } }
$areas = array_map(fn (Shape $s) => $s->area(), iterator_to_array(shapes(200)));
$words = preg_split('/\s+/', str_repeat("lorem ipsum dolor sit amet ", 50), -1, PREG_SPLIT_NO_EMPTY);
$counts = array_count_values($words);
ksort($counts);
try { throw new RuntimeException(sprintf('%05.1f', array_sum($areas))); }
catch (RuntimeException $e) { $caught = $e->getMessage(); }
echo md5(json_encode([$areas, $counts, $caught, strrev(implode(',', array_keys($counts))),
    array_sum(range(1, 10000)), ucwords('bound directly'), serialize(new ArrayObject([1, 2]))])), "\n";
$maps = file_get_contents('/proc/self/maps');
echo strpos($maps, getenv('DIRECT_COPY')) !== false ? "copy" : "not the copy", "\n";
$child = shell_exec('env') ?? '';
echo var_export(getenv('LD_LIBRARY_PATH'), true), ' ',
    isset($_SERVER['LD_LIBRARY_PATH']) ? '$_SERVER' : '-', ' ',
    isset($_ENV['LD_LIBRARY_PATH']) ? '$_ENV' : '-', ' ',
    str_contains($child, 'LD_LIBRARY_PATH') ? 'child' : '-', ' ',
    str_contains($child, 'DIRECT_COPY=') ? 'the child sees the environment' : 'no environment', "\n";
"#;

/// The libphp drover-php loads, as its `--probe` names it.
fn linked_libphp(drover_php: &Path) -> Option<PathBuf> {
    let out = Command::new(drover_php).arg("--probe").output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("PROBE_LIBPHP "))
        .map(PathBuf::from)
}

/// This workspace's drover-php and the libphp it links, or None with the reason the test
/// is skipped printed.
fn drover_php_and_its_libphp() -> Option<(&'static Path, PathBuf)> {
    let Some(drover_php) = php_runtime() else {
        eprintln!("skipped: no drover-php in this workspace");
        return None;
    };
    let Some(libphp) = linked_libphp(drover_php) else {
        eprintln!("skipped: drover-php --probe names no libphp (built without PHP)");
        return None;
    };
    Some((drover_php, libphp))
}

#[test]
fn a_pool_on_a_copy_bound_directly_runs_php_as_debians_php_does() {
    let Some((drover_php, libphp)) = drover_php_and_its_libphp() else {
        return;
    };
    let site = Site::new();
    let folder = site.path().join("libphp");
    let copy = folder.join(libphp.file_name().unwrap());
    let out = Command::new(drover_php)
        .arg("--bind-direct")
        .arg(&libphp)
        .arg(&copy)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && said.contains("calls bound directly")
            && said.contains("self-test passed"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The copy says what it is: drover's marker after its last byte names the source and
    // its build-id, and the copy's own build-id, which its ELF note carries (a core dump
    // or debuginfod does not take the rewritten code for Debian's).
    let marker = elfbind::mark::Marker::read(&std::fs::File::open(&copy).unwrap())
        .unwrap()
        .expect("no drover-elfbind marker at the end of the copy");
    let source_id = elfbind::mark::build_id(&libphp).unwrap();
    assert_eq!(Some(&marker.build_id), source_id.as_ref());
    let copy_id = elfbind::mark::build_id(&copy).unwrap();
    assert!(copy_id.is_some() && copy_id != source_id, "{copy_id:?}");
    assert_eq!(marker.copy_build_id, copy_id);
    if let Ok(out) = Command::new("readelf").arg("-n").arg(&copy).output() {
        let notes = String::from_utf8_lossy(&out.stdout);
        assert!(
            notes.contains(&format!("Build ID: {}", copy_id.as_deref().unwrap())),
            "{notes}"
        );
    }
    assert_eq!(marker.source, libphp);
    assert!(
        marker.summary.contains("calls bound directly"),
        "{marker:?}"
    );
    // The SONAME drover-php asks for leads to the copy.
    assert!(
        std::fs::read_dir(&folder)
            .unwrap()
            .filter_map(Result::ok)
            .any(|entry| entry.file_type().unwrap().is_symlink()),
        "no SONAME link beside {}",
        copy.display()
    );

    site.script("engine.php", SCRIPT);
    let pool = Embed::new("www", 1).env(&format!(
        "LD_LIBRARY_PATH = \"{}\"\nDIRECT_COPY = \"{}\"\n",
        folder.display(),
        copy.display()
    ));
    let stack = Stack::start(site, pool);
    let page = http::get(&stack.url("/engine.php"));
    assert_eq!(
        page.status,
        200,
        "{}\n{}",
        page.body,
        stack.drover.log.text()
    );
    let mut lines = page.body.lines();
    let (digest, mapped) = (lines.next().unwrap_or_default(), lines.next());
    assert_eq!(mapped, Some("copy"), "{}", page.body);
    // The loader path that led to the copy is gone from the app's environment and from
    // the programs it runs, which still inherit the rest of it.
    assert_eq!(
        lines.next(),
        Some("false - - - the child sees the environment"),
        "{}",
        page.body
    );

    // Debian's PHP executable, where there is one, computes the same.
    let cli = Command::new("php8.2")
        .arg(stack.site.docroot.join("engine.php"))
        .env("DIRECT_COPY", &copy)
        .output();
    match cli {
        Ok(out) if out.status.success() => {
            let expected = String::from_utf8_lossy(&out.stdout);
            assert_eq!(
                Some(digest),
                expected.lines().next(),
                "php8.2 says {expected}"
            );
        }
        other => eprintln!("php8.2 not compared: {other:?}"),
    }
    assert!(
        !stack.drover.log.text().contains("bound directly"),
        "a pool whose [env] sets LD_LIBRARY_PATH is left alone:\n{}",
        stack.drover.log.text()
    );
}

/// The offset in the ELF file `lib` of the code of its exported function `symbol`, from
/// `nm -D` (its address) and `readelf -l` (the segment that maps it).
fn code_offset(lib: &Path, symbol: &str) -> Option<u64> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .ok()?;
    let address = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let (address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            (kind == "T" && name == symbol).then(|| hex(address))?
        })?;
    let readelf = Command::new("readelf").arg("-lW").arg(lib).output().ok()?;
    String::from_utf8_lossy(&readelf.stdout)
        .lines()
        .filter(|line| line.trim_start().starts_with("LOAD"))
        .find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (offset, vaddr, filesz) = (hex(fields[1])?, hex(fields[2])?, hex(fields[4])?);
            (vaddr..vaddr + filesz)
                .contains(&address)
                .then_some(address - vaddr + offset)
        })
}

#[test]
fn a_copy_that_does_not_run_php_as_the_source_does_is_not_installed() {
    let Some((drover_php, libphp)) = drover_php_and_its_libphp() else {
        return;
    };
    let Some(at) = code_offset(&libphp, "PHP_MD5Final") else {
        eprintln!(
            "skipped: no PHP_MD5Final found in {} (nm, readelf)",
            libphp.display()
        );
        return;
    };
    let site = Site::new();
    let name = libphp.file_name().unwrap();
    // `ret`: md5() prints what its digest buffer held; `ud2`: PHP dies of SIGILL.
    for (patch, reason) in [
        (&[0xc3u8][..], "output differs from"),
        (&[0x0f, 0x0b][..], "died of signal 4"),
    ] {
        let mut broken = std::fs::read(&libphp).unwrap();
        let at = usize::try_from(at).unwrap();
        broken[at..at + patch.len()].copy_from_slice(patch);
        let source = site.path().join("broken").join(name);
        std::fs::create_dir_all(source.parent().unwrap()).unwrap();
        std::fs::write(&source, &broken).unwrap();
        let folder = site.path().join("libphp");
        let copy = folder.join(name);
        let out = Command::new(drover_php)
            .arg("--bind-direct")
            .arg(&source)
            .arg(&copy)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{said}");
        assert!(
            said.contains("the copy is not installed") && said.contains(reason),
            "{said}"
        );
        // Nothing in the folder: no copy, no SONAME link, no scratch folder left behind.
        let left: Vec<_> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{left:?} left in {}", folder.display());
    }
}

/// `drover-php --bind-direct` of the linked libphp into `<site>/libphp`: the copy's path.
fn bind_into_site(drover_php: &Path, libphp: &Path, site: &Site) -> PathBuf {
    let copy = site.path().join("libphp").join(libphp.file_name().unwrap());
    let out = Command::new(drover_php)
        .arg("--bind-direct")
        .arg(libphp)
        .arg(&copy)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    copy
}

/// drover, told to look for the bound copy in `<site>/libphp`, serving `pool` behind nginx.
fn stack_on_the_sites_copy(site: Site, pool: Embed) -> Stack {
    let folder = site.path().join("libphp");
    stack_with_libphp_dir(site, pool, &folder)
}

/// drover, with `DROVER_LIBPHP_DIR` set to `folder`, serving `pool` behind nginx.
fn stack_with_libphp_dir(site: Site, pool: Embed, folder: &Path) -> Stack {
    Drover::write_files(&site, &[&pool]);
    let drover = Drover::spawn_with_env(&site, &[("DROVER_LIBPHP_DIR", folder.as_os_str())]);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start(&site, &site.socket("www"));
    Stack {
        nginx,
        drover,
        site,
    }
}

/// Whether the page's PHP runs on the copy, and what it prints of `md5`.
const WHERE: &str = r#"<?php
echo strpos(file_get_contents('/proc/self/maps'), getenv('DIRECT_COPY')) !== false
    ? "copy" : "not the copy", " ", md5('drover'), "\n";
"#;

#[test]
fn a_pool_whose_zygote_dies_on_the_copy_serves_on_the_linked_libphp() {
    let Some((drover_php, libphp)) = drover_php_and_its_libphp() else {
        return;
    };
    let site = Site::new();
    let copy = bind_into_site(drover_php, &libphp, &site);
    // After the self-test passed: PHP's start traps on the installed copy (its build-id and
    // marker unchanged, so the master takes it).
    let Some(at) = code_offset(&copy, "php_module_startup") else {
        eprintln!("skipped: no php_module_startup found in {}", copy.display());
        return;
    };
    let mut bytes = std::fs::read(&copy).unwrap();
    let at = usize::try_from(at).unwrap();
    bytes[at..at + 2].copy_from_slice(&[0x0f, 0x0b]);
    std::fs::write(&copy, bytes).unwrap();

    site.script("where.php", WHERE);
    let pool = Embed::new("www", 1).env(&format!("DIRECT_COPY = \"{}\"\n", copy.display()));
    let stack = stack_on_the_sites_copy(site, pool);
    stack.drover.log.wait_for_line(
        &format!(
            "pool www: drover-php: PHP's calls bound directly ({}",
            copy.display()
        ),
        TIMEOUT,
    );
    let warning = stack.drover.log.wait_for_line(
        "(PHP's calls bound directly) before any request; its zygotes run the libphp",
        TIMEOUT,
    );
    assert!(
        warning.contains("php zygote") && warning.contains("exited on SIGILL"),
        "{warning}"
    );
    let page = http::get(&stack.url("/where.php"));
    assert_eq!(
        (page.status, page.body.as_str()),
        (200, "not the copy a3c2f6df0119df050a37f7e61691a19d\n"),
        "{}",
        stack.drover.log.text()
    );
    let log = stack.drover.log.text();
    assert_eq!(
        log.matches("before any request; its zygotes run").count(),
        1,
        "one warning:\n{log}"
    );
    assert!(!log.contains("failed to start"), "no backoff:\n{log}");
}

#[test]
fn a_pool_that_preloads_a_library_runs_the_linked_libphp() {
    let Some((drover_php, libphp)) = drover_php_and_its_libphp() else {
        return;
    };
    let site = Site::new();
    let copy = bind_into_site(drover_php, &libphp, &site);
    site.script("where.php", WHERE);
    let pool = Embed::new("www", 1).env(&format!(
        "DIRECT_COPY = \"{}\"\nLD_PRELOAD = \"libc.so.6\"\n",
        copy.display()
    ));
    let stack = stack_on_the_sites_copy(site, pool);
    stack.drover.log.wait_for_line(
        &format!(
            "pool www: drover-php: {} is not used: the zygote's environment sets \
             LD_PRELOAD=libc.so.6, which could interpose functions the copy calls directly",
            copy.display()
        ),
        TIMEOUT,
    );
    let page = http::get(&stack.url("/where.php"));
    assert_eq!(
        (page.status, page.body.as_str()),
        (200, "not the copy a3c2f6df0119df050a37f7e61691a19d\n"),
        "{}",
        stack.drover.log.text()
    );
    assert!(!stack.drover.log.text().contains("bound directly ("));
}

/// `path` written relative to this process's working directory (which drover inherits).
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let mut relative = PathBuf::new();
    for _ in cwd.components().skip(1) {
        relative.push("..");
    }
    relative.join(path.strip_prefix("/").unwrap())
}

#[test]
fn a_relative_libphp_folder_is_refused_and_the_pool_runs_the_linked_libphp() {
    let Some((drover_php, libphp)) = drover_php_and_its_libphp() else {
        return;
    };
    let site = Site::new();
    let copy = bind_into_site(drover_php, &libphp, &site);
    // A good copy, in a folder named relative to drover's working directory: the master
    // does not take a path whose meaning depends on where it was started.
    let folder = relative_to_cwd(&site.path().join("libphp"));
    site.script("where.php", WHERE);
    let pool = Embed::new("www", 1).env(&format!("DIRECT_COPY = \"{}\"\n", copy.display()));
    let stack = stack_with_libphp_dir(site, pool, &folder);
    stack.drover.log.wait_for_line(
        &format!(
            "pool www: drover-php: {0} is not used: DROVER_LIBPHP_DIR={0} is not an absolute \
             path; PHP runs the libphp drover-php is linked to",
            folder.display()
        ),
        TIMEOUT,
    );
    let page = http::get(&stack.url("/where.php"));
    assert_eq!(
        (page.status, page.body.as_str()),
        (200, "not the copy a3c2f6df0119df050a37f7e61691a19d\n"),
        "{}",
        stack.drover.log.text()
    );
    assert!(!stack.drover.log.text().contains("bound directly ("));
}
