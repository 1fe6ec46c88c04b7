//! The manual: README.md and the pages of docs/, read as an operator reads them on GitHub.
//! Every relative link and `#anchor` resolves ([`links`]), every TOML block loads through
//! drover's own loader without an unknown key, every key a reference table names is one
//! drover knows ([`keys`]), and the man pages built from the pages render ([`man`]).
//! No drover process runs: these tests read files.

mod keys;
mod links;
mod man;
mod markdown;
