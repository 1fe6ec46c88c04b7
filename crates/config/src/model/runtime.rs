//! The runtime tables' keys (`[php]`, `[python]`, `[command]`, `[program]`), each declared
//! with the field it fills (`keys!`, `keys/declare.rs`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::choices::{PhpProgram, WorkerBoot};
use crate::keys::Default::{Note, Required, Unset, Value};
use crate::keys::{
    Choice, MAX_THREADS, Runtimes, STOP_SIGNALS, Section, Type, between, choice, key, keys, refused,
};
use crate::show::Shown;
use crate::value::Table;

#[derive(Debug, Clone, PartialEq)]
pub enum Runtime {
    Php(Php),
    Python(Python),
    Command(Command),
    Program(Program),
}

keys! {
    /// `[php]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Php: Section::Php, given PhpGiven {
        /// Which program runs PHP, with the settings only it can enforce (`binary`, and the
        /// keys below that only drover-php takes).
        pub runtime: PhpRuntime = [
            key(
                "runtime",
                Type::Choice(PhpProgram::NAMES),
                Note(
                    "`\"cgi\"` when `binary` is set, else `\"embed\"` where drover-php can run PHP, \
                     else `\"cgi\"`",
                ),
                "Which program runs the scripts: drover-php (linking libphp) or php-cgi.",
            ),
            refused(
                key(
                    "binary",
                    Type::Path,
                    Note("`\"php-cgi\"`, looked up on PATH"),
                    "php-cgi's path or name (searched on PATH); it must exist.",
                ),
                &[(
                    Runtimes::EMBED,
                    "only for runtime = \"cgi\" (php-cgi): drover-php links PHP itself; remove binary, \
                     or set runtime = \"cgi\"",
                )],
            ),
        ] => read(given), show(show_php);
        /// `ini_file`: the php.ini PHP loads (drover-php's `PhpArgs::ini_file`, php-cgi's `-c`); `None`:
        /// PHP's own search.
        pub ini_file: Option<PathBuf> = [key(
            "ini_file",
            Type::Path,
            Unset,
            "The php.ini PHP loads; none: PHP's own search.",
        )] => read(given), show(optional);
        in runtime = [
            key(
                "limit_extensions",
                Type::Strings,
                Value("[\".php\"]"),
                "php-fpm's `security.limit_extensions`: the suffixes of the scripts PHP runs; `[]`: \
                 any file. Another list needs drover-php.",
            ),
            refused(
                key(
                    "worker",
                    Type::Path,
                    Unset,
                    "Worker mode: the script each worker runs once; it boots the app, then handles \
                     every request of the pool through `frankenphp_handle_request()` \
                     (docs/php-worker-mode.md).",
                ),
                &[(
                    Runtimes::CGI,
                    "worker mode needs drover-php (runtime = \"embed\"): php-cgi runs one script per \
                     request and cannot keep an app booted between them",
                )],
            ),
            refused(
                key(
                    "worker_boot",
                    Type::Choice(WorkerBoot::NAMES),
                    Value("\"worker\""),
                    "Where the worker script boots: in each worker, or once in the zygote, whose \
                     workers are forked from the booted app (no socket may be open after the boot).",
                ),
                &[(
                    Runtimes::CGI,
                    "worker mode needs drover-php (runtime = \"embed\")",
                )],
            ),
        ] => show(show_php);
        /// `[php.ini]`, php-fpm's `php_value`: drover-php's `--ini name=value`, php-cgi's
        /// `-d name=value`. A script may change them with `ini_set`.
        pub ini: BTreeMap<String, String> = [key(
            "ini",
            Type::Map,
            Unset,
            "`[php.ini]`, php-fpm's `php_value`: settings a script may change.",
        )] => read(given), show(map);
        in runtime = [key(
            "admin_ini",
            Type::Map,
            Unset,
            "`[php.admin_ini]`, php-fpm's `php_admin_value`: settings a script cannot change \
             (drover-php only).",
        )] => show(show_php);
    }
}

/// `[php] runtime`: the program that runs a PHP pool's scripts.
#[derive(Debug, Clone, PartialEq)]
pub enum PhpRuntime {
    /// `"embed"`: `drover-php`, which links libphp, as the pool's zygote in every pm mode.
    Embed {
        /// `[php.admin_ini]`, php-fpm's `php_admin_value`: values a script cannot change.
        admin_ini: BTreeMap<String, String>,
        /// `limit_extensions`, php-fpm's `security.limit_extensions`: the suffixes of the
        /// scripts PHP runs; empty: any file.
        limit_extensions: Vec<String>,
        /// `worker`: worker mode's script, an existing file; `None`: classic mode.
        worker: Option<PathBuf>,
        /// `worker_boot = "zygote"`: the worker script boots once, in the zygote.
        boot_in_zygote: bool,
    },
    /// `"cgi"`: php-cgi.
    Cgi {
        /// `binary`, resolved to an existing executable (searched on PATH when not a path).
        binary: PathBuf,
        /// `limit_extensions = []`: the pool lets any file run, which php-cgi does when it
        /// walks up a path (`cgi.fix_pathinfo = 1`); without it, drover runs php-cgi with
        /// `cgi.fix_pathinfo = 0` and refuses 1 (the master's `runtime::php`).
        any_file: bool,
    },
}

