//! The runtime tables of a pool: exactly one of `[php]`, `[python]`, `[command]`.
//!
//! A `[php]` table's default runtime depends on the machine: drover-php when it can run PHP
//! here, else php-cgi. That one fact is asked of `runtime::php::embed`, which knows how to
//! ask drover-php; every other rule here reads only the files (and the programs they name).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use toml::de::DeValue;

use super::choices::{PhpProgram, WorkerBoot};
use super::env::exec_string_rule;
use super::keys::{self, Flavour, Section};
use super::model::{
    Command, CommandGiven, Interface, Php, PhpGiven, PhpRuntime, Python, PythonGiven, Runtime,
};
use super::value::{Got, Table, find_executable, resolve};

const RUNTIMES: &[&str] = &["php", "python", "command", "program"];

/// php-fpm's default `security.limit_extensions`.
pub const DEFAULT_LIMIT_EXTENSIONS: [&str; 1] = [".php"];

/// The pool's runtime, and which of the [`Flavour`]s the key rules tell apart it is: known
/// from the table's `runtime` or `interface` even when another of its keys is wrong, so
/// that the rules of the pool's other keys still apply; `None` without exactly one runtime.
pub(super) fn parse(root: &Table<'_, '_>, base: &Path) -> (Option<Runtime>, Option<Flavour>) {
    let present: Vec<&str> = RUNTIMES
        .iter()
        .copied()
        .filter(|k| root.contains(k))
        .collect();
    let Some(first) = present.first() else {
        root.source.report(
            0,
            "",
            None,
            "no runtime: add one of [php], [python], [command] or [program]",
        );
        return (None, None);
    };
    for extra in &present[1..] {
        root.fail(
            extra,
            format!("a pool has one runtime and this one already has [{first}]"),
        );
    }
    // Every table present is checked, so a second runtime's own mistakes show up too.
    let parsed: Vec<(Option<Runtime>, Option<Flavour>)> = present
        .iter()
        .map(|&name| {
            let Some(table) = root.table(name).required(root, name) else {
                return (None, None);
            };
            match name {
                "php" => php(&table, base),
                "python" => python(&table, base),
                "program" => (
                    super::program::parse(&table, base).map(Runtime::Program),
                    Some(Flavour::Program),
                ),
                _ => (
                    command(&table, base).map(Runtime::Command),
                    Some(Flavour::Command),
                ),
            }
        })
        .collect();
    if present.len() > 1 {
        return (None, None);
    }
    parsed.into_iter().next().unwrap_or((None, None))
}

fn php(t: &Table<'_, '_>, base: &Path) -> (Option<Runtime>, Option<Flavour>) {
    t.check_keys(&keys::names(Section::Php));
    let choice = php_runtime(t);
    let flavour = choice.as_ref().map(|choice| match choice {
        Chosen::Embed => Flavour::Embed,
        Chosen::Cgi(_) => Flavour::Cgi,
    });
    keys::refuse_by_runtime(t, Section::Php, flavour, false);
    (php_with(t, base, choice).map(Runtime::Php), flavour)
}

