//! `drover import`: the configuration of the server drover replaces, turned into drover's
//! files, with a report of every setting not carried over as written.
//!
//! - [`phpfpm`]: php-fpm.conf and pool `.conf` files (their INI dialect is `ini`'s) to
//!   `drover.toml` and `pools.d/NAME.toml`.
//! - [`gunicorn`]: a gunicorn command line and `gunicorn.conf.py` (evaluated by
//!   `drover-python --read-gunicorn-config`, since it is Python) to a Python pool, plus the
//!   nginx change from `proxy_pass` to `fastcgi_pass`.
//! - [`supervisord`]: supervisord's `[program:x]` sections to background pools
//!   (`[program]`, docs/programs.md).
//!
//! Each importer has a pure mapping (text or settings in, [`doc::Doc`]s and [`Note`]s out)
//! and a thin shell here that reads, writes (never over an existing file without
//! `--force`, never outside the `-o` folder: `write`), prints the report, and checks the
//! written files as `drover -t` does. A name that cannot be a pool file's (`name`) stops
//! the import with every such name listed, before anything is written.

pub mod doc;
pub mod gunicorn;
mod ini;
mod name;
pub mod phpfpm;
pub mod supervisord;
mod write;

use std::path::{Path, PathBuf};

/// Turn another server's configuration into drover's files.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(subcommand)]
    pub from: From,
}

#[derive(clap::Subcommand, Debug)]
pub enum From {
    /// php-fpm.conf and/or pool .conf files (with their includes): writes drover.toml and
    /// pools.d/NAME.toml.
    #[command(name = "php-fpm")]
    PhpFpm(PhpFpmArgs),
    /// A gunicorn command line (flags, -c gunicorn.conf.py, then the app): writes
    /// drover.toml and pools.d/NAME.toml, and prints the nginx change.
    Gunicorn(GunicornArgs),
    /// supervisord.conf and/or program .conf files (with their [include] files): writes
    /// drover.toml and a background pool, pools.d/NAME.toml, per `[program:NAME]`.
    Supervisord(SupervisordArgs),
}

#[derive(clap::Args, Debug)]
pub struct SupervisordArgs {
    #[command(flatten)]
    pub output: Output,
    /// supervisord.conf and/or files of `[program:x]` sections.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Where the files go.
#[derive(clap::Args, Debug)]
pub struct Output {
    /// The folder to write drover.toml and pools.d/ into.
    #[arg(short = 'o', long = "output", default_value = ".")]
    pub dir: PathBuf,
    /// Replace files that already exist (by default the import refuses, and writes nothing).
    #[arg(long)]
    pub force: bool,
}

#[derive(clap::Args, Debug)]
pub struct PhpFpmArgs {
    #[command(flatten)]
    pub output: Output,
    /// php-fpm's prefix (its -p): relative include= paths resolve against it. Default: the
    /// folder of the including file.
    #[arg(short = 'p', long = "prefix")]
    pub prefix: Option<PathBuf>,
    /// php-fpm.conf and/or pool .conf files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct GunicornArgs {
    #[command(flatten)]
    pub output: Output,
    /// gunicorn's own arguments, as you run it: [-c gunicorn.conf.py] [FLAGS...] APP.
    #[arg(
        required = true,
        allow_hyphen_values = true,
        trailing_var_arg = true,
        value_name = "GUNICORN ARGS"
    )]
    pub args: Vec<String>,
}

/// One setting that was not carried over as written, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// `FILE:LINE`, or the command-line flag.
    pub place: String,
    /// The setting as written: `listen.acl_users = www-data`, `--threads 4`.
    pub setting: String,
    pub why: String,
}

