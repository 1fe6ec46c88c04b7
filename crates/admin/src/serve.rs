//! `drover serve`: one pool from a command line, as `gunicorn app:app -w 4 -b :8000` or
//! `granian --interface asgi app:app` start one, with no file to write first.
//!
//! The flags become a pool file's TOML (and a `drover.toml` that includes it), which the
//! normal loader reads from memory: every key's checks, errors and defaults are those of a
//! pool file, and an error names the flag that set the key. Then the two files are written
//! to a private folder (under `$XDG_RUNTIME_DIR`, else the temporary folder) and this
//! process execs `drover -c` on them: the daemon stays the one that reads files, a reload
//! (HUP) reads the same files again (a rolling restart onto new code), and `drover ctl set`
//! validates against them as it does for any pool. The folder is named after a hash of the
//! files, so the same command line run again reuses it instead of leaving one more; one of
//! that name that another user made first is left alone, for a fresh one (`claim_folder`).
//!
//! gunicorn's habit for the app's folder: the current directory is the pool's `chdir` and,
//! for Python, first on `sys.path`, so `drover serve --python hello:app` run beside
//! `hello.py` imports it. The environment reaches the workers (`clear_env = false`), and the
//! pool's `virtualenv` is the active one (`$VIRTUAL_ENV`), else the one drover is installed
//! in (`pip install drover` into it), as the venv's gunicorn imports from its own venv;
//! `--set python.virtualenv=DIR` wins over both. `--print` writes the equivalent files
//! instead of running them.
//!
//! And gunicorn's for the user: the app runs as whoever runs `drover serve`, root included
//! (then the pool says `user = "root"`, with one warning line), or as `-u/--user` and
//! `-g/--group`, which only root can switch to.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use drover_config::keys::{KEYS, Section, Type};
use drover_config::{self as config, Config};

/// Where the HTTP listener of a Python pool binds without `--http` (gunicorn's `-b`).
pub const DEFAULT_HTTP: &str = "127.0.0.1:8000";
/// Where a PHP pool listens without `--fastcgi` (php-fpm's `listen`).
pub const DEFAULT_FASTCGI: &str = "127.0.0.1:9000";

const EXIT_INVALID: u8 = 1;
const EXIT_RUNTIME: u8 = 2;

/// `drover serve`: run one pool from flags.
#[derive(clap::Args, Debug, Default, Clone)]
#[command(group(
    clap::ArgGroup::new("app").required(true).args(["python", "asgi", "php", "worker"])
))]
pub struct ServeArgs {
    /// A WSGI app, `module:callable` (as gunicorn takes it), imported from the current
    /// directory.
    #[arg(long, value_name = "APP")]
    pub python: Option<String>,
    /// An ASGI app, `module:callable` (as granian and uvicorn take it).
    #[arg(long, value_name = "APP")]
    pub asgi: Option<String>,
    /// A PHP pool whose scripts are under DOCROOT (its chdir); nginx sends SCRIPT_FILENAME.
    #[arg(long, value_name = "DOCROOT")]
    pub php: Option<PathBuf>,
    /// A PHP worker-mode script (`[php] worker`).
    #[arg(long, value_name = "FILE")]
    pub worker: Option<PathBuf>,
    /// Serve HTTP/1.1 on ADDR (`IP:PORT`, `:PORT` or a bare port for every address, or a
    /// unix socket path); the default for Python apps, on 127.0.0.1:8000.
    #[arg(long, value_name = "ADDR", conflicts_with = "fastcgi")]
    pub http: Option<String>,
    /// Serve FastCGI on SOCKET (a unix socket path or `IP:PORT`), for nginx; the default for
    /// PHP, on 127.0.0.1:9000.
    #[arg(long, value_name = "SOCKET")]
    pub fastcgi: Option<String>,
    /// The number of workers (a static pool); default 1, as gunicorn's.
    #[arg(short = 'w', long = "workers", value_name = "N")]
    pub workers: Option<String>,
    /// Any key of a pool file (or of drover.toml), dotted: `pm.max_requests=1000`,
    /// `python.threads=4`, `env.DEBUG=1`, `shutdown_delay=5s`. Repeatable; later wins.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// The pool's name (its log lines and status say it); default `app`, or `www` for PHP.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Serve `/livez` and `/readyz` on ADDR (drover.toml's `health_listen`).
    #[arg(long, value_name = "ADDR")]
    pub health: Option<String>,
    /// Run the workers as USER (gunicorn's `-u`); drover serve must run as root. Default:
    /// the user running drover serve, root included.
    #[arg(short = 'u', long = "user", value_name = "USER")]
    pub user: Option<String>,
    /// Run the workers with GROUP (gunicorn's `-g`); default: USER's group.
    #[arg(short = 'g', long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// Serve HTTPS on the `--http` listener with the certificate chain in FILE (PEM;
    /// gunicorn's `--certfile`).
    #[arg(long, value_name = "FILE")]
    pub certfile: Option<PathBuf>,
    /// The private key of `--certfile` (PEM; gunicorn's `--keyfile`); default: in the
    /// certificate's file.
    #[arg(long, value_name = "FILE")]
    pub keyfile: Option<PathBuf>,
    /// The CA certificates that client certificates are checked against (gunicorn's
    /// `--ca-certs`).
    #[arg(long = "ca-certs", value_name = "FILE")]
    pub ca_certs: Option<PathBuf>,
    /// Whether clients must show a certificate: `none`, `optional` or `required`
    /// (gunicorn's `--cert-reqs`, which also takes 0, 1 and 2).
    #[arg(long = "cert-reqs", value_name = "WHEN")]
    pub cert_reqs: Option<String>,
    /// Print the equivalent drover.toml and pool file, and exit.
    #[arg(long)]
    pub print: bool,
}