/// The rest of a `[php]` table, for the runtime it chose (`None`: `runtime` is invalid;
/// the other keys are still checked).
fn php_with(t: &Table<'_, '_>, base: &Path, choice: Option<Chosen>) -> Option<Php> {
    let ini_file = t.parse("ini_file", |s| ini_file(base, s)).optional();
    let ini = ini_table(t, "ini");
    let admin_ini = ini_table(t, "admin_ini");
    let limit_extensions = limit_extensions(t);
    let runtime = match choice? {
        Chosen::Embed => {
            for key in ["ini", "admin_ini"] {
                if let Got::Valid(table) = t.table(key) {
                    refuse_unhonoured(&table, "");
                }
            }
            let worker = t.parse("worker", |s| worker_script(base, s)).optional();
            let boot = t
                .value("worker_boot")
                .map(|boot: WorkerBoot| boot == WorkerBoot::Zygote);
            if boot == Some(true) && matches!(worker, Some(None)) {
                t.fail(
                    "worker_boot",
                    "worker_boot is where a worker script boots: set [php] worker too",
                );
            }
            PhpRuntime::Embed {
                admin_ini: admin_ini?,
                limit_extensions: limit_extensions?
                    .unwrap_or_else(|| DEFAULT_LIMIT_EXTENSIONS.map(str::to_owned).into()),
                worker: worker?,
                boot_in_zygote: boot?,
            }
        }
        Chosen::Cgi(why) => {
            let needs_embed = |key: &str, what: &str| {
                t.fail(
                    key,
                    format!(
                        "php-cgi cannot enforce it ({what}); it needs runtime = \"embed\" \
                         (drover-php){why}"
                    ),
                );
            };
            if admin_ini.as_ref().is_some_and(|ini| !ini.is_empty()) {
                needs_embed("admin_ini", "a script may change any value with ini_set");
            }
            // [] is what php-cgi does: any file may run.
            let any_file = matches!(&limit_extensions, Some(Some(written)) if written.is_empty());
            if let Some(Some(written)) = &limit_extensions
                && !any_file
                && written
                    .iter()
                    .map(String::as_str)
                    .ne(DEFAULT_LIMIT_EXTENSIONS)
            {
                needs_embed(
                    "limit_extensions",
                    "it runs whichever script the web server names",
                );
            }
            if let Some(ini) = &ini
                && !any_file
                && let Some(walk) = runs_other_files(ini)
            {
                t.fail(
                    "ini",
                    format!(
                        "{walk}, and php-cgi cannot check limit_extensions (so drover runs it \
                         with cgi.fix_pathinfo = 0 and cgi.discard_path = 1): remove the \
                         setting, or write limit_extensions = [] to let any file run, or \
                         use runtime = \"embed\" (drover-php), which checks \
                         limit_extensions{why}"
                    ),
                );
            }
            let binary = t.string("binary").or("php-cgi").and_then(|name| {
                find_executable(base, name)
                    .map_err(|why| t.fail("binary", format!("php binary not found: {why}")))
                    .ok()
            });
            PhpRuntime::Cgi {
                binary: binary?,
                any_file,
            }
        }
    };
    Php::read(
        t,
        PhpGiven {
            runtime: Some(runtime),
            ini_file,
            ini,
        },
    )
}

/// Why php-cgi, with the pool's `[php.ini]`, would run a file other than the script the
/// web server names, so that an upload (`/uploads/evil.jpg/x.php`, nginx without
/// `try_files`) runs as PHP: `cgi.fix_pathinfo` on (php-cgi walks up the path to the
/// .jpg), or `cgi.discard_path` off (with `cgi.fix_pathinfo = 0`, php-cgi runs a
/// `PATH_TRANSLATED` the web server sends, document root + path info). `None` when
/// neither is written so.
fn runs_other_files(ini: &BTreeMap<String, String>) -> Option<String> {
    let value = |name: &str| ini.get(name).map(|v| php_bool(v));
    if value("cgi.fix_pathinfo") == Some(true) {
        return Some(
            "[php.ini] cgi.fix_pathinfo on lets php-cgi run any file up the path \
             (/uploads/evil.jpg/x.php runs evil.jpg)"
                .to_owned(),
        );
    }
    if value("cgi.discard_path") == Some(false) {
        return Some(
            "[php.ini] cgi.discard_path off lets php-cgi run the PATH_TRANSLATED the web \
             server sends (/index.php/uploads/evil.jpg runs evil.jpg)"
                .to_owned(),
        );
    }
    None
}

/// A boolean setting as PHP reads it (`zend_ini_parse_bool`): "true", "yes", "on" in any
/// case, else a number other than 0 (`atoi`: leading digits, "" and words are 0).
fn php_bool(text: &str) -> bool {
    let t = text.trim();
    if ["true", "yes", "on"]
        .iter()
        .any(|w| t.eq_ignore_ascii_case(w))
    {
        return true;
    }
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].bytes().any(|b| b != b'0')
}

/// php-fpm's SAPI settings that drover-php registers (so that `ini_get()` reads them)
/// but does not act on, each with the value that is php-fpm's behaviour too, and why a
/// pool may not set another: accepted, it would change nothing.
const UNHONOURED: [(&str, &str, &str); 3] = [
    (
        "cgi.rfc2616_headers",
        "0",
        "drover-php sends a response's status as a Status: header (php-fpm's default, 0); \
         an HTTP status line is not sent",
    ),
    (
        "cgi.nph",
        "0",
        "drover-php sends Status: only when it is not 200 (php-fpm's default, 0)",
    ),
    (
        "fastcgi.error_header",
        "",
        "drover-php answers a fatal error with PHP's 500; another status line is not sent",
    ),
];

