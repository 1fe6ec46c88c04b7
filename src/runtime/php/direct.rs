//! PHP's calls bound directly: whether an embedded-PHP pool's zygote loads the copy of
//! libphp that `drover-php --bind-direct` wrote into [`DIRECT_LIBPHP_DIR`] (elfbind: its
//! calls to its own functions and loads of its own globals made direct, as `-Bsymbolic`
//! would have linked them) instead of the libphp drover-php is linked to. The master puts
//! the folder in the zygote's `LD_LIBRARY_PATH` when the copy was made from the libphp
//! drover-php loads now (same build-id), and the folder and the file are the master's or
//! root's and writable by no one else: the zygote runs as the pool's user, but a library
//! someone else could write would run as every PHP pool's code.
//!
//! [`look`] reads what the file system says (bounded reads of regular files: the ELF
//! header and notes, the copy's trailer); [`decide`] is the pure rule, unit-tested on its
//! inputs; [`Direct::log`] says it once per pool start. A pool whose `[env]` sets
//! `LD_LIBRARY_PATH` (or inherits one, `clear_env = false`) is left alone.
//!
//! Two nets under the copy:
//! - A library the loader puts before libphp ([`preloaded`]: `LD_PRELOAD` or `LD_AUDIT` in
//!   the zygote's environment, a library in `/etc/ld.so.preload`) may interpose a
//!   function the copy now calls directly: such a pool runs the linked libphp
//!   ([`Direct::Preloaded`]).
//! - A zygote on the copy that dies before any request was served makes the pool's later
//!   zygotes run the linked libphp ([`Direct::after_zygote_exit`], [`Direct::FellBack`]).

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use drover_proto::zygote::{DIRECT_LIBPHP_DIR, DIRECT_LIBPHP_DIR_ENV, direct_libphp_dir};
use elfbind::mark::{self, Marker};

use crate::config::Pool;

/// The variable the loader reads, and the zygote is given.
pub const LIBRARY_PATH: &str = "LD_LIBRARY_PATH";

/// The variables by which the loader runs other code before libphp's: libraries loaded
/// first (their symbols interpose libphp's), audit modules (`la_symbind64` may redirect a
/// binding).
pub const PRELOAD_VARS: [&str; 2] = ["LD_PRELOAD", "LD_AUDIT"];

/// The file of libraries the loader preloads into every process.
pub const PRELOAD_FILE: &str = "/etc/ld.so.preload";

/// Owner and mode of a file or folder, as [`decide`] checks them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub uid: u32,
    /// The permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// A regular file (for the copy) or a folder (for the folder), not a symlink.
    pub expected_kind: bool,
}

/// What the file system says of the copy for one linked libphp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The libphp drover-php loads, and its build-id (or why it could not be read).
    pub linked: PathBuf,
    pub linked_build_id: Result<String, String>,
    /// The copy: `DIRECT_LIBPHP_DIR/<the linked file's name>`.
    pub copy: PathBuf,
    /// `None`: there is no copy.
    pub copy_owner: Option<Result<Owner, String>>,
    pub dir_owner: Result<Owner, String>,
    pub copy_build_id: Option<String>,
    pub marker: Option<Marker>,
    /// Whether the marker's SONAME, in the folder, leads to the copy (true when the copy
    /// has the SONAME as its own name, or has none).
    pub soname_leads_to_copy: bool,
}

/// What the master does for a pool's zygote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Direct {
    /// `LD_LIBRARY_PATH` = the copy's folder.
    Bound { copy: PathBuf, build_id: String },
    /// No copy, or drover-php did not name its libphp: nothing to say.
    Absent,
    /// The pool's environment sets `LD_LIBRARY_PATH`: it names the libphp to run.
    LeftAlone,
    /// Made from another libphp (PHP was upgraded since).
    Stale {
        copy: PathBuf,
        copy_build_id: String,
        linked: PathBuf,
        linked_build_id: String,
    },
    /// Not used, and why: ownership, mode, not a copy --bind-direct made, unreadable.
    Refused { copy: PathBuf, why: String },
    /// A good copy not used: the loader runs other code first ([`preloaded`] says which),
    /// which may interpose a function the copy calls directly.
    Preloaded { copy: PathBuf, why: String },
    /// The copy was used, and a zygote on it died before the pool served a request: this
    /// generation's later zygotes run the linked libphp ([`Direct::after_zygote_exit`]).
    FellBack { copy: PathBuf },
}

