//! drover's scenario tests: one test binary running the real drover behind real nginx with
//! real php-cgi and CPython apps (`tests/apps/`), each test in its own temp dir on its own
//! port (`tests/common/`).
//!
//! `cargo test --release --test scenarios`; needs `nginx`, `php-cgi` and Flask for the
//! python3 drover was built against (scripts/test.sh installs them).

// Cargo finds this crate as `tests/scenarios/main.rs`; the harness sits beside it.
#[path = "../common/mod.rs"]
mod common;

mod capacity;
mod config;
mod control;
mod docs;
mod embed;
mod harness;
mod hostile;
mod import;
mod k8s;
mod limits;
mod memory;
mod output;
mod package;
mod pm;
mod program;
mod python;
mod requests;
mod scaleout;
mod shutdown;
mod systemd;
mod terms;
mod worker;
mod workers;
