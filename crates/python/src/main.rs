//! `drover-python`: the Python runtime, a binary of its own so that only Python pools load
//! libpython. The master execs it once per Python pool as that pool's zygote (see
//! [`drover_python::zygote`]); operators never run it by hand.

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
    ExitCode::from(zygote::run(Args::parse().zygote))
}
