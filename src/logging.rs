//! The error log: stderr or a file that USR1 reopens (for logrotate).
//!
//! Every line goes through `tracing`; [`init`] installs a subscriber whose writer is a
//! [`LogFile`] handle. The handle is shared, so the master can [`LogFile::reopen`] it
//! without touching the subscriber.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tracing_subscriber::fmt::MakeWriter;

use crate::config::{LogLevel, LogTarget};

/// A handle to the error log's current destination.
#[derive(Clone)]
pub struct LogFile {
    inner: Arc<Mutex<Destination>>,
}

enum Destination {
    Stderr,
    File { path: PathBuf, file: File },
}

impl LogFile {
    pub fn open(target: &LogTarget) -> io::Result<LogFile> {
        let destination = match target {
            LogTarget::Stderr => Destination::Stderr,
            LogTarget::File(path) => Destination::File {
                path: path.clone(),
                file: append(path)?,
            },
        };
        Ok(LogFile {
            inner: Arc::new(Mutex::new(destination)),
        })
    }

    /// Reopens the file by path (after logrotate moved it). On failure the old file stays.
    pub fn reopen(&self) -> io::Result<()> {
        let mut destination = self.lock();
        if let Destination::File { path, file } = &mut *destination {
            *file = append(path)?;
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Destination> {
        // A panic while holding the lock leaves a usable File behind; keep logging.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

/// One log event's writer: holds the lock for the event, so lines never interleave.
pub struct LogWriter<'a>(MutexGuard<'a, Destination>);

impl Write for LogWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut *self.0 {
            Destination::Stderr => io::stderr().write(buf),
            Destination::File { file, .. } => file.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut *self.0 {
            Destination::Stderr => io::stderr().flush(),
            Destination::File { file, .. } => file.flush(),
        }
    }
}

impl<'a> MakeWriter<'a> for LogFile {
    type Writer = LogWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter(self.lock())
    }
}

/// Installs the global subscriber. Called once, by the master, after the configuration is
/// valid (configuration errors go to stderr before this).
pub fn init(target: &LogTarget, level: LogLevel) -> io::Result<LogFile> {
    let log = LogFile::open(target)?;
    let level = match level {
        LogLevel::Error => tracing::Level::ERROR,
        LogLevel::Warn => tracing::Level::WARN,
        LogLevel::Info => tracing::Level::INFO,
        LogLevel::Debug => tracing::Level::DEBUG,
        LogLevel::Trace => tracing::Level::TRACE,
    };
    let _ = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_max_level(level)
        .with_ansi(false)
        .with_target(false)
        .try_init();
    Ok(log)
}
