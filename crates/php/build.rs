//! Links the PHP embed library when its development files are here: `php-config` (or the
//! one named by `PHP_CONFIG`) gives the headers and the prefix, `sapi.c` and `worker.c` are
//! compiled against them, and the binary links `libphpX.Y.so` with an rpath to its folder. Without
//! them the crate still builds (cfg `no_php`): `drover-php --probe` then says why it cannot
//! run, and drover runs PHP pools on php-cgi. The warning says so once, at build time.

use std::path::PathBuf;
use std::process::Command;

fn php_config(tool: &str, arg: &str) -> Option<String> {
    let out = Command::new(tool).arg(arg).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(no_php)");
    println!("cargo:rerun-if-env-changed=PHP_CONFIG");
    println!("cargo:rerun-if-changed=src/sapi.c");
    println!("cargo:rerun-if-changed=src/sapi.h");
    println!("cargo:rerun-if-changed=src/worker.c");
    println!("cargo:rerun-if-changed=src/scope.c");
    println!("cargo:rerun-if-changed=src/children.c");
    let candidates = match std::env::var("PHP_CONFIG") {
        Ok(tool) => vec![tool],
        Err(_) => vec!["php-config8.2".into(), "php-config".into()],
    };
    let Some((tool, includes)) = candidates
        .iter()
        .find_map(|tool| Some((tool.clone(), php_config(tool, "--includes")?)))
    else {
        return without_php("no php-config found (install php8.2-dev and libphp8.2-embed)");
    };
    let version = php_config(&tool, "--version").unwrap_or_default();
    let prefix = php_config(&tool, "--prefix").unwrap_or_else(|| "/usr".into());
    let minor: String = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let lib_dir = PathBuf::from(&prefix).join("lib");
    let name = [format!("php{minor}"), "php".to_owned()]
        .into_iter()
        .find(|name| lib_dir.join(format!("lib{name}.so")).exists());
    let Some(name) = name else {
        return without_php(&format!(
            "{tool} is PHP {version}, but {} has no libphp{minor}.so (install libphp{minor}-embed)",
            lib_dir.display()
        ));
    };
    let mut build = cc::Build::new();
    build
        .file("src/sapi.c")
        .file("src/worker.c")
        .file("src/children.c")
        .file("src/scope.c")
        .warnings(false);
    for dir in includes.split_whitespace() {
        build.include(dir.trim_start_matches("-I"));
    }
    build.compile("drover_sapi");
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib={name}");
    println!("cargo:rustc-link-arg-bins=-Wl,-rpath,{}", lib_dir.display());
    // children.c's popen() takes libphp's calls (and the extensions'): the executable must
    // export it for the loader to bind them to it.
    println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=popen");
}

fn without_php(why: &str) {
    println!(
        "cargo:warning=drover-php is built without PHP: {why}; PHP pools will run on php-cgi (runtime = \"cgi\")"
    );
    println!("cargo:rustc-cfg=no_php");
}
