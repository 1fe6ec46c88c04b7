//! drover-admin: the commands that talk about a drover rather than being one, and the whole
//! of drover's command line. The `drover` daemon (the root package's src/main.rs) reads
//! only `[-c FILE]` and execs `drover-admin`, found beside it, with its own arguments for
//! everything else, so that none of this crate is linked into the binary that stays
//! resident for the master's whole life (docs/ARCHITECTURE.md, "The master's memory").
//!
//! It depends on the master's library (`drover`) for what the two genuinely share (the
//! control socket's status model, the runtimes' checks and the launch rules `-t` and
//! `serve` apply) and on `drover-config` for loading; the master never depends on it
//! (scripts/imports.py checks that).
//!
//! # Modules
//!
//! - [`ctl`]: `drover ctl`, its arguments and subcommands; [`ctl::client`], the control
//!   socket's client; [`ctl::probe`], a FastCGI request straight to a pool's socket;
//!   [`ctl::top`], every pool live in a terminal, from `/status`.
//! - [`import`]: `drover import php-fpm`, `gunicorn` and `supervisord`: another server's
//!   configuration to drover's files, with a report of what was not carried over.
//! - [`serve`]: `drover serve`, one pool from a command line: flags → a pool file's TOML,
//!   loaded by the normal loader, written to a private folder, then `drover -c` on it.
//!
//! The binary (src/main.rs) holds the command line itself (clap), `drover -t` and
//! `drover completions`.

pub mod ctl;
pub mod import;
pub mod serve;
