//! A test's own directory: configs, sockets, logs and the PHP docroot live under it.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

pub struct Site {
    dir: tempfile::TempDir,
    /// `<dir>/www`, nginx's `root`.
    pub docroot: PathBuf,
}

impl Site {
    pub fn new() -> Site {
        let dir = tempfile::Builder::new()
            .prefix("drover-test-")
            .tempdir()
            .expect("temp dir");
        // tempdir() makes 0700; nginx's workers must reach the socket and the docroot.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
        let docroot = dir.path().join("www");
        fs::create_dir(&docroot).expect("create docroot");
        Site { dir, docroot }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a PHP script into the docroot.
    pub fn script(&self, name: &str, source: &str) {
        fs::write(self.docroot.join(name), source).expect("write script");
    }

    /// Where pool `name` listens.
    pub fn socket(&self, pool: &str) -> PathBuf {
        self.path().join(format!("{pool}.sock"))
    }

    /// Writes `text` at `relative` (creating folders) and returns the full path.
    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.path().join(relative);
        fs::create_dir_all(path.parent().expect("a file has a parent")).expect("create folder");
        fs::write(&path, text).expect("write file");
        path
    }
}