/// Refuses, in a drover-php pool's `[php.ini]` or `[php.admin_ini]` (`table`, whose dotted
/// names so far are `prefix`), a value of an [`UNHONOURED`] setting other than the one
/// drover-php behaves as.
fn refuse_unhonoured(table: &Table<'_, '_>, prefix: &str) {
    for (key, value) in table.entries() {
        let name = format!("{prefix}{}", key.get_ref());
        let text = match value.get_ref() {
            DeValue::Table(_) => {
                if let Got::Valid(inner) = table.table(key.get_ref()) {
                    refuse_unhonoured(&inner, &format!("{name}."));
                }
                continue;
            }
            DeValue::String(s) => s.to_string(),
            DeValue::Boolean(b) => if *b { "1" } else { "0" }.to_owned(),
            DeValue::Integer(n) => n.as_str().to_owned(),
            _ => continue,
        };
        let off = |t: &str| {
            matches!(
                t.to_ascii_lowercase().as_str(),
                "0" | "off" | "false" | "no" | ""
            )
        };
        if let Some((_, default, why)) = UNHONOURED.iter().find(|(n, _, _)| *n == name)
            && !(text == *default || (default == &"0" && off(&text)))
        {
            table.fail(
                key.get_ref(),
                format!("drover-php does not honour {name}: {why}; remove it"),
            );
        }
    }
}

/// The runtime a `[php]` table asks for or defaults to.
enum Chosen {
    Embed,
    /// php-cgi, and why when it was not asked for by name (for the messages that refuse
    /// what only drover-php enforces): `" (this pool runs php-cgi because ...)"`.
    Cgi(String),
}

/// `runtime`: as written, else php-cgi for a pool that names its `binary` (a file written
/// for php-cgi keeps running it), else drover-php when it can run PHP here, else php-cgi.
/// drover-php is asked only when it matters, through the probe the loading program gave
/// ([`super::host`]).
fn php_runtime(t: &Table<'_, '_>) -> Option<Chosen> {
    Some(match t.optional("runtime")? {
        Some(PhpProgram::Embed) => {
            if let Err(why) = super::host::php_usable() {
                t.fail("runtime", format!("drover-php is not usable here: {why}"));
            }
            Chosen::Embed
        }
        Some(PhpProgram::Cgi) => Chosen::Cgi(String::new()),
        None if t.contains("binary") => {
            Chosen::Cgi(" (this pool runs php-cgi because it names a binary)".into())
        }
        None => match super::host::php_usable() {
            Ok(_) => Chosen::Embed,
            Err(why) => Chosen::Cgi(format!(
                " (this pool runs php-cgi because drover-php is not usable here: {why})"
            )),
        },
    })
}

