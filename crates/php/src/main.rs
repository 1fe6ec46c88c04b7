//! `drover-php`: the PHP runtime, a binary of its own so that only PHP pools load libphp.
//! The master execs it once per PHP pool as that pool's zygote (see
//! [`drover_php::zygote`]); operators never run it by hand, except `drover-php --probe`.

use std::process::ExitCode;

use drover_proto::terms::{CommandLine, Terms};
use drover_proto::zygote::{PHP_BIND_DIRECT, PHP_CHECK, PHP_PROBE, PROBE_LIBPHP, PhpArgs};

/// What `--help` says.
const ABOUT: &str = "The zygote of one PHP pool (started by the drover master, not by hand): \
                     its command line names the pool, for `ps`; the master passes its terms \
                     at fd 6.";

/// The terms the master passed (`drover_proto::terms`), for the pool `line` names; `Err`
/// with the exit code once the reason is said.
fn terms(line: &CommandLine) -> Result<PhpArgs, u8> {
    line.terms("the terms of drover-php", |terms| match terms {
        Terms::Php(php) => Some(php),
        Terms::Python(_) => None,
    })
    .map_err(|e| {
        eprintln!("drover-php {}: {e}", drover_proto::terms::VERSION);
        drover_proto::zygote::EXIT_TERMS
    })
}

/// `drover-php --probe` prints the PHP this binary runs and exits 0, or says why it cannot
/// run PHP and exits `EXIT_NO_PHP`: the master asks it before it picks a PHP
/// pool's runtime. `drover-php --check --pool NAME` is `drover -t`'s: see [`PHP_CHECK`].
/// `drover-php --bind-direct [SRC DEST]` writes the copy of libphp whose calls are direct
/// (run by the package's postinst): see [`PHP_BIND_DIRECT`].
fn main() -> ExitCode {
    drover_worker::serve::take_allowed_clients();
    let code = match std::env::args().nth(1).as_deref() {
        Some(PHP_PROBE) => probe(),
        Some(PHP_BIND_DIRECT) => {
            drover_php::direct::run(&std::env::args_os().skip(2).collect::<Vec<_>>())
        }
        Some(drover_php::selftest::SELFTEST_ARG) => {
            selftest(&std::env::args_os().skip(2).collect::<Vec<_>>())
        }
        Some(PHP_CHECK) => {
            let line = CommandLine::parse_or_exit(
                std::env::args_os()
                    .enumerate()
                    .filter_map(|(i, arg)| (i != 1).then_some(arg)),
                ABOUT,
            );
            terms(&line).map_or_else(|code| code, |php| check(&php))
        }
        _ => terms(&CommandLine::parse_or_exit(std::env::args_os(), ABOUT))
            .map_or_else(|code| code, run),
    };
    ExitCode::from(code)
}

#[cfg(not(no_php))]
fn probe() -> u8 {
    println!("{}", drover_php::zygote::version());
    if let Some(libphp) = drover_php::direct::linked_libphp() {
        println!("{PROBE_LIBPHP}{}", libphp.display());
    }
    0
}

#[cfg(not(no_php))]
fn run(php: PhpArgs) -> u8 {
    drover_php::zygote::run(php)
}

/// `drover-php --check --pool NAME`: PHP started as the zygote would start it, then the
/// exit.
#[cfg(not(no_php))]
fn check(php: &PhpArgs) -> u8 {
    drover_php::zygote::check(php)
}

/// `drover-php --bind-direct-selftest DIR`: the self-test's child (`--bind-direct` runs it).
#[cfg(not(no_php))]
fn selftest(args: &[std::ffi::OsString]) -> u8 {
    drover_php::selftest::child(args)
}

#[cfg(no_php)]
fn selftest(_: &[std::ffi::OsString]) -> u8 {
    probe()
}

#[cfg(no_php)]
fn run(_: PhpArgs) -> u8 {
    probe()
}

#[cfg(no_php)]
fn check(_: &PhpArgs) -> u8 {
    probe()
}

#[cfg(no_php)]
fn probe() -> u8 {
    println!(
        "drover-php was built without PHP (no php-config and libphp at build time): run PHP pools with runtime = \"cgi\""
    );
    drover_proto::zygote::EXIT_NO_PHP
}
