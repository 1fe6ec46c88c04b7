//! Which user a pool's workers run as. When drover runs as root every pool names its
//! `user` (running a pool as root is an explicit `user = "root"`), and workers drop to
//! that user, its group (or `group`) and its supplementary groups before exec. When drover
//! is not root, `user` and `group` cannot apply and are ignored (the master says so).

use std::ffi::CString;

use nix::unistd::{Gid, Group, Uid, User, getgrouplist};

use crate::config::Pool;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub uid: Uid,
    pub gid: Gid,
    /// Supplementary groups, resolved in advance: nothing is looked up after fork.
    pub groups: Vec<libc::gid_t>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    #[error(
        "drover runs as root, so the pool must set `user` (write user = \"root\" to run it as root on purpose)"
    )]
    UserRequired,
    #[error("user {0:?} does not exist")]
    NoSuchUser(String),
    #[error("group {0:?} does not exist")]
    NoSuchGroup(String),
}

impl Credentials {
    /// `None` when drover is not root: workers run as drover's own user.
    pub fn for_pool(pool: &Pool) -> Result<Option<Credentials>, CredentialsError> {
        if !Uid::effective().is_root() {
            return Ok(None);
        }
        let name = pool.user.as_ref().ok_or(CredentialsError::UserRequired)?;
        let user = User::from_name(name)
            .ok()
            .flatten()
            .ok_or_else(|| CredentialsError::NoSuchUser(name.clone()))?;
        let gid = match &pool.group {
            Some(group) => {
                Group::from_name(group)
                    .ok()
                    .flatten()
                    .ok_or_else(|| CredentialsError::NoSuchGroup(group.clone()))?
                    .gid
            }
            None => user.gid,
        };
        let groups = CString::new(name.as_bytes())
            .ok()
            .and_then(|c| getgrouplist(&c, gid).ok())
            .unwrap_or_else(|| vec![gid])
            .into_iter()
            .map(Gid::as_raw)
            .collect();
        Ok(Some(Credentials {
            uid: user.uid,
            gid,
            groups,
        }))
    }

    /// Drops to these credentials. Runs between fork and exec: only syscalls, no
    /// allocation (the group list was built before the fork).
    pub fn apply(&self) -> std::io::Result<()> {
        let groups = &self.groups;
        // SAFETY: plain syscalls on valid pointers; order matters: groups and gid while
        // still root, then uid.
        unsafe {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(self.gid.as_raw()) != 0
                || libc::setuid(self.uid.as_raw()) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }
}