/// `ini_file`: an existing file, so that a typo is not PHP quietly running without one.
fn ini_file(base: &Path, s: &str) -> Result<PathBuf, String> {
    let path = resolve(base, s)?;
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(format!("{} is not a file", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `worker`: worker mode's script, an existing regular file the pool's user will read.
fn worker_script(base: &Path, s: &str) -> Result<PathBuf, String> {
    let path = resolve(base, s)?;
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => Ok(path),
        Ok(_) => Err(format!("{} is not a file", path.display())),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// `[php.ini]` or `[php.admin_ini]`: empty when absent, `None` when invalid.
fn ini_table(t: &Table<'_, '_>, key: &str) -> Option<BTreeMap<String, String>> {
    match t.table(key) {
        Got::Absent => Some(BTreeMap::new()),
        Got::Invalid => None,
        Got::Valid(ini) => php_ini(&ini),
    }
}

/// `limit_extensions`: `Some(None)` when absent, `None` when invalid. Each entry is a
/// suffix with its dot (php-fpm compares the end of the script's name, so `"php"` would
/// also let `x.notphp` run), passed on space-separated.
fn limit_extensions(t: &Table<'_, '_>) -> Option<Option<Vec<String>>> {
    let items = t.strings("limit_extensions").optional()?;
    let Some(items) = items else {
        return Some(None);
    };
    let mut valid = true;
    let mut out = Vec::with_capacity(items.len());
    for (s, span) in items {
        let good = s.len() > 1
            && s.starts_with('.')
            && !s
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '/');
        if good {
            out.push(s.to_owned());
        } else {
            t.fail_at(
                "limit_extensions",
                span,
                "an extension with its dot and no space or slash, like \".php\"",
            );
            valid = false;
        }
    }
    valid.then_some(Some(out))
}

/// Every value becomes the string of php-cgi's `-d name=value` or drover-php's
/// `--ini name=value`. A dotted key left
/// unquoted (`opcache.enable = 1`) parses as a nested table; it is flattened back to the
/// php.ini name rather than refused.
fn php_ini(t: &Table<'_, '_>) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut valid = true;
    let mut stack = vec![(String::new(), t.clone())];
    while let Some((prefix, table)) = stack.pop() {
        for (key, value) in table.entries() {
            let name = format!("{prefix}{}", key.get_ref());
            let text = match value.get_ref() {
                DeValue::String(s) => s.to_string(),
                DeValue::Integer(n) => match i64::from_str_radix(n.as_str(), n.radix()) {
                    Ok(n) => n.to_string(),
                    Err(_) => n.to_string(),
                },
                DeValue::Boolean(b) => if *b { "1" } else { "0" }.to_owned(),
                DeValue::Table(_) => {
                    if let Got::Valid(inner) = table.table(key.get_ref()) {
                        stack.push((format!("{name}."), inner));
                    }
                    continue;
                }
                other => {
                    let rule = format!(
                        "expected a string, integer or boolean, found {}",
                        other.type_str()
                    );
                    table.fail(key.get_ref(), rule);
                    valid = false;
                    continue;
                }
            };
            // The runtime gets it as one argument, `name=text`.
            if let Some(rule) = exec_string_rule(name.len() + 1 + text.len()) {
                table.fail(key.get_ref(), rule);
                valid = false;
            }
            out.insert(name, text);
        }
    }
    valid.then_some(out)
}

fn python(t: &Table<'_, '_>, base: &Path) -> (Option<Runtime>, Option<Flavour>) {
    t.check_keys(&keys::names(Section::Python));
    let interface: Option<Interface> = t.value("interface");
    let flavour = interface.map(|interface| match interface {
        Interface::Wsgi => Flavour::Wsgi,
        Interface::Asgi => Flavour::Asgi,
    });
    (
        python_with(t, base, interface).map(Runtime::Python),
        flavour,
    )
}

/// The rest of a `[python]` table, with its `interface` read (`None`: invalid).
fn python_with(t: &Table<'_, '_>, base: &Path, interface: Option<Interface>) -> Option<Python> {
    let app = t.parse("app", app).required(t, "app");
    let python_path = match t.strings("python_path") {
        Got::Absent => Some(Vec::new()),
        Got::Invalid => None,
        Got::Valid(items) => {
            let mut paths = Vec::new();
            for (s, span) in items {
                match resolve(base, s) {
                    Ok(p) => paths.push(p),
                    Err(rule) => t.fail_at("python_path", span, rule),
                }
            }
            Some(paths)
        }
    };
    let virtualenv = t
        .parse("virtualenv", |s| {
            let path = resolve(base, s)?;
            match std::fs::metadata(&path) {
                Ok(m) if m.is_dir() => Ok(path),
                Ok(_) => Err("not a directory".into()),
                Err(e) => Err(format!("cannot use {}: {e}", path.display())),
            }
        })
        .optional();
    let preload = t.value("preload");
    let threads: Option<u32> = t.value("threads");
    if interface == Some(Interface::Asgi) && threads.is_some_and(|n| n > 1) {
        t.fail(
            "threads",
            "not with interface = \"asgi\": an ASGI worker's event loop serves many requests \
             at once already; leave threads out",
        );
    }
    let mount = t.parse("mount", mount).or(String::new());
    let warmup = match t.strings("warmup") {
        Got::Absent => Some(Vec::new()),
        Got::Invalid => None,
        Got::Valid(items) => {
            let mut paths = Vec::new();
            for (s, span) in items {
                match warmup_path(s) {
                    Ok(()) => paths.push(s.to_string()),
                    Err(rule) => t.fail_at("warmup", span, rule),
                }
            }
            Some(paths)
        }
    };
    if preload == Some(false) && warmup.as_ref().is_some_and(|w| !w.is_empty()) {
        t.fail(
            "warmup",
            "needs preload = true: the requests are sent to the app the zygote loaded",
        );
    }
    let hooks = t.parse("hooks", |s| hooks(base, s)).optional();
    if interface == Some(Interface::Asgi) && warmup.as_ref().is_some_and(|w| !w.is_empty()) {
        t.fail(
            "warmup",
            "not with interface = \"asgi\": warm-up requests are sent through a WSGI app",
        );
    }
    let (module, callable) = app?;
    Python::read(
        t,
        PythonGiven {
            module: Some(module),
            callable: Some(callable),
            python_path,
            virtualenv,
            preload,
            mount,
            warmup,
            hooks,
            interface,
            threads,
        },
    )
}

/// `hooks`: a module name ("myapp.hooks"), or a path to a .py file (a gunicorn.conf.py),
/// made absolute and checked to be a file. A path is anything with a `/` or ending in
/// `.py`, as gunicorn tells its config file from a module.
fn hooks(base: &Path, s: &str) -> Result<String, String> {
    if s.contains('/') || s.ends_with(".py") {
        let path = resolve(base, s)?;
        return match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => Ok(path.display().to_string()),
            Ok(_) => Err(format!("{} is not a file", path.display())),
            Err(e) => Err(format!("cannot use {}: {e}", path.display())),
        };
    }
    let identifier = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
            && chars.all(|c| c == '_' || c.is_alphanumeric())
    };
    if !s.split('.').all(identifier) {
        return Err(
            "expected a module (\"myapp.hooks\") or a path to a .py file \
             (\"/etc/myapp/gunicorn.conf.py\")"
                .into(),
        );
    }
    Ok(s.to_owned())
}

