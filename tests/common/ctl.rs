//! drover's control socket as an operator reaches it: `drover.toml` with `[control] listen`,
//! and `drover ctl --socket PATH ...` run as a command, its exit code and output checked.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::{Drover, PoolFile, Site, TIMEOUT, bin, run_bounded};

/// `drover ctl` against one control socket.
pub struct Ctl {
    pub socket: PathBuf,
}

/// What one `drover ctl` run printed, and how it exited.
#[derive(Debug)]
pub struct CtlRun {
    /// The arguments after `--socket PATH`, for messages.
    pub args: String,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CtlRun {
    fn new(args: &[&str], output: Output) -> CtlRun {
        CtlRun {
            args: args.join(" "),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

impl Ctl {
    /// `drover ctl --socket SOCKET ARGS...`, bounded by [`TIMEOUT`]; any exit code.
    pub fn run(&self, args: &[&str]) -> CtlRun {
        let output = run_bounded(
            Command::new(bin())
                .arg("ctl")
                .arg("--socket")
                .arg(&self.socket)
                .args(args),
        );
        CtlRun::new(args, output)
    }

    /// Runs `args`, asserts exit 0 and returns stdout. `log` is added to a failure.
    pub fn ok(&self, args: &[&str], log: &str) -> String {
        let run = self.run(args);
        assert_eq!(
            run.code,
            Some(0),
            "drover ctl {} failed: {run:#?}\ndrover's log:\n{log}",
            run.args
        );
        run.stdout
    }

    /// `status POOL --json`, parsed: php-fpm's single object for one pool.
    pub fn status_json(&self, pool: &str, log: &str) -> serde_json::Value {
        let text = self.ok(&["status", pool, "--json"], log);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}):\n{text}"))
    }
}

/// `drover ctl -c CONFIG probe ARGS...`, bounded by [`TIMEOUT`]; any exit code. The probe
/// reads the pool's socket from the configuration, not from the control socket.
pub fn probe(config: &Path, args: &[&str]) -> CtlRun {
    let output = run_bounded(
        Command::new(bin())
            .arg("ctl")
            .arg("-c")
            .arg(config)
            .arg("probe")
            .args(args),
    );
    CtlRun::new(args, output)
}

/// Writes `drover.toml` (stderr log, the control socket at `<site>/ctl.sock`) and the pool
/// files, starts drover and waits for its `ready:` line.
pub fn start_with_control(site: &Site, pools: &[&dyn PoolFile]) -> (Drover, Ctl) {
    let socket = site.path().join("ctl.sock");
    site.write(
        "drover.toml",
        &format!(
            "error_log = \"stderr\"\nlog_level = \"info\"\n\n[control]\nlisten = \"{}\"\n",
            socket.display()
        ),
    );
    for pool in pools {
        site.write(&format!("pools.d/{}.toml", pool.name()), &pool.toml(site));
    }
    let drover = Drover::spawn(site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    (drover, Ctl { socket })
}

impl Ctl {
    /// The pid of every worker `drover ctl status --full --json` lists, in every pool.
    pub fn listed_workers(&self, log: &str) -> Vec<i32> {
        let text = self.ok(&["status", "--full", "--json"], log);
        let value: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("status --json is not JSON ({e}):\n{text}"));
        let pools: Vec<serde_json::Value> = match value {
            serde_json::Value::Array(pools) => pools,
            other => other
                .get("pools")
                .and_then(|p| p.as_array().cloned())
                .unwrap_or_else(|| vec![other]),
        };
        pools
            .iter()
            .flat_map(|pool| pool["processes"].as_array().cloned().unwrap_or_default())
            .filter_map(|worker| worker["pid"].as_i64())
            .map(|pid| pid as i32)
            .collect()
    }

    /// Waits until every process below `master` is one the status lists (see
    /// [`proc::untracked`]); panics with what is left and `log`.
    pub fn wait_all_tracked(&self, master: i32, log: &super::Log) {
        let mut left = Vec::new();
        let settled = super::proc::poll(TIMEOUT, || {
            let listed = self.listed_workers(&log.text());
            left = super::proc::untracked(master, &listed);
            left.is_empty()
        });
        assert!(
            settled,
            "processes under drover that its status does not list: {left:?}\ndrover's log:\n{}",
            log.text()
        );
    }
}
