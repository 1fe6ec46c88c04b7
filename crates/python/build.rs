//! Embeds CPython: link libpython with an rpath to its folder, so that `drover-python` finds
//! the shared library at run time without LD_LIBRARY_PATH (pyenv and /usr/local builds keep
//! it outside the loader's default paths). Only this crate's binaries get the rpath; the
//! master does not link libpython. It also records the interpreter's own path, which the
//! embedded CPython is started as.

fn main() {
    let config = pyo3_build_config::get();
    if let Some(lib_dir) = config.lib_dir() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{lib_dir}");
    }
    // The interpreter whose libpython this links: the executable CPython is told it runs
    // as, for its prefix and standard library (src/interpreter.rs).
    if let Some(executable) = config.executable() {
        println!("cargo:rustc-env=DROVER_PYTHON_BUILT_AGAINST={executable}");
    }
}
