//! What every process of a pool generation is handed, a part of the pool that owns its
//! state: the output socket (fds 1 and 2), the Python scoreboard, the access log the master
//! opened and the sealed memfd with the TLS certificate and key. Opened once when the
//! generation is created; a spawn looks nothing up.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use nix::unistd::Pid;

use crate::config::Pool;
use crate::logging::access::AccessLogFile;
use crate::master::spawn::Inherited;
use crate::runtime::{self, kind::Kind};
use crate::scoreboard::Scoreboard;

pub struct Handed {
    /// The write end of the pool's output socket, given to every process as fds 1 and 2.
    output: OwnedFd,
    /// Python pools: written by the workers, read by `observe`.
    scoreboard: Option<Scoreboard>,
    /// `access_log`, opened by the master for this generation's zygote (see
    /// [`crate::logging::access`]).
    access_log: Option<AccessLogFile>,
    /// `certfile`: the sealed memfd holding what the master read of the certificate and
    /// key, passed to this generation's zygotes at `TLS_FD`.
    tls: Option<OwnedFd>,
}

impl Handed {
    pub fn open(
        config: &Pool,
        kind: Kind,
        output: OwnedFd,
    ) -> Result<Handed, runtime::RuntimeError> {
        let scoreboard = match kind.scoreboard_slots(config.pm.max_children) {
            Some(slots) => Some(
                Scoreboard::create(&config.name, slots)
                    .map_err(|e| runtime::RuntimeError::Scoreboard(e.to_string()))?,
            ),
            None => None,
        };
        let access_log = match &config.access_log {
            Some(path) => Some(AccessLogFile::open(path).map_err(|err| {
                runtime::RuntimeError::AccessLog(format!("{}: {err}", path.display()))
            })?),
            None => None,
        };
        // The certificate and key the master read at load, for this generation's zygotes.
        let tls = match config.http.as_ref().and_then(|http| http.tls.as_ref()) {
            Some(tls) => Some(
                tls.material
                    .memfd()
                    .map_err(|e| runtime::RuntimeError::Tls(e.to_string()))?,
            ),
            None => None,
        };
        Ok(Handed {
            output,
            scoreboard,
            access_log,
            tls,
        })
    }

    /// The descriptors a new process inherits besides its listener and output.
    pub fn inherited(&self) -> Inherited<'_> {
        Inherited {
            scoreboard: self.scoreboard.as_ref().map(|board| board.fd()),
            access_log: self.access_log.as_ref().map(AccessLogFile::fd),
            tls: self.tls.as_ref().map(AsFd::as_fd),
        }
    }

    pub fn output(&self) -> &OwnedFd {
        &self.output
    }

    pub fn scoreboard(&self) -> Option<&Scoreboard> {
        self.scoreboard.as_ref()
    }

    /// USR1: the access log, when its path no longer names the file the workers write to
    /// (logrotate renamed or removed it).
    pub fn moved_access_log(&self) -> Option<&Path> {
        self.access_log
            .as_ref()
            .filter(|log| log.moved())
            .map(AccessLogFile::path)
    }

    /// Frees the scoreboard slot of `pid`, an orphaned Python worker the master reaped.
    pub fn release_slot(&self, pid: Pid) {
        let Some(board) = &self.scoreboard else {
            return;
        };
        if let Some(view) = board.snapshot().into_iter().find(|v| v.pid == pid) {
            // Safe to write: its worker is reaped and its zygote dead, and a new zygote
            // only claims free slots.
            board.slot(view.slot).release();
        }
    }
}