/// The two files a command line stands for, and which flag wrote each key.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub name: String,
    pub global: toml::Table,
    pub pool: toml::Table,
    /// Dotted key path (`pm.max_children`, `health_listen`) → the flag that set it.
    origins: Vec<(String, String)>,
}

/// What `build` needs from the process: where it runs, and the virtualenv of its apps.
#[derive(Debug, Clone)]
pub struct Context {
    pub cwd: PathBuf,
    pub virtualenv: Option<Virtualenv>,
    /// Whether this build knows `[php] worker` (PHP worker mode).
    pub php_worker: bool,
    /// Whether drover serve runs as root (only root can switch users).
    pub root: bool,
}

impl Context {
    pub fn current() -> std::io::Result<Context> {
        Ok(Context {
            cwd: std::env::current_dir()?,
            virtualenv: std::env::var_os("VIRTUAL_ENV")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(Virtualenv::Active)
                .or_else(|| {
                    drover::runtime::python::installed_virtualenv().map(Virtualenv::Installed)
                }),
            php_worker: KEYS
                .iter()
                .any(|k| k.section == Section::Php && k.name == "worker"),
            root: nix::unistd::Uid::effective().is_root(),
        })
    }
}

/// The virtualenv a Python pool of drover serve imports from, when no `--set` names one.
#[derive(Debug, Clone, PartialEq)]
pub enum Virtualenv {
    /// `$VIRTUAL_ENV`: the one the shell activated.
    Active(PathBuf),
    /// The one drover is installed in (its binaries in the virtualenv's `bin/`).
    Installed(PathBuf),
}

impl Virtualenv {
    fn path(&self) -> &Path {
        match self {
            Virtualenv::Active(path) | Virtualenv::Installed(path) => path,
        }
    }

    /// What an error about the key names as its origin.
    fn origin(&self) -> &'static str {
        match self {
            Virtualenv::Active(_) => "$VIRTUAL_ENV",
            Virtualenv::Installed(_) => "the virtualenv drover is installed in",
        }
    }
}

fn string(s: impl Into<String>) -> toml::Value {
    toml::Value::String(s.into())
}

/// A value as `--set` and `-w` take it: TOML (`12`, `"256MiB"`, `true`, `["a", "b"]`), or
/// a bare word read as a string (`--set pm.mode=dynamic`).
fn value(text: &str) -> toml::Value {
    format!("v = {text}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| string(text))
}

/// An address as `listen` reads it (and `:PORT`, as gunicorn's `-b` takes it), with a
/// relative unix path made absolute against `cwd`
/// (the loader would resolve it against the generated drover.toml's folder).
fn address(text: &str, cwd: &Path) -> String {
    // gunicorn's `-b :8000`: every address, which `listen` writes as the bare port.
    if let Some(port) = text.strip_prefix(':')
        && !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
    {
        return port.to_owned();
    }
    let tcp = text.contains(':') || (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()));
    if tcp || text.starts_with('/') {
        text.to_owned()
    } else {
        cwd.join(text).to_string_lossy().into_owned()
    }
}

fn absolute(path: &Path, cwd: &Path) -> String {
    cwd.join(path).to_string_lossy().into_owned()
}

