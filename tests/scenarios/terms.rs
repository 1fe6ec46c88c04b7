//! A zygote's terms (`drover_proto::terms`): the master passes them in a sealed memfd at
//! fd 6, and the command line keeps only `--pool NAME`, what `ps` shows.
//!
//! - A `drover-python` or `drover-php` given terms another drover version wrote (the
//!   binaries replaced under a running master) refuses to start, naming both versions,
//!   with `EXIT_TERMS`; one started by hand, without terms, says it is the master's to start.
//! - A running pool's zygote shows `--pool NAME` and nothing of its terms; its workers
//!   (and so the app) do not hold the terms' memfd.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use drover_proto::terms::{MAGIC, TERMS_FD};
use drover_proto::zygote::EXIT_TERMS;

use crate::common::python::wait_started;
use crate::common::{PythonPool, Site, Stack, TIMEOUT, php_runtime, python_runtime};

/// The version this build of drover writes in its terms.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Runs `program --pool www` with `terms` (if any) as the file at [`TERMS_FD`], as the
/// master would, and nothing on stdin.
fn run_with_terms(program: &Path, terms: Option<&[u8]>) -> Output {
    let mut command = Command::new(program);
    command
        .args(["--pool", "www"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let file = terms.map(|bytes| {
        let mut file = tempfile::tempfile().expect("a temp file");
        file.write_all(bytes).expect("write the terms");
        file
    });
    if let Some(fd) = file.as_ref().map(AsRawFd::as_raw_fd) {
        // SAFETY: runs in the forked child before exec; dup2 (or fcntl, when the file is
        // already at TERMS_FD) only changes descriptors of the child.
        unsafe {
            command.pre_exec(move || {
                let placed = if fd == TERMS_FD {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, TERMS_FD)
                };
                if placed < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let output = command.output().expect("run the zygote");
    drop(file);
    output
}

/// The zygotes this build has: drover-python always, drover-php when its crate builds.
fn zygotes() -> Vec<(&'static str, &'static Path)> {
    let mut zygotes = vec![("drover-python", python_runtime())];
    if let Some(php) = php_runtime() {
        zygotes.push(("drover-php", php));
    }
    zygotes
}

#[test]
fn a_zygote_given_terms_of_another_version_refuses_to_start_naming_both() {
    // A body of the right shape for no version: the header is read first, whatever follows.
    let other = format!("{MAGIC} 0.0.1\n{{\"php\":{{\"zygote\":{{\"pool\":\"www\"}}}}}}");
    for (name, program) in zygotes() {
        let output = run_with_terms(program, Some(other.as_bytes()));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            output.status.code(),
            Some(i32::from(EXIT_TERMS)),
            "{name}: {:?} {stderr}",
            output.status.signal()
        );
        assert!(
            stderr.contains(&format!("{name} {VERSION}: terms written by drover 0.0.1"))
                && stderr.contains(&format!("this is version {VERSION}"))
                && stderr.contains("one drover package"),
            "{name}: {stderr}"
        );
        assert!(output.stdout.is_empty(), "{name}: started anyway");
    }
}

#[test]
fn a_zygote_started_by_hand_says_the_master_starts_it() {
    for (name, program) in zygotes() {
        for terms in [None, Some(&b"--workers 4\n"[..])] {
            let output = run_with_terms(program, terms);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(i32::from(EXIT_TERMS)),
                "{name}: {stderr}"
            );
            assert!(
                stderr.contains(&format!("fd {TERMS_FD}"))
                    && stderr.contains("started by the drover master, not by hand"),
                "{name}: {stderr}"
            );
        }
    }
}

#[test]
fn ps_shows_the_pool_of_a_zygote_and_no_worker_holds_its_terms() {
    let stack = Stack::python(Site::new(), PythonPool::wsgi("py").max_children(2));
    let log = &stack.drover.log;
    let zygote = wait_started(log, 0, "py", "python zygote", 1, TIMEOUT)[0];
    let workers = wait_started(log, 0, "py", "worker", 2, TIMEOUT);
    let cmdline = std::fs::read(format!("/proc/{zygote}/cmdline")).expect("the zygote's cmdline");
    let args: Vec<&[u8]> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .collect();
    assert_eq!(
        args[1..],
        [&b"--pool"[..], b"py"],
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    for pid in workers.into_iter().chain([zygote]) {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("the process's fds");
        for fd in fds.flatten() {
            let target = std::fs::read_link(fd.path()).unwrap_or_default();
            assert!(
                !target.to_string_lossy().contains("drover-terms"),
                "{pid} holds its terms at fd {:?}",
                fd.file_name()
            );
        }
    }
}
