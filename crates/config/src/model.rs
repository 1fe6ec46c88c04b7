//! The typed configuration: what [`load`](super::load) returns once every file is valid,
//! and all that the rest of drover reads. Built only by the loader; never raw TOML.
//!
//! Each key is declared in it, once, as the field it fills: a section's struct is written
//! with `keys!` (`keys/declare.rs`), whose entries give the field, the key's row (name,
//! type, default, range, refusals, documentation), how the section's reader fills it and
//! what `drover -t` shows; one file per file's part: `model/global.rs` (drover.toml),
//! `model/pool.rs` (a pool file's top level), `model/http.rs` (its
//! HTTP pools' keys), `model/pm.rs`, `model/runtime.rs` (the
//! runtime tables). The entries are in the reference's order, which is `drover -t`'s.
//! Adding a key: docs/ARCHITECTURE.md, "Adding a pool key".

use std::path::PathBuf;

mod global;
mod http;
mod pm;
mod pool;
mod runtime;

pub use global::{Control, Global, LogFormat, LogLevel, LogTarget};
pub(crate) use global::{ControlGiven, GlobalGiven};
pub use http::{Http, Tls};
pub(crate) use http::{HttpGiven, TlsGiven};
pub use pm::{Pm, PmMemory, PmMode};
pub(crate) use pm::{PmGiven, PmMemoryGiven};
pub(crate) use pool::PoolGiven;
pub use pool::{ListenAddr, Pool};
pub use runtime::{Command, Interface, Php, PhpRuntime, Program, Python, Runtime};
pub(crate) use runtime::{CommandGiven, PhpGiven, ProgramGiven, PythonGiven};

/// The whole resolved configuration: global settings and every pool, in file-name order.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The `drover.toml` this was loaded from; relative paths resolve against its folder.
    pub path: PathBuf,
    pub global: Global,
    pub pools: Vec<Pool>,
}
