//! The offsets table checked against real headers: a tiny C program prints `offsetof` of
//! every field in the row for the installed PHP (`php-config`) and this machine's arch, and
//! must agree with it. When `aarch64-linux-gnu-gcc` is installed, the same headers are also
//! cross-compiled (to assembly, not run) to check the aarch64 row of that version.

use super::super::offsets::{self, Arch, Offsets};
use super::{output, which};

/// `offsetof`/constant expressions as one C array initializer.
fn initializer(row: &Offsets) -> String {
    row.c_checks()
        .iter()
        .map(|(expr, _)| format!("  (long)({expr}),\n"))
        .collect()
}

const INCLUDES: &str = "#include <stddef.h>\n#include <stdio.h>\n#include \"main/php.h\"\n\
                        #include \"main/SAPI.h\"\n#include \"Zend/zend.h\"\n#include \"Zend/zend_compile.h\"\n";

/// (major, minor, include flags) of the installed development headers, or why not.
fn installed() -> Result<(u32, u32, Vec<String>), String> {
    which("cc").ok_or("no cc on PATH")?;
    which("php-config").ok_or("no php-config (php8.x-dev) on PATH")?;
    let version = output("php-config", &["--version"]).ok_or("php-config --version failed")?;
    let includes = output("php-config", &["--includes"]).ok_or("php-config --includes failed")?;
    let dir = output("php-config", &["--include-dir"]).ok_or("php-config --include-dir failed")?;
    if !std::path::Path::new(&dir).join("main/php.h").is_file() {
        return Err(format!("no {dir}/main/php.h"));
    }
    if output("php-config", &["--configure-options"]).is_some_and(|o| o.contains("--enable-zts")) {
        return Err("the installed PHP is ZTS".into());
    }
    let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => Ok((
            major,
            minor,
            includes.split_whitespace().map(String::from).collect(),
        )),
        _ => Err(format!("unexpected php-config --version {version:?}")),
    }
}

fn compare(arch: &str, row: &Offsets, values: &[i64]) {
    let checks = row.c_checks();
    assert_eq!(
        values.len(),
        checks.len(),
        "{arch}: expected one value per check"
    );
    let wrong: Vec<String> = checks
        .iter()
        .zip(values)
        .filter(|((_, table), real)| *table as i64 != **real)
        .map(|((expr, table), real)| format!("{expr}: table {table}, headers {real}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{arch} offsets differ from the headers:\n{}",
        wrong.join("\n")
    );
    println!("{arch}: all {} fields match the headers", checks.len());
}

#[test]
fn table_matches_installed_headers() {
    let (major, minor, includes) = match installed() {
        Ok(found) => found,
        Err(why) => return println!("SKIPPED: {why}"),
    };
    let Some(arch) = Arch::host() else {
        return println!("SKIPPED: no table rows for this architecture");
    };
    let row = offsets::lookup(major, minor, arch).unwrap_or_else(|| {
        panic!("the offsets table has no row for the installed PHP {major}.{minor} on {arch:?}")
    });
    assert!(
        row.verified,
        "the row checked here should be marked verified"
    );
    let dir = tempfile::tempdir().unwrap();
    let source = dir.path().join("offsets.c");
    let program = format!(
        "{INCLUDES}static const long v[] = {{\n{}}};\nint main(void) {{\n  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) printf(\"%ld\\n\", v[i]);\n  return 0;\n}}\n",
        initializer(&row.offsets)
    );
    std::fs::write(&source, program).unwrap();
    let binary = dir.path().join("offsets");
    let cc = std::process::Command::new("cc")
        .args(&includes)
        .arg("-o")
        .arg(&binary)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = std::process::Command::new(&binary).output().unwrap();
    let values: Vec<i64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    compare(
        &format!("PHP {major}.{minor} {arch:?}"),
        &row.offsets,
        &values,
    );

    // The aarch64 row of the same version, by cross-compiling the same headers to assembly.
    if arch == Arch::X86_64 {
        cross_check_aarch64(major, minor, &includes, dir.path());
    }
}

fn cross_check_aarch64(major: u32, minor: u32, includes: &[String], dir: &std::path::Path) {
    if which("aarch64-linux-gnu-gcc").is_none() {
        return println!("aarch64 row not cross-checked: no aarch64-linux-gnu-gcc");
    }
    let row = offsets::lookup(major, minor, Arch::Aarch64)
        .expect("an aarch64 row for the installed version");
    let source = dir.join("offsets_arm.c");
    std::fs::write(
        &source,
        format!(
            "{INCLUDES}const long v[] = {{\n{}}};\n",
            initializer(&row.offsets)
        ),
    )
    .unwrap();
    let asm = dir.join("offsets_arm.s");
    let cc = std::process::Command::new("aarch64-linux-gnu-gcc")
        .args(includes)
        .args(["-S", "-o"])
        .arg(&asm)
        .arg(&source)
        .output()
        .unwrap();
    assert!(
        cc.status.success(),
        "aarch64-linux-gnu-gcc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let text = std::fs::read_to_string(&asm).unwrap();
    let values: Vec<i64> = text
        .lines()
        .skip_while(|l| !l.starts_with("v:"))
        .filter_map(|l| {
            l.trim()
                .strip_prefix(".xword")
                .map(|v| v.trim().parse().unwrap())
        })
        .collect();
    compare(
        &format!("PHP {major}.{minor} Aarch64 (cross-compiled)"),
        &row.offsets,
        &values,
    );
}

#[test]
fn rows_differ_only_where_documented() {
    for row in offsets::TABLE.iter() {
        let base = offsets::lookup(8, 2, row.arch).unwrap().offsets;
        let expected = Offsets {
            op_array_filename: match row.minor {
                1 | 3 => 144,
                2 => 152,
                _ => 168,
            },
            ..base
        };
        assert_eq!(row.offsets, expected, "8.{} {:?}", row.minor, row.arch);
    }
    let (x86, arm) = (
        offsets::lookup(8, 4, Arch::X86_64).unwrap(),
        offsets::lookup(8, 4, Arch::Aarch64).unwrap(),
    );
    assert_eq!(
        Offsets {
            sg_global_request_time: 0,
            ..x86.offsets
        },
        Offsets {
            sg_global_request_time: 0,
            ..arm.offsets
        }
    );
    assert!(
        offsets::lookup(7, 4, Arch::X86_64).is_none()
            && offsets::lookup(8, 5, Arch::X86_64).is_none()
    );
}