impl Direct {
    /// What the zygote's environment gets.
    pub fn env(&self) -> Option<(OsString, OsString)> {
        match self {
            Direct::Bound { copy, .. } => Some((
                LIBRARY_PATH.into(),
                copy.parent().unwrap_or(Path::new(DIRECT_LIBPHP_DIR)).into(),
            )),
            _ => None,
        }
    }

    /// The one line a pool's start logs: info when bound, a warning when a copy is there
    /// and not used.
    pub fn log(&self, pool: &str) {
        match self {
            Direct::Bound { copy, build_id } => tracing::info!(
                "pool {pool}: drover-php: PHP's calls bound directly ({}, build-id {build_id})",
                copy.display()
            ),
            Direct::Absent | Direct::LeftAlone => {}
            Direct::Stale {
                copy,
                copy_build_id,
                linked,
                linked_build_id,
            } => tracing::warn!(
                "pool {pool}: drover-php: {} was made from another libphp (build-id \
                 {copy_build_id}; {} is {linked_build_id}): run `drover-php --bind-direct` \
                 to make it again; PHP runs {} meanwhile",
                copy.display(),
                linked.display(),
                linked.display()
            ),
            Direct::Refused { copy, why } => tracing::warn!(
                "pool {pool}: drover-php: {} is not used: {why}; PHP runs the libphp \
                 drover-php is linked to",
                copy.display()
            ),
            Direct::Preloaded { copy, why } => tracing::info!(
                "pool {pool}: drover-php: {} is not used: {why}, which could interpose \
                 functions the copy calls directly; PHP runs the libphp drover-php is \
                 linked to",
                copy.display()
            ),
            // Said when it happened (`Launch::fall_back`).
            Direct::FellBack { .. } => {}
        }
    }

    /// What the pool runs after one of its zygotes exited when the master did not ask it
    /// to: on the copy, before any request was `served`, [`Direct::FellBack`] (the copy is
    /// the first suspect, and the linked libphp is what every other install runs); `None`:
    /// nothing changes (not on the copy, or the copy served, so the exit is PHP's or the
    /// app's, which the linked libphp would not cure).
    pub fn after_zygote_exit(&self, served: bool) -> Option<Direct> {
        match self {
            Direct::Bound { copy, .. } if !served => Some(Direct::FellBack { copy: copy.clone() }),
            _ => None,
        }
    }
}

/// Why the loader would run other code before the copy's, if it would: the first
/// [`PRELOAD_VARS`] set (not empty) in the zygote's environment (`env`: the pool's `[env]`
/// and what it inherits), else the first library named in [`PRELOAD_FILE`]'s contents
/// (`preload_file`; whitespace or colons separate names, as the loader reads it).
pub fn preloaded<'a>(
    env: impl Fn(&str) -> Option<&'a str>,
    preload_file: Option<&str>,
) -> Option<String> {
    for var in PRELOAD_VARS {
        if let Some(value) = env(var).filter(|value| !value.trim().is_empty()) {
            return Some(format!("the zygote's environment sets {var}={value}"));
        }
    }
    let first = preload_file?
        .split(|c: char| c.is_ascii_whitespace() || c == ':')
        .find(|name| !name.is_empty())?;
    Some(format!("{PRELOAD_FILE} preloads {first}"))
}

