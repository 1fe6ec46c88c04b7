//! Command pools: any FastCGI program that accepts on fd 0 (fcgiwrap, a Go or C
//! FastCGI server...), one process per worker. drover cannot count their requests, so
//! `max_requests` does not apply to them.

use std::ffi::OsString;
use std::path::PathBuf;

use super::allowed_clients_env;
use crate::config::{Command, Pool};

/// The program, arguments and environment of one worker of a command pool.
pub fn plan(pool: &Pool, command: &Command) -> (PathBuf, Vec<OsString>, Vec<(OsString, OsString)>) {
    let program = PathBuf::from(&command.argv[0]);
    let args = command.argv[1..].iter().map(OsString::from).collect();
    let env = allowed_clients_env(pool).into_iter().collect();
    (program, args, env)
}
