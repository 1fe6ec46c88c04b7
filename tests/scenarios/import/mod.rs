//! `drover import`: real php-fpm and gunicorn configurations imported by the real binary,
//! the written files checked with `drover -t`, and the imported pools serving behind nginx.
//!
//! - [`phpfpm`]: Debian's stock php-fpm.conf and www.conf import to a pool that serves the
//!   page php-fpm serves; a pool's php_admin_value, env, pm and slowlog settings round-trip;
//!   an unknown directive is reported with its file and line; nothing is overwritten.
//! - [`gunicorn`]: a gunicorn.conf.py (run by drover-python, as gunicorn runs it) and flags
//!   import to a Python pool that serves the WSGI fixture app; its hooks are named.
//! - [`hostile`]: names that are paths in every importer, in named and included files,
//!   and links planted in the output folder: refused with file:line, nothing written
//!   outside `-o`; an imported supervisord program runs with the environment it had.

mod gunicorn;
mod hostile;
mod phpfpm;

use std::path::Path;
use std::process::{Command, Output};

use crate::common::{bin, php_runtime, python_runtime, run_bounded};

/// `drover import ARGS...`, bounded, after building the runtimes the check asks.
fn import(args: &[&str]) -> Output {
    python_runtime();
    php_runtime();
    run_bounded(Command::new(bin()).arg("import").args(args))
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `file` with every line starting with one of `keys` replaced by `replacement` lines (or
/// dropped): how an operator adapts a generated file.
fn edit(file: &Path, keys: &[&str], replacement: &str) {
    let text = std::fs::read_to_string(file).expect("read the written file");
    let mut out = String::new();
    let mut replaced = false;
    for line in text.lines() {
        if keys.iter().any(|k| line.starts_with(&format!("{k} "))) {
            if !replaced {
                out += replacement;
                replaced = true;
            }
            continue;
        }
        out += line;
        out.push('\n');
    }
    if !replaced {
        out = format!("{replacement}{out}");
    }
    std::fs::write(file, out).expect("write the edited file");
}
