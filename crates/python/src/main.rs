//! `drover-python`: the Python runtime, a binary of its own so that only Python pools load
//! libpython. The master execs it once per Python pool as that pool's zygote (see
//! [`drover_python::zygote`]); operators never run it by hand. `drover import gunicorn`
//! also runs it with `--read-gunicorn-config FILE` ([`gunicorn_config`]).

mod gunicorn_config;

use std::process::ExitCode;

use drover_proto::terms::{CommandLine, Terms};
use drover_python::zygote;

/// What `--help` says.
const ABOUT: &str = "The zygote of one Python pool (started by the drover master, not by \
                     hand): its command line names the pool, for `ps`; the master passes its \
                     terms at fd 6.";

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
    let terms = CommandLine::parse_or_exit(std::env::args_os(), ABOUT).terms(
        "the terms of drover-python",
        |terms| match terms {
            Terms::Python(python) => Some(python),
            Terms::Php(_) => None,
        },
    );
    match terms {
        Ok(python) => ExitCode::from(zygote::run(python)),
        Err(e) => {
            eprintln!("drover-python {}: {e}", drover_proto::terms::VERSION);
            ExitCode::from(drover_proto::zygote::EXIT_TERMS)
        }
    }
}