impl Plan {
    /// Sets `path` (dotted) in the file it belongs to, remembering `flag` as its origin.
    fn set(&mut self, path: &str, value: toml::Value, flag: &str) -> Result<(), String> {
        let segments = split(path).ok_or_else(|| format!("{flag}: {path:?} is not a key"))?;
        let first = segments[0].as_str();
        if first == "include" {
            return Err(format!(
                "{flag}: drover serve writes include itself (one pool); write the files for more"
            ));
        }
        let global = KEYS
            .iter()
            .any(|k| k.section.global() && k.section.table().is_empty() && k.name == first);
        let mut table = if global {
            &mut self.global
        } else {
            &mut self.pool
        };
        let (last, parents) = segments.split_last().expect("split gives one at least");
        for parent in parents {
            let entry = table
                .entry(parent.clone())
                .or_insert_with(|| toml::Value::Table(Default::default()));
            table = match entry {
                toml::Value::Table(t) => t,
                _ => return Err(format!("{flag}: {parent} is not a table")),
            };
        }
        table.insert(last.clone(), value);
        self.origins.retain(|(p, _)| p != path);
        self.origins.push((path.to_owned(), flag.to_owned()));
        Ok(())
    }

    /// The flag that set `key` or the table it is in.
    fn origin(&self, key: &str) -> Option<&str> {
        self.origins
            .iter()
            .rev()
            .filter(|(path, _)| {
                key == path
                    || key.starts_with(&format!("{path}."))
                    || path.starts_with(&format!("{key}."))
            })
            .map(|(_, flag)| flag.as_str())
            .next()
    }

    /// The pool file, as `--print` shows it and the daemon reads it.
    pub fn pool_text(&self) -> String {
        toml::to_string(&self.pool).unwrap_or_default()
    }

    pub fn global_text(&self) -> String {
        toml::to_string(&self.global).unwrap_or_default()
    }

    fn pool_file(&self, folder: &Path) -> PathBuf {
        folder.join("pools.d").join(format!("{}.toml", self.name))
    }

    /// Loads the two files from memory, as if they were in `folder`, by the loader that
    /// reads files; errors name the flags.
    pub fn load(&self, folder: &Path) -> Result<Config, Vec<String>> {
        let main = folder.join("drover.toml");
        let texts = BTreeMap::from([
            (main.clone(), self.global_text()),
            (self.pool_file(folder), self.pool_text()),
        ]);
        config::load_texts(&main, &texts).map_err(|errors| {
            errors
                .0
                .iter()
                .map(|e| self.explain(&e.key, &e.rule, e.value.as_deref()))
                .collect()
        })
    }

    /// A loader's error said as the command line's: the flag, the key, the rule.
    fn explain(&self, key: &str, rule: &str, value: Option<&str>) -> String {
        let value = value.map(|v| format!(" (value: {v})")).unwrap_or_default();
        match (key, self.origin(key)) {
            ("", _) if rule.contains("pool name") || rule.contains("named") => {
                format!("--name: {rule}")
            }
            ("", _) => rule.to_owned(),
            (key, Some(flag)) => format!("{flag}: {key}: {rule}{value}"),
            (key, None) => format!("{key}: {rule}{value} (set it with --set {key}=VALUE)"),
        }
    }
}

/// `pm.max_children` → [pm, max_children]; in a map table (`env`, `php.ini`) the rest is
/// one name: `php.ini.opcache.enable` → [php, ini, opcache.enable].
fn split(path: &str) -> Option<Vec<String>> {
    if path.is_empty() || path.starts_with('.') || path.ends_with('.') {
        return None;
    }
    let mut segments = Vec::new();
    let mut rest = path;
    loop {
        let so_far = segments.join(".");
        let is_map =
            !so_far.is_empty() && KEYS.iter().any(|k| k.ty == Type::Map && k.path() == so_far);
        match rest.split_once('.') {
            Some((head, tail)) if !is_map => {
                if head.is_empty() {
                    return None;
                }
                segments.push(head.to_owned());
                rest = tail;
            }
            _ => {
                segments.push(rest.to_owned());
                return Some(segments);
            }
        }
    }
}

/// The keys whose values are paths: a relative one given to `--set` is made absolute
/// against the current directory, as a user typing it there means.
fn is_path_key(path: &str) -> bool {
    KEYS.iter().any(|k| k.ty == Type::Path && k.path() == path)
}

