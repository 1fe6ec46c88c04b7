//! `drover-python --read-gunicorn-config FILE`: runs a `gunicorn.conf.py` as gunicorn does
//! (imported as the module `__config__`, with the Python drover embeds) and prints its
//! settings as one JSON object on stdout, for `drover import gunicorn`: the master side
//! never links libpython, so it asks this binary.
//!
//! Each public top-level name the file assigns or defines becomes
//! `{"NAME": {"line": N, "value": V}}` (`"callable": true` for a function, a hook;
//! `"repr": "..."` for a value JSON cannot hold). `line` is the last top-level statement
//! that binds the name, so that the importer's report can name it. Names the file only
//! imports (`import multiprocessing`) are left out. What the file prints goes to stderr,
//! so stdout stays JSON.

use std::ffi::{CStr, OsStr};

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The flag that selects this mode, as the first argument.
pub const FLAG: &str = "--read-gunicorn-config";

const READER: &CStr = cr#"
import ast, importlib.util, json, sys, types

def bound_lines(body, lines):
    for node in body:
        names = []
        if isinstance(node, ast.Assign):
            for target in node.targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        for name in names:
            lines[name] = node.lineno
        for field in ("body", "orelse", "finalbody", "handlers"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound_lines(inner, lines)

with open(CONFIG_PATH, "rb") as f:
    source = f.read()
lines = {}
bound_lines(ast.parse(source, CONFIG_PATH).body, lines)

spec = importlib.util.spec_from_file_location("__config__", CONFIG_PATH)
module = importlib.util.module_from_spec(spec)
sys.modules["__config__"] = module
stdout, sys.stdout = sys.stdout, sys.stderr
try:
    spec.loader.exec_module(module)
finally:
    sys.stdout = stdout

settings = {}
for name, value in vars(module).items():
    if name.startswith("_") or name not in lines:
        continue
    if isinstance(value, (types.ModuleType, type)):
        continue
    entry = {"line": lines[name]}
    if callable(value):
        entry["callable"] = True
    else:
        try:
            json.dumps(value)
            entry["value"] = value
        except (TypeError, ValueError):
            entry["repr"] = repr(value)
    settings[name] = entry
RESULT = json.dumps(settings)
"#;

/// Prints the settings of the config file at `path`; the exit code: 0, or 1 when the file
/// cannot be run (its traceback on stderr).
pub fn run(path: Option<&OsStr>) -> u8 {
    let Some(path) = path else {
        eprintln!("drover-python: {FLAG} needs the path of a gunicorn config file");
        return 2;
    };
    drover_python::interpreter::start();
    Python::attach(|py| {
        let read = || -> PyResult<String> {
            let globals = PyDict::new(py);
            globals.set_item("CONFIG_PATH", path)?;
            py.run(READER, Some(&globals), None)?;
            globals
                .get_item("RESULT")?
                .ok_or_else(|| pyo3::exceptions::PyKeyError::new_err("RESULT"))?
                .extract()
        };
        match read() {
            Ok(json) => {
                println!("{json}");
                0
            }
            Err(err) => {
                let path = path.to_string_lossy();
                eprintln!("drover-python: cannot run the gunicorn config {path}:");
                err.print(py);
                1
            }
        }
    })
}
