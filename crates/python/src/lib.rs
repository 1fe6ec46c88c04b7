//! The Python runtime, run as the binary `drover-python`: the master execs it once per
//! Python pool as that pool's zygote; the zygote loads CPython and the app once, then
//! forks the workers, which share the loaded app copy-on-write.
//!
//! This is the only crate that depends on pyo3 and links libpython (its `build.rs` adds an
//! rpath to libpython's folder): the master, and the php-cgi pools it runs, never map it.
//!
//! It holds only what is Python's; the fork loop and the worker's accept → FastCGI loop,
//! which `drover-php` shares, are `drover_worker`'s, and Python plugs into them:
//!
//! - [`interpreter`]: starts CPython as the Python it was built against, or as the
//!   virtualenv's it is installed in, whatever `python3` is first on `PATH`.
//! - [`zygote`]: imports the app, `gc.freeze()`, then runs `drover_worker`'s fork loop,
//!   forking with CPython's fork hooks.
//! - [`hooks`]: gunicorn's lifecycle hooks, the app factory (gunicorn's `import_app`, with
//!   its Python half in `drover_runtime.py`) and the graceful abort of a request past
//!   `request_terminate_timeout`.
//! - [`warmup`]: the `warmup` requests the zygote sends through the app before it forks.
//! - [`worker`]: the WSGI app as the worker loop's handler, or the ASGI worker; `faulthandler`
//!   for the slowlog.
//! - [`wsgi`]: PEP 3333: environ, `wsgi.input`, `start_response`, the response.
//! - [`asgi`]: ASGI 3.0 (`interface = "asgi"`): an event loop per worker, FastCGI
//!   decoded and encoded in Rust, lifespan.
//!
//! What the zygote and the master exchange (its command line, fds, report lines, exit
//! codes) is `drover_proto::zygote`; the FastCGI codec is `drover_fastcgi`, the scoreboard
//! `drover_scoreboard`.

pub mod asgi;
pub mod hooks;
pub mod interpreter;
pub mod warmup;
pub mod worker;
pub mod wsgi;
pub mod zygote;