fn is_address_key(path: &str) -> bool {
    matches!(path, "listen" | "status_listen" | "health_listen")
}

/// The files `args` stand for. Pure: reads nothing from the process but `context`.
pub fn build(args: &ServeArgs, context: &Context) -> Result<Plan, String> {
    let cwd = &context.cwd;
    let php = args.php.is_some() || args.worker.is_some();
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| if php { "www" } else { "app" }.to_owned());
    let mut plan = Plan {
        name: name.clone(),
        global: toml::Table::new(),
        pool: toml::Table::new(),
        origins: Vec::new(),
    };
    plan.global.insert(
        "include".into(),
        toml::Value::Array(vec![string(format!("pools.d/{name}.toml"))]),
    );
    // One pool: an app that cannot load leaves nothing to serve, so drover exits 3, as
    // gunicorn does, for the shell or the container's restart policy to see.
    plan.global
        .insert("exit_on_app_failure".into(), toml::Value::Boolean(true));
    let (listen, flag, http) = match (&args.http, &args.fastcgi) {
        (Some(addr), _) => (addr.as_str(), "--http", true),
        (None, Some(socket)) => (socket.as_str(), "--fastcgi", false),
        (None, None) if php => (DEFAULT_FASTCGI, "--fastcgi", false),
        (None, None) => (DEFAULT_HTTP, "--http", true),
    };
    plan.set("listen", string(address(listen, cwd)), flag)?;
    if http {
        plan.set("protocol", string("http"), flag)?;
    }
    plan.set("clear_env", toml::Value::Boolean(false), "drover serve")?;
    if let Some(app) = args.python.as_ref().or(args.asgi.as_ref()) {
        let flag = if args.python.is_some() {
            "--python"
        } else {
            "--asgi"
        };
        plan.set(
            "chdir",
            string(cwd.to_string_lossy()),
            "the current directory",
        )?;
        plan.set("python.app", string(app.clone()), flag)?;
        if args.asgi.is_some() {
            plan.set("python.interface", string("asgi"), flag)?;
        }
        let here = toml::Value::Array(vec![string(cwd.to_string_lossy())]);
        plan.set("python.python_path", here, "the current directory")?;
        if let Some(venv) = &context.virtualenv {
            plan.set(
                "python.virtualenv",
                string(venv.path().to_string_lossy()),
                venv.origin(),
            )?;
        }
    } else if let Some(docroot) = &args.php {
        plan.set("chdir", string(absolute(docroot, cwd)), "--php")?;
        plan.pool
            .insert("php".into(), toml::Value::Table(Default::default()));
        plan.origins.push(("php".into(), "--php".into()));
    } else if let Some(file) = &args.worker {
        if !context.php_worker {
            return Err(
                "--worker: PHP worker mode ([php] worker) is not available in this build of \
                 drover; serve the scripts with --php DOCROOT"
                    .into(),
            );
        }
        plan.set(
            "chdir",
            string(cwd.to_string_lossy()),
            "the current directory",
        )?;
        plan.set("php.worker", string(absolute(file, cwd)), "--worker")?;
    }
    user(&mut plan, args, context)?;
    tls(&mut plan, args, cwd, http)?;
    plan.set("pm.mode", string("static"), "-w")?;
    let workers = args
        .workers
        .as_deref()
        .map_or(toml::Value::Integer(1), value);
    plan.set("pm.max_children", workers, "-w")?;
    if let Some(addr) = &args.health {
        plan.set("health_listen", string(address(addr, cwd)), "--health")?;
    }
    for pair in &args.set {
        let Some((key, text)) = pair.split_once('=') else {
            return Err(format!("--set {pair}: expected KEY=VALUE"));
        };
        let key = key.trim();
        let flag = format!("--set {pair}");
        let text = text.trim();
        let mut parsed = value(text);
        if is_address_key(key) {
            // `9100` is an address (a bare port), not TOML's integer.
            parsed = string(address(text.trim_matches('"'), cwd));
        } else if let toml::Value::String(s) = &parsed
            && is_path_key(key)
            && !s.is_empty()
            && s != "stderr"
        {
            parsed = string(absolute(Path::new(s), cwd));
        }
        plan.set(key, parsed, &flag)?;
    }
    Ok(plan)
}

