//! Starting CPython with a program name of its own.
//!
//! An embedded interpreter started by `Py_InitializeEx` has no executable: CPython's path
//! calculation (`getpath`) then looks for `python3` on `PATH` and takes `sys.prefix`, the
//! standard library and a virtualenv's `pyvenv.cfg` from whatever it finds there: another
//! Python, another version's standard library under this one's libpython, or another
//! virtualenv. So `drover-python` names its executable itself, in a `PyConfig`:
//!
//! - installed in a virtualenv (its own folder is a virtualenv's `bin/`, beside whose
//!   parent `pyvenv.cfg` is, as `pip install drover` puts it): that virtualenv's `python3`,
//!   so `sys.prefix` is the virtualenv and `sys.base_prefix` the Python it was made from,
//!   as for the virtualenv's own `python`;
//! - else the interpreter this binary was built against (pyo3's, recorded by `build.rs`),
//!   the one whose libpython it links;
//! - else (that interpreter is gone from this machine) CPython's own search, as before.
//!
//! The rest is what `Py_InitializeEx(0)` (pyo3's `Python::initialize`) sets: no signal
//! handlers (the zygote has its own), no command line, C stdio and the locale left alone
//! (no C-locale coercion, no UTF-8 mode unless asked as for an embedder), the environment
//! read (`PYTHONPATH`, `PYTHONHOME` and the rest keep their meaning).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use pyo3::ffi;

/// The `sys.executable` of the interpreter `drover-python` was built against (`build.rs`).
const BUILT_AGAINST: Option<&str> = option_env!("DROVER_PYTHON_BUILT_AGAINST");

/// The executable the interpreter is told it runs as; None: CPython's own search.
fn executable() -> Option<PathBuf> {
    let own = std::env::current_exe().ok();
    if let Some(venv) = own.as_deref().and_then(virtualenv_of) {
        let python = ["python3", "python"]
            .iter()
            .map(|name| venv.join("bin").join(name))
            .find(|p| p.exists());
        // A virtualenv without its python: our own path, beside which getpath finds
        // pyvenv.cfg just the same.
        return python.or(own);
    }
    BUILT_AGAINST.map(PathBuf::from).filter(|p| p.exists())
}

/// The virtualenv whose `bin/` holds `exe`: the folder above it, with a `pyvenv.cfg`.
fn virtualenv_of(exe: &Path) -> Option<PathBuf> {
    let venv = exe.parent()?.parent()?;
    venv.join("pyvenv.cfg")
        .is_file()
        .then(|| venv.to_path_buf())
}

/// Starts CPython as `executable()` (see the module's text) and releases the GIL, as
/// `Python::initialize` does; pyo3 then finds it started. Exits as CPython does on a
/// start that fails (a missing standard library), with its message.
pub fn start() {
    let executable = executable();
    // SAFETY: called once, on the zygote's only thread, before anything else touches
    // CPython: the pre-configuration and the configuration are initialized by CPython's
    // own functions before their fields are written, the strings passed are
    // NUL-terminated and live across the calls, and the configuration is cleared once
    // CPython has copied it.
    unsafe {
        if ffi::Py_IsInitialized() != 0 {
            return;
        }
        let mut pre = std::mem::MaybeUninit::<ffi::PyPreConfig>::uninit();
        ffi::PyPreConfig_InitPythonConfig(pre.as_mut_ptr());
        let mut pre = pre.assume_init();
        // The compat configuration's choices, which Py_InitializeEx makes.
        pre.parse_argv = 0;
        pre.utf8_mode = 0;
        pre.coerce_c_locale = 0;
        pre.coerce_c_locale_warn = 0;
        check(ffi::Py_PreInitialize(&pre));
        let mut config = std::mem::MaybeUninit::<ffi::PyConfig>::uninit();
        ffi::PyConfig_InitPythonConfig(config.as_mut_ptr());
        let mut config = config.assume_init();
        config.parse_argv = 0;
        config.install_signal_handlers = 0;
        config.configure_c_stdio = 0;
        if let Some(path) = executable
            .as_deref()
            .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok())
        {
            let field = std::ptr::addr_of_mut!(config.executable);
            let status = ffi::PyConfig_SetBytesString(&mut config, field, path.as_ptr());
            if ffi::PyStatus_Exception(status) != 0 {
                ffi::PyConfig_Clear(&mut config);
                ffi::Py_ExitStatusException(status);
            }
        }
        let status = ffi::Py_InitializeFromConfig(&config);
        ffi::PyConfig_Clear(&mut config);
        check(status);
        ffi::PyEval_SaveThread();
    }
}

/// Exits as CPython does on a failed step of its start (the message, then the code).
fn check(status: ffi::PyStatus) {
    // SAFETY: a status CPython returned, read by CPython's own functions.
    unsafe {
        if ffi::PyStatus_Exception(status) != 0 {
            ffi::Py_ExitStatusException(status);
        }
    }
}
