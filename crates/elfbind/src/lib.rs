//! elfbind: a copy of an x86-64 shared library whose calls and GOT loads of its own symbols
//! are direct, as if it had been linked with `-Bsymbolic`. drover-php runs PHP from Debian's
//! libphp8.2.so, linked without it: every call PHP makes to one of its own exported
//! functions goes through the PLT, and its own globals are read through the GOT, which
//! costs it about 6% of its CPU time against the php-fpm8.2 executable
//! (docs/ARCHITECTURE.md, "PHP's calls bound directly"). `drover-php --bind-direct` writes
//! the copy, and the master points a PHP pool's zygote at it.
//!
//! - [`bind`](mod@bind) (feature `bind`): the analysis and the rewrite, on `object`,
//!   `iced-x86` and `gimli`.
//! - [`mark`]: the build-id and the trailer a copy carries, read with the standard library
//!   alone (the master's side).

#[cfg(feature = "bind")]
pub mod bind;
pub mod mark;

#[cfg(feature = "bind")]
pub use bind::{
    Analysis, Error, Keep, Site, SiteKind, analyze, bind, exports, interposers, soname,
};