/// The decision for one pool: [`Direct::LeftAlone`] when its environment names a library
/// path, [`Direct::Absent`] when there is no [`DIRECT_LIBPHP_DIR`] (where no package made
/// one: nothing is read, nothing asked), else [`decide`] on what [`look`] finds for the
/// libphp drover-php loads (`linked`, asked only then: it may run `drover-php --probe`).
/// A copy [`decide`] would use becomes [`Direct::Preloaded`] when [`preloaded`] finds a
/// preload in the pool's `[env]`, in the master's environment when the pool inherits it
/// (`clear_env = false`), or in [`PRELOAD_FILE`].
pub fn for_pool<'a>(pool: &Pool, linked: impl FnOnce() -> Option<&'a Path>) -> Direct {
    let inherited = !pool.clear_env && std::env::var_os(LIBRARY_PATH).is_some();
    if pool.env.contains_key(LIBRARY_PATH) || inherited {
        return Direct::LeftAlone;
    }
    let dir = match direct_libphp_dir() {
        Ok(dir) => dir,
        Err(why) => {
            return Direct::Refused {
                copy: std::env::var_os(DIRECT_LIBPHP_DIR_ENV)
                    .unwrap_or_default()
                    .into(),
                why,
            };
        }
    };
    if std::fs::symlink_metadata(&dir).is_err_and(|e| e.kind() == io::ErrorKind::NotFound) {
        return Direct::Absent;
    }
    let Some(linked) = linked() else {
        return Direct::Absent;
    };
    let direct = decide(&look(&dir, linked), nix::unistd::geteuid().as_raw());
    let Direct::Bound { copy, .. } = &direct else {
        return direct;
    };
    let master: Vec<(&str, String)> = if pool.clear_env {
        Vec::new()
    } else {
        PRELOAD_VARS
            .iter()
            .filter_map(|var| Some((*var, std::env::var(var).ok()?)))
            .collect()
    };
    let env = |var: &str| {
        pool.env.get(var).map(String::as_str).or_else(|| {
            master
                .iter()
                .find(|(name, _)| *name == var)
                .map(|(_, value)| value.as_str())
        })
    };
    // Read only up to a page: the loader's list is a few names.
    let file = std::fs::File::open(PRELOAD_FILE).ok().and_then(|file| {
        let mut text = String::new();
        io::Read::read_to_string(&mut io::Read::take(file, 4096), &mut text).ok()?;
        Some(text)
    });
    match preloaded(env, file.as_deref()) {
        Some(why) => Direct::Preloaded {
            copy: copy.clone(),
            why,
        },
        None => direct,
    }
}

/// The rule. `uid` is the master's: the folder and the copy must be its or root's.
pub fn decide(facts: &Facts, uid: u32) -> Direct {
    let refused = |why: String| Direct::Refused {
        copy: facts.copy.clone(),
        why,
    };
    let copy_owner = match &facts.copy_owner {
        None => return Direct::Absent,
        Some(Err(why)) => return refused(why.clone()),
        Some(Ok(owner)) => owner,
    };
    let dir = facts.copy.parent().unwrap_or(Path::new(DIRECT_LIBPHP_DIR));
    let dir_owner = match &facts.dir_owner {
        Ok(owner) => owner,
        Err(why) => return refused(format!("{}: {why}", dir.display())),
    };
    for (path, owner, kind) in [
        (dir, dir_owner, "a folder"),
        (facts.copy.as_path(), copy_owner, "a regular file"),
    ] {
        if !owner.expected_kind {
            return refused(format!("{} is not {kind}", path.display()));
        }
        if owner.uid != 0 && owner.uid != uid {
            return refused(format!(
                "{} is owned by uid {}, neither root nor drover's",
                path.display(),
                owner.uid
            ));
        }
        if owner.mode & 0o022 != 0 {
            return refused(format!(
                "{} is writable by its group or others (mode {:04o})",
                path.display(),
                owner.mode
            ));
        }
    }
    let Some(marker) = &facts.marker else {
        return refused("it is not a copy `drover-php --bind-direct` made (no marker)".into());
    };
    // The copy's own build-id, or the source's in a copy made before copies had their own.
    let own = marker.copy_build_id.as_deref().unwrap_or(&marker.build_id);
    if facts.copy_build_id.as_deref() != Some(own) {
        return refused(format!(
            "its build-id ({}) is not the one its marker records ({own})",
            facts.copy_build_id.as_deref().unwrap_or("none"),
        ));
    }
    let linked_build_id = match &facts.linked_build_id {
        Ok(id) => id,
        Err(why) => {
            return refused(format!(
                "the build-id of {} cannot be read ({why})",
                facts.linked.display()
            ));
        }
    };
    if *linked_build_id != marker.build_id {
        return Direct::Stale {
            copy: facts.copy.clone(),
            copy_build_id: marker.build_id.clone(),
            linked: facts.linked.clone(),
            linked_build_id: linked_build_id.clone(),
        };
    }
    if !facts.soname_leads_to_copy {
        return refused(format!(
            "{} does not lead to it (run `drover-php --bind-direct`)",
            dir.join(&marker.soname).display()
        ));
    }
    Direct::Bound {
        copy: facts.copy.clone(),
        build_id: marker.build_id.clone(),
    }
}