impl PhpRuntime {
    /// The value of `runtime` that selects it.
    pub fn name(&self) -> &'static str {
        match self {
            PhpRuntime::Embed { .. } => PhpProgram::Embed,
            PhpRuntime::Cgi { .. } => PhpProgram::Cgi,
        }
        .name()
    }
}

keys! {
    /// `[python]`.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Python: Section::Python, given PythonGiven {
        /// "package.module:callable"; the callable defaults to `application`.
        pub module: String = [key(
            "app",
            Type::String,
            Required,
            "`\"package.module:callable\"` (callable default `application`), or a factory called \
             with literal arguments, as gunicorn takes it.",
        )] => read(given), show(show_app);
        /// What follows the `:`: the app's name, or a factory call with literal arguments
        /// (`create_app('prod', debug=False)`), checked as gunicorn checks it; the zygote calls
        /// the factory once (or each worker, without preload).
        pub callable: String => read(given);
        pub python_path: Vec<PathBuf> = [key(
            "python_path",
            Type::Strings,
            Value("[]"),
            "Folders put in front of `sys.path`.",
        )] => read(given), show(of);
        pub virtualenv: Option<PathBuf> = [key(
            "virtualenv",
            Type::Path,
            Unset,
            "A virtualenv whose packages the app imports.",
        )] => read(given), show(optional);
        pub preload: bool = [key(
            "preload",
            Type::Bool,
            Value("true"),
            "Load the app once in the zygote before forking (false: in each worker).",
        )] => read(given), show(of);
        /// SCRIPT_NAME prefix the app is mounted at ("" = root).
        pub mount: String = [key(
            "mount",
            Type::String,
            Value("\"\""),
            "The SCRIPT_NAME prefix the app is mounted at (`\"/app\"`); `\"\"`: the root.",
        )] => read(given), show(of);
        /// Request paths (with an optional query) the zygote sends through the app before it
        /// forks, so that what the app builds on its first requests is shared by the workers.
        pub warmup: Vec<String> = [key(
            "warmup",
            Type::Strings,
            Value("[]"),
            "Request paths the zygote sends through a preloaded WSGI app before it forks.",
        )] => read(given), show(of);
        /// `hooks`: gunicorn's lifecycle hooks, from a module name or a .py file (a
        /// gunicorn.conf.py; a relative path resolves as every path does, and must exist).
        pub hooks: Option<String> = [key(
            "hooks",
            Type::String,
            Unset,
            "gunicorn's server hooks, from a module or a .py file (a gunicorn.conf.py).",
        )] => read(given), show(optional);
        /// How the app is called: a WSGI callable, one request at a time per worker, or an
        /// ASGI 3.0 app on an event loop, many requests at once per worker.
        pub interface: Interface = [key(
            "interface",
            Type::Choice(Interface::NAMES),
            Value("\"wsgi\""),
            "A WSGI callable, one request at a time per thread, or an ASGI 3.0 app on an event \
             loop.",
        )] => read(given), show(name);
        /// `threads`: how many threads of each WSGI worker accept and serve requests, as
        /// gunicorn's gthread worker (1: the worker's own thread, one request at a time).
        pub threads: u32 = [between(
            key(
                "threads",
                Type::Int,
                Value("1"),
                "WSGI over FastCGI: the threads of each worker that serve requests (1 to 64), as \
                 gunicorn's gthread.",
            ),
            1,
            MAX_THREADS,
        )] => read(given), show(of);
    }
}

/// `[python] interface`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Interface {
    #[default]
    Wsgi,
    Asgi,
}

choice!(Interface {
    Wsgi = "wsgi",
    Asgi = "asgi",
});

keys! {
    /// `[command]`: a FastCGI program of the operator's.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Command: Section::Command, given CommandGiven {
        /// `argv[0]` resolved like `[php] binary`.
        pub argv: Vec<String> = [key(
            "argv",
            Type::Strings,
            Required,
            "The FastCGI program and its arguments; it accepts on fd 0, one process per worker.",
        )] => read(given), show(of);
    }
}