impl Note {
    pub fn new(place: &impl std::fmt::Display, setting: &str, why: &str) -> Note {
        Note {
            place: place.to_string(),
            setting: setting.to_owned(),
            why: why.to_owned(),
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: {}", self.place, self.setting, self.why)
    }
}

const EXIT_OK: u8 = 0;
const EXIT_FAILED: u8 = 1;

/// Runs `drover import ...`; the exit code: 0 written and valid, 1 otherwise.
pub fn run(args: ImportArgs) -> u8 {
    match args.from {
        From::PhpFpm(args) => php_fpm(args),
        From::Gunicorn(args) => gunicorn::run(args),
        From::Supervisord(args) => supervisord_files(args),
    }
}

fn supervisord_files(args: SupervisordArgs) -> u8 {
    let context = supervisord::Context::of_this_machine();
    let read = match supervisord::read(&args.files, &context) {
        Ok(read) => read,
        Err(e) => {
            eprintln!("drover import: {e}");
            return EXIT_FAILED;
        }
    };
    let import = supervisord::map(&read, &context);
    if refuse(&import.refused) {
        return EXIT_FAILED;
    }
    if import.pools.is_empty() {
        print_report(&import.report);
        eprintln!(
            "drover import: no [program:NAME] section in {}; nothing written",
            shown(&args.files)
        );
        return EXIT_FAILED;
    }
    let files = global_and_pools(&import.global, &import.pools);
    finish(&args.output, &files, &import.report, None)
}

fn php_fpm(args: PhpFpmArgs) -> u8 {
    let items = match phpfpm::read(&args.files, args.prefix.as_deref()) {
        Ok(items) => items,
        Err(e) => {
            eprintln!("drover import: {e}");
            return EXIT_FAILED;
        }
    };
    // Debian's php-fpm loads the php.ini of its configuration folder, beside php-fpm.conf.
    let php_ini = args
        .files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "php-fpm.conf"))
        .filter_map(|f| std::path::absolute(f.with_file_name("php.ini")).ok())
        .find(|ini| ini.is_file());
    let import = phpfpm::map(&items, &phpfpm::Context { php_ini });
    if refuse(&import.refused) {
        return EXIT_FAILED;
    }
    if import.pools.is_empty() {
        print_report(&import.report);
        eprintln!(
            "drover import: no pool section ([www], ...) in {}; nothing written",
            shown(&args.files)
        );
        return EXIT_FAILED;
    }
    let files = global_and_pools(&import.global, &import.pools);
    finish(&args.output, &files, &import.report, None)
}

/// Prints every refusal (a name that cannot be a pool file's, two sections for one pool)
/// and says that nothing was written; `false` when there is none.
fn refuse(refused: &[Note]) -> bool {
    for note in refused {
        eprintln!("drover import: {note}");
    }
    if !refused.is_empty() {
        eprintln!(
            "drover import: {} refused (above): nothing written",
            refused.len()
        );
    }
    !refused.is_empty()
}

/// The files an importer writes: drover.toml, and pools.d/NAME.toml for each pool.
fn global_and_pools(global: &doc::Doc, pools: &[(String, doc::Doc)]) -> Vec<(PathBuf, String)> {
    let mut files = vec![(PathBuf::from("drover.toml"), global.render())];
    for (name, pool) in pools {
        files.push((
            Path::new("pools.d").join(format!("{name}.toml")),
            pool.render(),
        ));
    }
    files
}

fn shown(files: &[PathBuf]) -> String {
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    names.join(", ")
}

/// Writes `files`, prints `after` (the nginx change) and the report, then checks the
/// written configuration as `drover -t` does.
fn finish(
    output: &Output,
    files: &[(PathBuf, String)],
    report: &[Note],
    after: Option<&str>,
) -> u8 {
    if let Err(e) = write::write_all(output, files) {
        eprintln!("drover import: {e}");
        return EXIT_FAILED;
    }
    for (path, _) in files {
        println!("wrote {}", output.dir.join(path).display());
    }
    if let Some(after) = after {
        println!("\n{after}");
    }
    print_report(report);
    check(&output.dir.join("drover.toml"))
}

fn print_report(report: &[Note]) {
    if report.is_empty() {
        println!("\nEvery setting was carried over.");
        return;
    }
    println!(
        "\nNot carried over as written ({} settings; FILE:LINE or flag: setting: why):",
        report.len()
    );
    for note in report {
        println!("{note}");
    }
}

/// The checks of `drover -t` on the written files.
fn check(config: &Path) -> u8 {
    let problems = match drover_config::load(config) {
        Ok(loaded) => drover::runtime::check(&loaded),
        Err(errors) => vec![errors.to_string()],
    };
    if problems.is_empty() {
        println!("\n`drover -t -c {}` passes.", config.display());
        return EXIT_OK;
    }
    for problem in &problems {
        eprintln!("{problem}");
    }
    eprintln!(
        "drover import: the written configuration does not pass drover -t (above); edit \
         the files, then run drover -t -c {}",
        config.display()
    );
    EXIT_FAILED
}