/// What the file system says of `dir`'s copy of `linked`.
pub fn look(dir: &Path, linked: &Path) -> Facts {
    let copy = dir.join(linked.file_name().unwrap_or_default());
    let linked_build_id = match mark::build_id(linked) {
        Ok(Some(id)) => Ok(id),
        Ok(None) => Err("it has none".to_owned()),
        Err(e) => Err(e.to_string()),
    };
    let mut facts = Facts {
        linked: linked.to_owned(),
        linked_build_id,
        copy_owner: None,
        dir_owner: std::fs::symlink_metadata(dir)
            .map(|meta| owner(&meta, meta.is_dir()))
            .map_err(|e| e.to_string()),
        copy: copy.clone(),
        copy_build_id: None,
        marker: None,
        soname_leads_to_copy: false,
    };
    // O_NOFOLLOW: a symlink in the copy's place is refused (not a regular file), O_NONBLOCK:
    // a FIFO there does not block the master (it is refused too).
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&copy);
    let file = match file {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return facts,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            facts.copy_owner = Some(Ok(Owner {
                uid: 0,
                mode: 0,
                expected_kind: false,
            }));
            return facts;
        }
        Err(e) => {
            facts.copy_owner = Some(Err(format!("cannot open it: {e}")));
            return facts;
        }
        Ok(file) => file,
    };
    facts.copy_owner = Some(
        file.metadata()
            .map(|meta| owner(&meta, meta.is_file()))
            .map_err(|e| e.to_string()),
    );
    if !matches!(
        facts.copy_owner,
        Some(Ok(Owner {
            expected_kind: true,
            ..
        }))
    ) {
        return facts;
    }
    facts.copy_build_id = mark::build_id_of(&file).ok().flatten();
    facts.marker = Marker::read(&file).ok().flatten();
    facts.soname_leads_to_copy = match &facts.marker {
        Some(marker)
            if !marker.soname.is_empty() && Some(marker.soname.as_ref()) != copy.file_name() =>
        {
            let link = std::fs::canonicalize(dir.join(&marker.soname));
            let target = std::fs::canonicalize(&copy);
            matches!((link, target), (Ok(link), Ok(target)) if link == target)
        }
        _ => true,
    };
    facts
}

