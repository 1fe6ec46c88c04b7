//! `drover-python`: the Python runtime, a binary of its own so that only Python pools load
//! libpython. The master execs it once per Python pool as that pool's zygote (see
//! [`drover_python::zygote`]); operators never run it by hand. `drover import gunicorn`
//! also runs it with `--read-gunicorn-config FILE` ([`gunicorn_config`]).

mod gunicorn_config;

use std::process::ExitCode;

use clap::Parser;

use drover_proto::zygote::PythonArgs;
use drover_python::zygote;

/// The zygote of one Python pool (started by the drover master, not by hand).
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    #[command(flatten)]
    zygote: PythonArgs,
}

fn main() -> ExitCode {
    drover_worker::serve::take_allowed_clients();
    // args_os: a zygote's arguments (paths) need not be UTF-8.
    let mut argv = std::env::args_os().skip(1);
    if argv
        .next()
        .is_some_and(|first| first == gunicorn_config::FLAG)
    {
        return ExitCode::from(gunicorn_config::run(argv.next().as_deref()));
    }
    ExitCode::from(zygote::run(Args::parse().zygote))
}