/// `user` and `group` as gunicorn's `-u` and `-g` mean them: the pool runs as the user
/// running drover serve unless told otherwise, root included (a pool file must say
/// `user = "root"` for that; here the command line is the saying), and only root can be
/// told otherwise.
fn user(plan: &mut Plan, args: &ServeArgs, context: &Context) -> Result<(), String> {
    let flags = [("user", "-u", &args.user), ("group", "-g", &args.group)];
    if !context.root {
        if let Some((_, flag, _)) = flags.iter().find(|(_, _, value)| value.is_some()) {
            return Err(format!(
                "{flag}: drover serve is not running as root, so its workers cannot switch \
                 users: they run as the user running it (start it as root to use {flag})"
            ));
        }
        return Ok(());
    }
    match &args.user {
        Some(name) => plan.set("user", string(name.clone()), "-u")?,
        None => plan.set("user", string("root"), "drover serve run as root")?,
    }
    if let Some(name) = &args.group {
        plan.set("group", string(name.clone()), "-g")?;
    }
    Ok(())
}

/// gunicorn's TLS flags: the pool's keys of the same names, paths made absolute against
/// the current directory. The loader reads and checks the files, and its errors name the
/// flag; here only what the loader cannot know: TLS is for the `--http` listener.
fn tls(plan: &mut Plan, args: &ServeArgs, cwd: &Path, http: bool) -> Result<(), String> {
    let paths = [
        ("certfile", "--certfile", &args.certfile),
        ("keyfile", "--keyfile", &args.keyfile),
        ("ca_certs", "--ca-certs", &args.ca_certs),
    ];
    let given = paths
        .iter()
        .find(|(_, _, path)| path.is_some())
        .map(|(_, flag, _)| *flag)
        .or(args.cert_reqs.as_ref().map(|_| "--cert-reqs"));
    if let Some(flag) = given
        && !http
    {
        return Err(format!(
            "{flag}: TLS is served on the --http listener only (a FastCGI listener's client \
             is the web server in front, which terminates TLS)"
        ));
    }
    for (key, flag, path) in paths {
        if let Some(path) = path {
            plan.set(key, string(absolute(path, cwd)), flag)?;
        }
    }
    if let Some(when) = &args.cert_reqs {
        // gunicorn's `--cert-reqs 2` is ssl.CERT_REQUIRED's number.
        let when = match when.as_str() {
            "0" => "none",
            "1" => "optional",
            "2" => "required",
            other => other,
        };
        plan.set("cert_reqs", string(when), "--cert-reqs")?;
    }
    Ok(())
}

/// A machine check's problem (`FILE: KEY: why`, [`drover::runtime::check`]) said as the
/// command line's: the flag that set the key instead of the file drover serve wrote.
fn explain_problem(plan: &Plan, folder: &Path, problem: &str) -> String {
    let file = plan.pool_file(folder);
    let Some(rest) = problem.strip_prefix(&format!("{}: ", file.display())) else {
        return problem.to_owned();
    };
    match rest.split_once(": ") {
        Some((key, why)) => match plan.origin(key) {
            Some(flag) => format!("{flag}: {why}"),
            None => format!("{key}: {why} (set it with --set {key}=VALUE)"),
        },
        None => rest.to_owned(),
    }
}

/// The private folder the files go to: the same for the same files, so that a command run
/// again reuses it.
fn folder_for(plan: &Plan) -> PathBuf {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    (plan.global_text(), plan.pool_text(), &plan.name).hash(&mut hasher);
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .unwrap_or_else(std::env::temp_dir);
    let uid = nix::unistd::Uid::effective();
    base.join(format!("drover-serve-{uid}-{:016x}", hasher.finish()))
}

/// Creates `folder` (0700) or checks that the one there is ours and private: in a shared
/// temporary folder, another user's folder of the same name must not be written into.
/// `Ok(false)`: something else has the name.
fn private_folder(folder: &Path) -> std::io::Result<bool> {
    match std::fs::DirBuilder::new().mode(0o700).create(folder) {
        Ok(()) => return Ok(true),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(err) => return Err(err),
    }
    let meta = std::fs::symlink_metadata(folder)?;
    let ours = meta.uid() == nix::unistd::Uid::effective().as_raw();
    Ok(meta.is_dir() && ours && meta.permissions().mode() & 0o077 == 0)
}

