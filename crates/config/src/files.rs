//! Where the loader finds its files: on disk, or in memory. Both go through the same
//! loader, so a configuration given as text (to the fuzzer, to a test) meets every rule a
//! file on disk does; only reading a path and expanding a glob differ.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::read::{ReadError, read_text};

/// The two things the loader asks of a file system.
pub(super) trait Files {
    /// The text of the configuration file at `path`.
    fn read(&self, path: &Path) -> Result<String, ReadError>;
    /// The paths `pattern` selects, each or why it could not be looked at; `Err` for an
    /// invalid pattern.
    fn glob(&self, pattern: &str) -> Result<Vec<Result<PathBuf, String>>, String>;
}

/// The real file system.
pub(super) struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> Result<String, ReadError> {
        read_text(path)
    }

    fn glob(&self, pattern: &str) -> Result<Vec<Result<PathBuf, String>>, String> {
        let paths = glob::glob(pattern).map_err(|e| e.to_string())?;
        Ok(paths.map(|p| p.map_err(|e| e.to_string())).collect())
    }
}

/// Files given as (path, text): a glob selects the paths it matches.
pub(super) struct Memory<'a>(pub &'a BTreeMap<PathBuf, String>);

impl Files for Memory<'_> {
    fn read(&self, path: &Path) -> Result<String, ReadError> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| ReadError::Io(std::io::Error::from(std::io::ErrorKind::NotFound)))
    }

    fn glob(&self, pattern: &str) -> Result<Vec<Result<PathBuf, String>>, String> {
        let pattern = glob::Pattern::new(pattern).map_err(|e| e.to_string())?;
        let options = glob::MatchOptions {
            require_literal_separator: true,
            require_literal_leading_dot: true,
            ..Default::default()
        };
        Ok(self
            .0
            .keys()
            .filter(|p| pattern.matches_path_with(p, options))
            .cloned()
            .map(Ok)
            .collect())
    }
}
