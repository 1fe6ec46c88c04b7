//! [`Strace`]: the system calls a running process makes, seen by strace attached to every
//! one of its threads, from the attach until [`Strace::finish`].

use std::fs;
use std::process::{Child, Command, Stdio};

use nix::sys::signal::Signal;

use super::{Log, TIMEOUT, proc};

pub struct Strace {
    child: Child,
    /// strace's own messages (attached, detached).
    log: Log,
    /// Where strace writes the calls (`-o`).
    output: tempfile::NamedTempFile,
}

impl Drop for Strace {
    /// A failed test detaches too: strace never outlives it, holding the process traced.
    fn drop(&mut self) {
        self.detach();
    }
}

impl Strace {
    /// Attaches to `pid`'s threads, tracing `syscalls` (strace's `-e trace=` list); returns
    /// once strace says it is attached to all of them.
    pub fn attach(pid: i32, syscalls: &str) -> Strace {
        let output = tempfile::NamedTempFile::new().expect("temp file");
        let threads: Vec<String> = fs::read_dir(format!("/proc/{pid}/task"))
            .expect("read /proc/PID/task")
            .map(|t| t.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut command = Command::new("strace");
        command
            .args([
                "-e",
                &format!("trace={syscalls}"),
                "-e",
                "signal=none",
                "-o",
            ])
            .arg(output.path());
        for thread in &threads {
            command.args(["-p", thread]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run strace (the tests need it: apt-get install strace)");
        let log = Log::default();
        log.collect(child.stderr.take().unwrap());
        log.wait_for_lines(
            0,
            "strace attached",
            |l| l.contains("attached"),
            threads.len(),
            TIMEOUT,
        );
        Strace { child, log, output }
    }

    /// Detaches (strace leaves the process running) and returns what strace wrote, one
    /// system call a line.
    pub fn finish(mut self) -> Vec<String> {
        assert!(self.detach(), "strace did not detach:\n{}", self.log.text());
        fs::read_to_string(self.output.path())
            .expect("read strace's output")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// SIGINT: strace detaches and exits. True when it did within [`TIMEOUT`] (or had).
    fn detach(&mut self) -> bool {
        let pid = self.child.id() as i32;
        let mut exited = || self.child.try_wait().ok().flatten().is_some();
        if exited() {
            return true;
        }
        proc::signal(pid, Signal::SIGINT);
        proc::poll(TIMEOUT, exited)
    }
}