/// `meta`'s owner and permission bits; `expected_kind`: whether it is what it should be.
fn owner(meta: &std::fs::Metadata, expected_kind: bool) -> Owner {
    Owner {
        uid: meta.uid(),
        mode: meta.mode() & 0o7777,
        expected_kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "d02f1005613224c39c3c634f77e613dffd453a7e";

    fn root(mode: u32) -> Result<Owner, String> {
        Ok(Owner {
            uid: 0,
            mode,
            expected_kind: true,
        })
    }

    /// A copy as `drover-php --bind-direct` leaves it, of the linked libphp.
    fn good() -> Facts {
        Facts {
            linked: "/usr/lib/libphp8.2.so".into(),
            linked_build_id: Ok(ID.into()),
            copy: "/var/lib/drover/libphp/libphp8.2.so".into(),
            copy_owner: Some(root(0o644)),
            dir_owner: root(0o755),
            copy_build_id: Some(ID.into()),
            marker: Some(Marker {
                source: "/usr/lib/libphp8.2.so".into(),
                build_id: ID.into(),
                copy_build_id: None,
                soname: "libphp.so".into(),
                summary: String::new(),
            }),
            soname_leads_to_copy: true,
        }
    }

    fn refusal(facts: &Facts, uid: u32) -> String {
        match decide(facts, uid) {
            Direct::Refused { why, .. } => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn a_fresh_safe_copy_is_used_through_the_library_path() {
        let direct = decide(&good(), 0);
        assert_eq!(
            direct,
            Direct::Bound {
                copy: "/var/lib/drover/libphp/libphp8.2.so".into(),
                build_id: ID.into()
            }
        );
        assert_eq!(
            direct.env(),
            Some(("LD_LIBRARY_PATH".into(), "/var/lib/drover/libphp".into()))
        );
        // Owned by the master's own uid (drover not run as root) is as good as root's.
        let mut mine = good();
        mine.copy_owner = Some(Ok(Owner {
            uid: 1000,
            mode: 0o644,
            expected_kind: true,
        }));
        assert!(matches!(decide(&mine, 1000), Direct::Bound { .. }));
    }

    #[test]
    fn no_copy_says_nothing() {
        let mut facts = good();
        facts.copy_owner = None;
        assert_eq!(decide(&facts, 0), Direct::Absent);
        assert_eq!(decide(&facts, 0).env(), None);
    }

    #[test]
    fn a_copy_of_another_libphp_is_stale() {
        let mut facts = good();
        facts.linked_build_id = Ok("ffff".into());
        let direct = decide(&facts, 0);
        assert!(
            matches!(&direct, Direct::Stale { copy_build_id, linked_build_id, .. }
                if copy_build_id == ID && linked_build_id == "ffff"),
            "{direct:?}"
        );
        assert_eq!(direct.env(), None);
    }

    #[test]
    fn a_copy_someone_else_could_write_is_refused() {
        let mut facts = good();
        facts.copy_owner = Some(Ok(Owner {
            uid: 1000,
            mode: 0o644,
            expected_kind: true,
        }));
        assert!(refusal(&facts, 0).contains("owned by uid 1000"));
        let mut facts = good();
        facts.copy_owner = Some(root(0o664));
        assert!(refusal(&facts, 0).contains("writable by its group or others (mode 0664)"));
        let mut facts = good();
        facts.dir_owner = root(0o777);
        assert!(refusal(&facts, 0).contains("/var/lib/drover/libphp is writable"));
        let mut facts = good();
        facts.dir_owner = Ok(Owner {
            uid: 33,
            mode: 0o755,
            expected_kind: true,
        });
        assert!(refusal(&facts, 0).contains("owned by uid 33"));
        let mut facts = good();
        facts.copy_owner = Some(Ok(Owner {
            uid: 0,
            mode: 0o777,
            expected_kind: false,
        }));
        assert!(refusal(&facts, 0).contains("is not a regular file"));
    }

    #[test]
    fn a_file_that_is_not_a_bound_copy_is_refused() {
        let mut facts = good();
        facts.marker = None;
        assert!(refusal(&facts, 0).contains("no marker"));
        let mut facts = good();
        facts.copy_build_id = Some("0000".into());
        assert!(refusal(&facts, 0).contains("not the one its marker records"));
        let mut facts = good();
        facts.soname_leads_to_copy = false;
        assert!(
            refusal(&facts, 0).contains("/var/lib/drover/libphp/libphp.so does not lead to it")
        );
        let mut facts = good();
        facts.linked_build_id = Err("No such file or directory".into());
        assert!(refusal(&facts, 0).contains("cannot be read"));
    }

    #[test]
    fn a_copy_with_its_own_build_id_is_matched_by_its_marker() {
        // As `--bind-direct` writes it now: the marker names the source's id (matched to
        // the linked libphp) and the copy's own (matched to the copy's note).
        let mut facts = good();
        facts.copy_build_id = Some("c0c0".into());
        assert!(
            refusal(&facts, 0)
                .contains("its build-id (c0c0) is not the one its marker records (d02f")
        );
        if let Some(marker) = &mut facts.marker {
            marker.copy_build_id = Some("c0c0".into());
        }
        assert!(matches!(decide(&facts, 0), Direct::Bound { build_id, .. } if build_id == ID));
        // The copy's id is no longer the source's: a copy left with the source's id, and a
        // marker that says it has its own, is refused.
        facts.copy_build_id = Some(ID.into());
        assert!(refusal(&facts, 0).contains("is not the one its marker records (c0c0)"));
        // Stale is still told by the source's id.
        facts.copy_build_id = Some("c0c0".into());
        facts.linked_build_id = Ok("ffff".into());
        assert!(matches!(decide(&facts, 0), Direct::Stale { .. }));
    }

    #[test]
    fn only_a_zygote_on_the_copy_that_served_nothing_falls_back() {
        let bound = decide(&good(), 0);
        let copy = PathBuf::from("/var/lib/drover/libphp/libphp8.2.so");
        let fell = bound.after_zygote_exit(false);
        assert_eq!(fell, Some(Direct::FellBack { copy: copy.clone() }));
        assert_eq!(
            fell.unwrap().env(),
            None,
            "no library path: the linked libphp"
        );
        assert_eq!(bound.after_zygote_exit(true), None);
        for other in [
            Direct::Absent,
            Direct::LeftAlone,
            Direct::FellBack { copy: copy.clone() },
            Direct::Preloaded {
                copy: copy.clone(),
                why: String::new(),
            },
            Direct::Refused {
                copy,
                why: String::new(),
            },
        ] {
            assert_eq!(other.after_zygote_exit(false), None, "{other:?}");
        }
    }

    #[test]
    fn a_preload_or_an_audit_module_is_named() {
        let none = |_: &str| None;
        assert_eq!(preloaded(none, None), None);
        assert_eq!(preloaded(none, Some("")), None);
        assert_eq!(preloaded(none, Some(" \n\t\n")), None);
        assert_eq!(
            preloaded(
                none,
                Some("\n/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /lib/b.so\n")
            ),
            Some("/etc/ld.so.preload preloads /usr/lib/x86_64-linux-gnu/libjemalloc.so.2".into())
        );
        assert_eq!(
            preloaded(none, Some(":libc_malloc_debug.so.0")),
            Some("/etc/ld.so.preload preloads libc_malloc_debug.so.0".into())
        );
        let env = |var: &str| (var == "LD_PRELOAD").then_some("libfaketime.so.1");
        assert_eq!(
            preloaded(env, Some("/lib/b.so")),
            Some("the zygote's environment sets LD_PRELOAD=libfaketime.so.1".into())
        );
        let audit = |var: &str| (var == "LD_AUDIT").then_some("libaudit.so");
        assert_eq!(
            preloaded(audit, None),
            Some("the zygote's environment sets LD_AUDIT=libaudit.so".into())
        );
        // Set empty, as `LD_PRELOAD=` unsets it for the loader.
        let empty = |var: &str| (var == "LD_PRELOAD").then_some(" ");
        assert_eq!(preloaded(empty, None), None);
    }

    #[test]
    fn look_reads_a_copy_from_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let Ok(Some(id)) = mark::build_id(&exe) else {
            println!("skipped: this test binary has no build-id");
            return;
        };
        let name = exe.file_name().unwrap();
        let copy = dir.path().join(name);
        let mut bytes = std::fs::read(&exe).unwrap();
        let marker = Marker {
            source: exe.clone(),
            build_id: id.clone(),
            copy_build_id: None,
            soname: "libt.so".into(),
            summary: String::new(),
        };
        bytes.extend(marker.encode().unwrap());
        std::fs::write(&copy, bytes).unwrap();
        let facts = look(dir.path(), &exe);
        assert_eq!(facts.linked_build_id, Ok(id.clone()));
        assert_eq!(facts.copy_build_id, Some(id));
        assert_eq!(facts.marker, Some(marker));
        assert!(!facts.soname_leads_to_copy, "no libt.so yet");
        std::os::unix::fs::symlink(name, dir.path().join("libt.so")).unwrap();
        assert!(look(dir.path(), &exe).soname_leads_to_copy);
        // No copy for another library.
        assert_eq!(
            look(dir.path(), Path::new("/nonexistent/libx.so")).copy_owner,
            None
        );
    }
}