keys! {
    /// `[program]`: a background pool, `max_children` copies of a long-running command (a
    /// queue consumer, a scheduler), no socket (`config/program.rs`, docs/programs.md).
    #[derive(Debug, Clone, PartialEq)]
    pub struct Program: Section::Program, given ProgramGiven {
        /// `command`, its program resolved like `[command] argv`'s.
        pub command: Vec<String> = [key(
            "command",
            Type::Strings,
            Required,
            "The long-running program and its arguments (`[\"php\", \"artisan\", \"queue:work\"]`); \
             `pm.max_children` copies run, stdin /dev/null, output in the error log.",
        )] => read(given), show(of);
        /// What asks a copy to stop (supervisord's `stopsignal`), by its name without `SIG`.
        pub stop_signal: String = [key(
            "stop_signal",
            Type::Choice(&STOP_SIGNALS),
            Value("\"TERM\""),
            "The signal that asks a copy to stop (supervisord's `stopsignal`), on a reload, a \
             recycle, a scale-down and drover's stop.",
        )] => read(stop_signal), show(of);
        /// How long a copy asked to stop may take before SIGKILL (supervisord's
        /// `stopwaitsecs`); `None`: the global `process_control_timeout`.
        pub stop_timeout: Option<Duration> = [key(
            "stop_timeout",
            Type::Duration,
            Note("`process_control_timeout`"),
            "How long a copy asked to stop may take before SIGKILL (supervisord's `stopwaitsecs`).",
        )] => read(optional), show(show_stop_timeout);
        /// A copy is restarted (gracefully) after running this long; `None`: never.
        pub max_lifetime: Option<Duration> = [key(
            "max_lifetime",
            Type::Duration,
            Unset,
            "A copy is stopped gracefully and replaced after running this long.",
        )] => read(max_lifetime), show(optional);
        /// Each copy's lifetime is `max_lifetime` plus up to this much, so that copies started
        /// together are not all restarted at once.
        pub max_lifetime_jitter: Duration = [key(
            "max_lifetime_jitter",
            Type::Duration,
            Value("\"0s\""),
            "Up to this much is added to each copy's `max_lifetime`, so copies started together \
             are not restarted together.",
        )] => read(max_lifetime_jitter), show(of);
    }
}

impl Runtime {
    pub fn name(&self) -> &'static str {
        match self {
            Runtime::Php(_) => "php",
            Runtime::Python(_) => "python",
            Runtime::Command(_) => "command",
            Runtime::Program(_) => "program",
        }
    }
}

// The rules on a key's own value, applied as it is read (`read(FUNCTION)`).

/// `stop_signal`: a name of [`STOP_SIGNALS`], with or without `SIG`.
fn stop_signal(t: &Table<'_, '_>) -> Option<String> {
    t.parse("stop_signal", |s| {
        let name = s.strip_prefix("SIG").unwrap_or(s);
        if STOP_SIGNALS.contains(&name) {
            Ok(name.to_owned())
        } else {
            Err(format!("one of {}", STOP_SIGNALS.join(", ")))
        }
    })
    .or("TERM".to_owned())
}

/// `max_lifetime`: a copy replaced as soon as it starts would never work.
fn max_lifetime(t: &Table<'_, '_>) -> Option<Option<Duration>> {
    let max_lifetime = t.optional("max_lifetime");
    if max_lifetime == Some(Some(Duration::ZERO)) {
        t.fail(
            "max_lifetime",
            "must be more than 0s (leave it out for no limit)",
        );
    }
    max_lifetime
}

/// `max_lifetime_jitter`: what it spreads is `max_lifetime`.
fn max_lifetime_jitter(t: &Table<'_, '_>) -> Option<Duration> {
    let jitter = t.value("max_lifetime_jitter");
    if t.contains("max_lifetime_jitter") && !t.contains("max_lifetime") {
        t.fail("max_lifetime_jitter", "only with max_lifetime");
    }
    jitter
}

// What `drover -t` shows for the keys whose declaration names a hook (`show(FUNCTION)`):
// each answers for its entry's rows, as `(struct, key)`.

/// `[php]`'s keys that one runtime only takes: their values are in its variant.
fn show_php<'a>(php: &'a Php, key: &str) -> Option<Shown<'a>> {
    const EMBED_ONLY: &str = "runtime = \"embed\" only";
    Some(match (key, &php.runtime) {
        ("runtime", runtime) => Shown::of(runtime.name()),
        ("binary", PhpRuntime::Cgi { binary, .. }) => Shown::of(binary),
        ("binary", PhpRuntime::Embed { .. }) => Shown::unset("runtime = \"cgi\" only"),
        (
            "limit_extensions",
            PhpRuntime::Embed {
                limit_extensions, ..
            },
        ) => Shown::of(limit_extensions),
        ("limit_extensions", PhpRuntime::Cgi { any_file: true, .. }) => Shown::of::<[String]>(&[]),
        ("limit_extensions", PhpRuntime::Cgi { .. }) => {
            Shown::unset("runtime = \"embed\" only, or [] for any file")
        }
        ("worker", PhpRuntime::Embed { worker, .. }) => Shown::optional(worker.as_ref()),
        ("worker_boot", PhpRuntime::Embed { boot_in_zygote, .. }) => Shown::of(
            match boot_in_zygote {
                true => WorkerBoot::Zygote,
                false => WorkerBoot::Worker,
            }
            .name(),
        ),
        ("worker" | "worker_boot", PhpRuntime::Cgi { .. }) => Shown::unset(EMBED_ONLY),
        ("admin_ini", PhpRuntime::Embed { admin_ini, .. }) => Shown::Map(admin_ini),
        ("admin_ini", PhpRuntime::Cgi { .. }) => Shown::NoTable(EMBED_ONLY),
        _ => return None,
    })
}

fn show_app<'a>(python: &'a Python, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::of(&format!("{}:{}", python.module, python.callable)))
}

fn show_stop_timeout<'a>(program: &'a Program, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        program.stop_timeout.as_ref(),
        "process_control_timeout",
    ))
}
