//! Configuration: `drover.toml` plus one pool per `pools.d/NAME.toml`.
//!
//! The flow is parse → validate → typed: [`load`] reads every file, collects *every* error
//! (file, line, column, key path, value, rule) into [`ConfigErrors`], and only returns a
//! [`Config`] when there are none. Everything downstream works on these typed structs and
//! never sees raw TOML.
//!
//! The key names here are the public contract: each is declared once, in [`keys`], from
//! which the unknown-key errors, the runtime refusals and docs/pool-keys.md follow.

mod choices;
mod env;
mod error;
mod files;
mod global;
mod host;
pub mod keys;
mod listen;
mod load;
pub mod logfile;
mod model;
mod pm;
mod pool;
mod program;
mod python_app;
mod read;
mod render;
mod runtime;
mod show;
mod source;
#[cfg(test)]
mod tests;
mod tls;
mod value;

pub use error::{ConfigError, ConfigErrors};
pub use host::{PhpProbe, probe_php_with};
pub use keys::STOP_SIGNALS;
pub use load::{DEFAULT_CONFIG_PATH, POOL_NAME_RULE, load, load_texts, valid_pool_name};
pub use model::{
    Command, Config, Control, Global, Interface, ListenAddr, LogFormat, LogLevel, LogTarget, Php,
    PhpRuntime, Pm, PmMemory, PmMode, Pool, Program, Python, Runtime,
};
pub use read::{MAX_FILE_BYTES, ReadError, read_text};