/// The folder the files go to: `preferred` ([`folder_for`]) when it is made now or is a
/// private folder of this user; else, since its name follows from the command line and
/// another local user may have made it first, a fresh one beside it with a random suffix,
/// made here (0700), so that the files are never written where someone else can change
/// them and `drover serve` still starts.
fn claim_folder(preferred: &Path) -> std::io::Result<PathBuf> {
    if private_folder(preferred)? {
        return Ok(preferred.to_path_buf());
    }
    for _ in 0..16 {
        let mut name = preferred.as_os_str().to_owned();
        name.push(format!("-{:08x}", rand::random::<u32>()));
        let fresh = PathBuf::from(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&fresh) {
            Ok(()) => {
                eprintln!(
                    "drover serve: {} is not a private folder of this user; the files go to {}",
                    preferred.display(),
                    fresh.display()
                );
                return Ok(fresh);
            }
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(std::io::Error::other(format!(
        "{} is not a private folder of this user, and no fresh name beside it was free",
        preferred.display()
    )))
}

/// Writes `text` to `path` by a rename, so that a drover reading it never sees half.
fn write(path: &Path, text: &str) -> std::io::Result<()> {
    let staged = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&staged, text)?;
    std::fs::rename(&staged, path)
}

fn header(args: &[String]) -> String {
    format!(
        "# Written by `drover serve {}`.\n",
        args.iter()
            .map(|a| if a.contains(' ') {
                format!("'{a}'")
            } else {
                a.clone()
            })
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Runs `drover serve`: builds and checks the files, then prints them (`--print`) or execs
/// the daemon on them. Returns only on an error (or after `--print`).
pub fn run(args: ServeArgs, argv: &[String]) -> u8 {
    let context = match Context::current() {
        Ok(context) => context,
        Err(err) => {
            eprintln!("drover serve: cannot read the current directory: {err}");
            return EXIT_RUNTIME;
        }
    };
    let plan = match build(&args, &context) {
        Ok(plan) => plan,
        Err(message) => {
            eprintln!("drover serve: {message}");
            return EXIT_INVALID;
        }
    };
    let folder = folder_for(&plan);
    let config = match plan.load(&folder) {
        Ok(config) => config,
        Err(errors) => {
            for error in errors {
                eprintln!("drover serve: {error}");
            }
            return EXIT_INVALID;
        }
    };
    let problems = drover::runtime::check(&config);
    if !problems.is_empty() {
        for problem in problems {
            eprintln!(
                "drover serve: {}",
                explain_problem(&plan, &folder, &problem)
            );
        }
        return EXIT_INVALID;
    }
    if context.root && args.user.is_none() && !args.print {
        eprintln!(
            "drover serve: running as root, so the app runs as root (-u USER runs it as another user)"
        );
    }
    let header = header(argv);
    if args.print {
        let extra = plan.global.len() > 1;
        if extra {
            print!("# drover.toml\n{header}{}\n", plan.global_text());
            println!("# pools.d/{}.toml", plan.name);
        }
        print!("{header}{}", plan.pool_text());
        return 0;
    }
    let folder = match claim_folder(&folder) {
        Ok(folder) => folder,
        Err(err) => {
            eprintln!("drover serve: cannot make a folder for the configuration: {err}");
            return EXIT_RUNTIME;
        }
    };
    let written = private_folder(&folder.join("pools.d"))
        .and_then(|private| {
            if private {
                Ok(())
            } else {
                Err(std::io::Error::other("pools.d is not a private folder"))
            }
        })
        .and_then(|()| {
            write(
                &plan.pool_file(&folder),
                &(header.clone() + &plan.pool_text()),
            )
        })
        .and_then(|()| {
            write(
                &folder.join("drover.toml"),
                &(header.clone() + &plan.global_text()),
            )
        });
    if let Err(err) = written {
        eprintln!(
            "drover serve: cannot write the configuration to {}: {err}",
            folder.display()
        );
        return EXIT_RUNTIME;
    }
    let (daemon, err) = exec_daemon(&folder.join("drover.toml"));
    eprintln!("drover serve: cannot run {}: {err}", daemon.display());
    EXIT_RUNTIME
}

/// Replaces this process with the `drover` daemon beside it, on `config`, in the one form
/// of the flag the daemon always reads (`--config=FILE`), `argv[0]` kept. Returns only when
/// the exec failed: the daemon's path and why.
pub fn exec_daemon(config: &Path) -> (PathBuf, std::io::Error) {
    let daemon = drover::runtime::zygote::beside_drover("drover");
    let mut flag = std::ffi::OsString::from("--config=");
    flag.push(config);
    let argv0 = std::env::args_os()
        .next()
        .unwrap_or_else(|| "drover".into());
    let err = std::process::Command::new(&daemon)
        .arg0(argv0)
        .arg(flag)
        .exec();
    (daemon, err)
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