/// A `warmup` entry: a request path with an optional query, as a client sends it.
fn warmup_path(s: &str) -> Result<(), String> {
    if !s.starts_with('/') {
        return Err("a request path starting with \"/\"".into());
    }
    if s.bytes()
        .any(|b| b.is_ascii_control() || b == b' ' || b == b'#')
    {
        return Err("a request path without spaces, control characters or \"#\"".into());
    }
    Ok(())
}

/// `package.module:callable` or `package.module:factory(literal, key=literal)` → (module,
/// what follows the `:`), which defaults to `application`; the factory call is checked as
/// gunicorn checks it ([`super::python_app`]).
fn app(s: &str) -> Result<(String, String), String> {
    let (module, callable) = s.split_once(':').unwrap_or((s, "application"));
    let identifier = |s: &str| {
        let mut chars = s.chars();
        chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
            && chars.all(|c| c == '_' || c.is_alphanumeric())
    };
    if !module.split('.').all(identifier) {
        return Err(
            "expected \"package.module:callable\" or \"package.module:factory(args)\", \
             like \"myapp.wsgi:application\" or \"myapp:create_app('prod')\""
                .into(),
        );
    }
    super::python_app::check_callable(callable)
        .map_err(|rule| format!("after \"{module}:\": {rule}"))?;
    Ok((module.to_owned(), callable.trim().to_owned()))
}

fn mount(s: &str) -> Result<String, String> {
    if !s.is_empty() && (!s.starts_with('/') || s.ends_with('/')) {
        return Err("must be \"\" or start with / and not end with / (like \"/app\")".into());
    }
    Ok(s.to_owned())
}

fn command(t: &Table<'_, '_>, base: &Path) -> Option<Command> {
    t.check_keys(&keys::names(Section::Command));
    let items = t.strings("argv").required(t, "argv")?;
    let Some((program, span)) = items.first().cloned() else {
        t.fail(
            "argv",
            "must name a program: argv = [\"/usr/sbin/fcgiwrap\"]",
        );
        return None;
    };
    let program = match find_executable(base, program) {
        Ok(path) => path.to_string_lossy().into_owned(),
        Err(why) => {
            t.fail_at("argv", span, format!("command not found: {why}"));
            return None;
        }
    };
    let argv = std::iter::once(program).chain(items[1..].iter().map(|(s, _)| s.to_string()));
    Command::read(
        t,
        CommandGiven {
            argv: Some(argv.collect()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_defaults_the_callable() {
        assert_eq!(
            app("myapp.wsgi"),
            Ok(("myapp.wsgi".into(), "application".into()))
        );
        assert_eq!(
            app("myapp.wsgi:app"),
            Ok(("myapp.wsgi".into(), "app".into()))
        );
        assert!(app("myapp.wsgi:").is_err());
        assert!(app("my-app:app").is_err());
    }

    #[test]
    fn mount_is_empty_or_a_slash_prefix() {
        assert!(mount("").is_ok());
        assert!(mount("/app").is_ok());
        assert!(mount("app").is_err());
        assert!(mount("/app/").is_err());
        assert!(mount("/").is_err());
    }

    #[test]
    fn executables_are_paths_or_found_on_path() {
        let base = Path::new("/");
        assert_eq!(
            find_executable(base, "/bin/sh"),
            Ok(PathBuf::from("/bin/sh"))
        );
        assert!(find_executable(base, "/nonexistent/php-cgi").is_err());
        assert!(
            find_executable(base, "/etc/passwd")
                .unwrap_err()
                .contains("not an executable")
        );
        assert!(find_executable(base, "sh").is_ok());
        assert!(
            find_executable(base, "no-such-program-here")
                .unwrap_err()
                .contains("PATH")
        );
    }
}
