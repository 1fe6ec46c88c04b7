//! Which script a request runs, and the path variables PHP sees, as php-fpm 8.2 decides
//! them (`init_request_info` in php-src's `sapi/fpm/fpm/fpm_main.c`): pure, so that every
//! case is a unit test; `tests/scenarios/embed/paths.rs` compares the result with a real
//! php-fpm behind nginx and Apache.
//!
//! php-fpm rewrites the request's params before PHP sees them, and `$_SERVER` shows the
//! rewritten ones; [`resolve`] returns the same rewrites ([`Script::changes`]):
//!
//! - Apache's mod_proxy_fcgi sends `SCRIPT_FILENAME` as `proxy:fcgi://HOST/path`, sometimes
//!   with a query: the scheme, host and query are cut off, in `SCRIPT_FILENAME` itself.
//! - `cgi.fix_pathinfo = 1` (the default): when that path is not a file (or ends in '/'),
//!   the longest leading part that is a regular file is the script. `SCRIPT_FILENAME`
//!   becomes it (the old value is kept as `ORIG_SCRIPT_FILENAME`), and `PATH_TRANSLATED`
//!   becomes `DOCUMENT_ROOT` + `PATH_INFO`. `PATH_INFO` and `SCRIPT_NAME` change only when
//!   the web server sent a `PATH_INFO` longer than the cut-off tail (its tail becomes
//!   `PATH_INFO`, its head `SCRIPT_NAME`), or for Apache: nginx's plain
//!   `SCRIPT_FILENAME $document_root$fastcgi_script_name` with `/index.php/a/b` keeps
//!   `SCRIPT_NAME = /index.php/a/b` and gets no `PATH_INFO`. `PHP_SELF` is `SCRIPT_NAME` +
//!   `PATH_INFO`.
//! - `cgi.fix_pathinfo = 0`: nothing is split; `PHP_SELF` is `PATH_INFO` when the web
//!   server sent one (even empty), else `SCRIPT_NAME`, and a `PATH_TRANSLATED` the web
//!   server sent names the script (unless `cgi.discard_path`).
//! - A script path with a `..` component, or none at all, is "File not found." (404);
//!   `security.limit_extensions` refuses other suffixes ("Access denied.", 403); a path
//!   that is not a regular file is "No input file specified." (404).

use std::borrow::Cow;

/// The settings [`resolve`] follows: php-fpm's `cgi.*` values, php.ini's `doc_root` and the
/// pool's `security.limit_extensions`.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `cgi.fix_pathinfo`.
    pub fix_pathinfo: bool,
    /// `cgi.discard_path`: with `cgi.fix_pathinfo = 0`, `PATH_TRANSLATED` is not the script.
    pub discard_path: bool,
    /// php.ini's `doc_root`: `DOCUMENT_ROOT` when the web server sends none.
    pub doc_root: Option<Vec<u8>>,
    /// `security.limit_extensions`; empty: any file.
    pub limit_extensions: Vec<String>,
}

impl Default for Settings {
    /// php-fpm's defaults, with `security.limit_extensions = .php`.
    fn default() -> Settings {
        Settings {
            fix_pathinfo: true,
            discard_path: false,
            doc_root: None,
            limit_extensions: vec![".php".to_owned()],
        }
    }
}

/// What a path is, as one `stat` tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Missing,
    File,
    /// A regular file this process may not read (php-fpm's `EACCES` on opening it).
    Unreadable,
    /// A directory or anything else that is not a regular file.
    Other,
}

impl Kind {
    /// A regular file, readable or not: what php-fpm's `S_ISREG` sees.
    fn is_file(self) -> bool {
        matches!(self, Kind::File | Kind::Unreadable)
    }
}

/// What a request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Script(Script),
    /// No script path: php-fpm answers 404 "File not found." and tells the web server
    /// "Primary script unknown".
    NotFound {
        /// The path php-fpm looked for (after `proxy:fcgi://` was cut off), when any.
        filename: Option<Vec<u8>>,
    },
    /// The file's suffix is not in `security.limit_extensions`: 403 "Access denied.".
    Denied {
        filename: Vec<u8>,
    },
    /// The path is no regular file (`cgi.fix_pathinfo = 0`, or a directory): 404 "No
    /// input file specified.", logged as "Unable to open primary script".
    NoInput {
        filename: Vec<u8>,
    },
    /// The script is a file the worker may not read: 403 "Access denied.", logged as
    /// "Unable to open primary script: ... (Permission denied)".
    Unreadable {
        filename: Vec<u8>,
    },
}

/// The script, and the params as PHP sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub filename: Vec<u8>,
    /// The params php-fpm rewrites, in the order it does: a value replaces the param of
    /// that name (or is added after the others), `None` removes it.
    pub changes: Changes,
    pub php_self: Vec<u8>,
}

/// Rewritten params: name and new value (`None`: removed), one entry per name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes(pub Vec<(&'static str, Option<Vec<u8>>)>);

impl Changes {
    fn set(&mut self, name: &'static str, value: Option<&[u8]>) {
        let value = value.map(<[u8]>::to_vec);
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.0.push((name, value)),
        }
    }

    /// The change to `name`: `Some(None)` when it was removed, `None` when unchanged.
    /// Compared as bytes: the params' names need no UTF-8 check (a request's 25 or so
    /// cost 2,900 instructions).
    pub fn get(&self, name: impl AsRef<[u8]>) -> Option<Option<&[u8]>> {
        let name = name.as_ref();
        self.0
            .iter()
            .find(|(n, _)| n.as_bytes() == name)
            .map(|(_, v)| v.as_deref())
    }
}

const PROXY_PREFIXES: [&[u8]; 2] = [b"proxy:fcgi://", b"proxy:balancer://"];

/// A param as PHP reads it: up to its first NUL.
fn c_str(value: &[u8]) -> &[u8] {
    value
        .iter()
        .position(|&b| b == 0)
        .map_or(value, |end| &value[..end])
}

fn concat(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    out.extend_from_slice(a);
    out.extend_from_slice(b);
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w == needle)
}

/// Decides the target of a request from its params (`param` looks one up), the settings
/// and the file system (`kind`: what a path is, following symlinks).
pub fn resolve<'a>(
    param: impl Fn(&str) -> Option<&'a [u8]>,
    settings: &Settings,
    kind: impl Fn(&[u8]) -> Kind,
) -> Target {
    let p = |name: &str| param(name).map(c_str);
    let env_path_translated = p("PATH_TRANSLATED");
    let env_script_filename = p("SCRIPT_FILENAME");
    if env_script_filename.is_none() && env_path_translated.is_none() {
        return Target::NotFound { filename: None };
    }
    let mut st = Resolving {
        changes: Changes::default(),
        apache: false,
        env_path_translated,
        env_script_name: p("SCRIPT_NAME"),
        env_script_filename: env_script_filename.map(Cow::Borrowed),
        env_path_info: p("PATH_INFO").map(Cow::Borrowed),
        script_path: None,
        verified: None,
    };
    st.iis_path_info(p("SERVER_SOFTWARE"));
    st.proxy_filename();
    st.script_path = st
        .env_script_filename
        .clone()
        .or(st.env_path_translated.map(Cow::Borrowed));
    // SCRIPT_NAME before PATH_INFO (PHP_SELF's head): php-fpm's request_uri.
    let request_uri = if settings.fix_pathinfo {
        st.fix_pathinfo(p("REDIRECT_URL"), p("DOCUMENT_ROOT"), settings, &kind)
    } else {
        // php-fpm's "pre 4.3 behaviour".
        if !settings.discard_path
            && let Some(translated) = st.env_path_translated
        {
            st.script_path = Some(Cow::Borrowed(translated));
        }
        st.env_path_info
            .as_deref()
            .or(st.env_script_name)
            .map(<[u8]>::to_vec)
    };

    let php_self = if settings.fix_pathinfo {
        let info = match st.changes.get("PATH_INFO") {
            Some(changed) => changed,
            None => p("PATH_INFO"),
        };
        concat(
            request_uri.as_deref().unwrap_or_default(),
            info.unwrap_or_default(),
        )
    } else {
        request_uri.unwrap_or_default()
    };
    st.target(settings, php_self, &kind)
}

/// What [`resolve`] has read and changed so far, shared by its steps (named as php-fpm's
/// `init_request_info` names them).
struct Resolving<'a> {
    changes: Changes,
    /// Apache's mod_proxy_fcgi sent SCRIPT_FILENAME (`proxy:fcgi://HOST/path`).
    apache: bool,
    env_path_translated: Option<&'a [u8]>,
    env_script_name: Option<&'a [u8]>,
    env_script_filename: Option<Cow<'a, [u8]>>,
    env_path_info: Option<Cow<'a, [u8]>>,
    script_path: Option<Cow<'a, [u8]>>,
    /// The kind of the script's path, once a stat has told it: `script_path` is known to
    /// be a regular file, with one stat per request in the usual case.
    verified: Option<Kind>,
}

impl<'a> Resolving<'a> {
    /// IIS sends SCRIPT_NAME again at the start of PATH_INFO.
    fn iis_path_info(&mut self, software: Option<&[u8]>) {
        if let (Some(software), Some(name), Some(info)) =
            (software, self.env_script_name, self.env_path_info.clone())
            && software.starts_with(b"Microsoft-IIS")
            && info.starts_with(name)
        {
            self.changes.set("ORIG_PATH_INFO", Some(&info));
            let rest = &info[name.len()..];
            let rest = (!rest.is_empty()).then_some(rest);
            self.changes.set("PATH_INFO", rest);
            self.env_path_info = rest.map(|r| Cow::Owned(r.to_vec()));
        }
    }

    /// Apache's proxy:fcgi://HOST/path?query: the path, in SCRIPT_FILENAME itself.
    fn proxy_filename(&mut self) {
        for prefix in PROXY_PREFIXES {
            let Some(filename) = self.env_script_filename.as_deref() else {
                break;
            };
            let matches = filename
                .get(..prefix.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(prefix));
            if !matches {
                continue;
            }
            let rest = &filename[prefix.len()..];
            let mut path = match rest.iter().position(|&b| b == b'/') {
                Some(at) => {
                    self.apache = true;
                    &rest[at..]
                }
                None => filename,
            };
            if let Some(query) = path.iter().position(|&b| b == b'?') {
                path = &path[..query];
            }
            if path != filename {
                let path = path.to_vec();
                self.changes.set("SCRIPT_FILENAME", Some(&path));
                self.env_script_filename = Some(Cow::Owned(path));
            }
        }
    }

    /// `cgi.fix_pathinfo = 1`: the script is the longest leading part of its path that is
    /// a file. Returns the request_uri.
    fn fix_pathinfo(
        &mut self,
        redirect_url: Option<&'a [u8]>,
        document_root: Option<&'a [u8]>,
        settings: &Settings,
        kind: &impl Fn(&[u8]) -> Kind,
    ) -> Option<Vec<u8>> {
        let mut document_root: Option<Cow<'a, [u8]>> = document_root.map(Cow::Borrowed);
        let mut script_name: Option<Cow<'a, [u8]>> = self.env_script_name.map(Cow::Borrowed);
        let mut name_from_redirect = false;
        if document_root.is_none()
            && let Some(root) = &settings.doc_root
        {
            self.changes.set("DOCUMENT_ROOT", Some(root));
            document_root = Some(Cow::Owned(root.clone()));
        }
        // Apache's mod_fastcgi (not mod_proxy_fcgi): SCRIPT_FILENAME names PHP itself,
        // PATH_TRANSLATED the script and REDIRECT_URL its URL.
        if !self.apache
            && let (Some(translated), Some(redirect)) = (self.env_path_translated, redirect_url)
            && self.script_path.as_deref() != Some(translated)
        {
            self.script_path = Some(Cow::Borrowed(translated));
            script_name = Some(Cow::Borrowed(redirect));
            name_from_redirect = true;
        }

        let path = self.script_path.clone().unwrap_or_default();
        let found_kind = (!path.is_empty()).then(|| kind(&path));
        let split = !path.is_empty() && (path.ends_with(b"/") || found_kind == Some(Kind::Missing));
        self.verified = found_kind.filter(|k| !split && k.is_file());
        if split {
            return self.split(&path, document_root.as_deref(), script_name, kind);
        }
        let orig_script_filename = self.env_script_filename.clone();
        if orig_script_filename.is_none() || orig_script_filename != self.script_path {
            if let Some(orig) = orig_script_filename.as_deref() {
                self.changes.set("ORIG_SCRIPT_FILENAME", Some(orig));
            }
            self.changes
                .set("SCRIPT_FILENAME", self.script_path.as_deref());
        }
        if !self.apache && redirect_url.is_some() {
            if let Some(orig) = self.env_path_info.as_deref() {
                self.changes.set("ORIG_PATH_INFO", Some(orig));
                self.changes.set("PATH_INFO", None);
            }
            if let Some(orig) = self.env_path_translated {
                self.changes.set("ORIG_PATH_TRANSLATED", Some(orig));
                self.changes.set("PATH_TRANSLATED", None);
            }
        }
        if name_from_redirect {
            if let Some(name) = self.env_script_name {
                self.changes.set("ORIG_SCRIPT_NAME", Some(name));
            }
            self.changes.set("SCRIPT_NAME", script_name.as_deref());
        }
        script_name.map(Cow::into_owned)
    }

    /// The script's path is no file: it is cut at the last file found in it, the rest is
    /// path info. Returns the request_uri.
    fn split(
        &mut self,
        path: &[u8],
        document_root: Option<&[u8]>,
        mut script_name: Option<Cow<'a, [u8]>>,
        kind: &impl Fn(&[u8]) -> Kind,
    ) -> Option<Vec<u8>> {
        let orig_script_name = self.env_script_name;
        let uri = match leading_file(path, kind) {
            Some((script_len, script_kind)) => {
                let uri = self.path_info(path, script_len, &mut script_name);
                let script = &path[..script_len];
                if self.env_script_filename.as_deref() != Some(script) {
                    if let Some(orig) = self.env_script_filename.as_deref() {
                        self.changes.set("ORIG_SCRIPT_FILENAME", Some(orig));
                    }
                    self.changes.set("SCRIPT_FILENAME", Some(script));
                    self.script_path = Some(Cow::Owned(script.to_vec()));
                    self.verified = Some(script_kind);
                }
                let info = self.env_path_info.as_deref().unwrap_or_default();
                let translated = if let Some(root) = document_root {
                    let root = root.strip_suffix(b"/").unwrap_or(root);
                    Some(concat(root, info))
                } else if let Some(name) = script_name.as_deref()
                    && contains(script, name)
                {
                    Some(concat(&script[..script.len() - name.len()], info))
                } else {
                    None
                };
                if let Some(translated) = translated {
                    if let Some(orig) = self.env_path_translated {
                        self.changes.set("ORIG_PATH_TRANSLATED", Some(orig));
                    }
                    self.changes.set("PATH_TRANSLATED", Some(&translated));
                }
                uri
            }
            None => {
                if let Some(orig) = self.env_script_filename.as_deref() {
                    self.changes.set("ORIG_SCRIPT_FILENAME", Some(orig));
                }
                self.changes.set("SCRIPT_FILENAME", None);
                self.script_path = None;
                None
            }
        };
        match uri {
            Some(uri) => uri,
            None if orig_script_name.is_none() || orig_script_name != script_name.as_deref() => {
                if let Some(name) = orig_script_name {
                    self.changes.set("ORIG_SCRIPT_NAME", Some(name));
                }
                self.changes.set("SCRIPT_NAME", script_name.as_deref());
                script_name.map(Cow::into_owned)
            }
            None => orig_script_name.map(<[u8]>::to_vec),
        }
    }

    /// The path info of a script found at `path[..script_len]`: the web server's
    /// PATH_INFO when it sent a longer one (its tail), Apache's the whole tail; SCRIPT_NAME
    /// loses it. Returns the request_uri when this decided it.
    fn path_info(
        &mut self,
        path: &[u8],
        script_len: usize,
        script_name: &mut Option<Cow<'a, [u8]>>,
    ) -> Option<Option<Vec<u8>>> {
        let apache = self.apache;
        let orig_script_name = self.env_script_name;
        let tail_len = path.len() - script_len;
        let (path_info, replace) = if apache {
            let tail = &path[script_len..];
            let differs = self.env_path_info.as_deref() != Some(tail);
            (Some(tail.to_vec()), tail_len != 0 && differs)
        } else {
            match self.env_path_info.as_deref() {
                Some(info) if info.len() > tail_len => {
                    (Some(info[info.len() - tail_len..].to_vec()), true)
                }
                _ => (None, false),
            }
        };
        let mut uri = None;
        if replace && let Some(path_info) = path_info {
            if let Some(orig_info) = self.env_path_info.clone().as_deref() {
                self.changes.set("ORIG_PATH_INFO", Some(orig_info));
                // The sent PATH_INFO minus its tail (Apache: all of it).
                let head = if apache {
                    orig_info
                } else {
                    &orig_info[..orig_info.len() - tail_len]
                };
                if orig_script_name != Some(head) {
                    if let Some(name) = orig_script_name {
                        self.changes.set("ORIG_SCRIPT_NAME", Some(name));
                    }
                    self.changes.set("SCRIPT_NAME", Some(head));
                    uri = Some(Some(head.to_vec()));
                } else {
                    uri = Some(orig_script_name.map(<[u8]>::to_vec));
                }
            } else if apache && let Some(name) = script_name.clone() {
                // mod_proxy_fcgi with ProxyPass sends the path info in SCRIPT_NAME too,
                // and no PATH_INFO.
                if name.len() > tail_len && name[name.len() - tail_len..] == path_info {
                    self.changes.set("ORIG_SCRIPT_NAME", orig_script_name);
                    let head = name[..name.len() - tail_len].to_vec();
                    self.changes.set("SCRIPT_NAME", Some(&head));
                    uri = Some(Some(head.clone()));
                    *script_name = Some(Cow::Owned(head));
                }
            }
            self.changes.set("PATH_INFO", Some(&path_info));
            self.env_path_info = Some(Cow::Owned(path_info));
        }
        uri
    }

    /// What the request runs, once the script's path is known.
    fn target(
        self,
        settings: &Settings,
        php_self: Vec<u8>,
        kind: &impl Fn(&[u8]) -> Kind,
    ) -> Target {
        let Some(filename) = self.script_path.filter(|path| is_valid_path(path)) else {
            let filename = self
                .changes
                .get("ORIG_SCRIPT_FILENAME")
                .flatten()
                .map(<[u8]>::to_vec)
                .or_else(|| self.env_script_filename.map(Cow::into_owned));
            return Target::NotFound { filename };
        };
        let filename = filename.into_owned();
        if !allowed(&filename, &settings.limit_extensions) {
            return Target::Denied { filename };
        }
        match self.verified.unwrap_or_else(|| kind(&filename)) {
            Kind::File => {}
            Kind::Unreadable => return Target::Unreadable { filename },
            Kind::Missing | Kind::Other => return Target::NoInput { filename },
        }
        Target::Script(Script {
            filename,
            changes: self.changes,
            php_self,
        })
    }
}

/// The longest leading part of `path`, cut at a `/` (or else a `\`), that is a regular
/// file: its length and kind.
fn leading_file(path: &[u8], kind: &impl Fn(&[u8]) -> Kind) -> Option<(usize, Kind)> {
    let mut end = path.len();
    loop {
        let head = &path[..end];
        let cut = head
            .iter()
            .rposition(|&b| b == b'/')
            .or_else(|| head.iter().rposition(|&b| b == b'\\'))?;
        end = cut;
        let found_kind = kind(&path[..end]);
        if found_kind.is_file() {
            return Some((end, found_kind));
        }
    }
}

/// php-fpm refuses a script path with a `..` component.
fn is_valid_path(path: &[u8]) -> bool {
    !path
        .split(|&b| b == b'/' || b == b'\\')
        .any(|component| component == b"..")
}

fn allowed(filename: &[u8], limit_extensions: &[String]) -> bool {
    limit_extensions.is_empty()
        || limit_extensions
            .iter()
            .any(|ext| filename.ends_with(ext.as_bytes()))
}

/// `security.limit_extensions` as php-fpm writes it: suffixes separated by spaces.
pub fn parse_extensions(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "/srv/www";

    fn run_with(params: &[(&str, &str)], files: &[&str], settings: &Settings) -> Target {
        resolve(
            |name| {
                params
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.as_bytes())
            },
            settings,
            |path| {
                let path = std::str::from_utf8(path).unwrap();
                if files.contains(&path) {
                    Kind::File
                } else if path.is_empty()
                    || !files.iter().any(|f| f.starts_with(&format!("{path}/")))
                {
                    Kind::Missing
                } else {
                    Kind::Other
                }
            },
        )
    }

    fn run(params: &[(&str, &str)], files: &[&str]) -> Target {
        run_with(params, files, &Settings::default())
    }

    fn script(target: Target) -> Script {
        match target {
            Target::Script(script) => script,
            other => panic!("expected a script, got {other:?}"),
        }
    }

    /// `$_SERVER`'s path variables: the params with the changes applied, and PHP_SELF.
    fn server(params: &[(&str, &str)], s: &Script) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = params
            .iter()
            .filter_map(|(name, value)| match s.changes.get(name) {
                Some(changed) => changed.map(|v| (name.to_string(), text(v))),
                None => Some((name.to_string(), value.to_string())),
            })
            .collect();
        for (name, value) in &s.changes.0 {
            if let Some(value) = value
                && !params.iter().any(|(n, _)| n == name)
            {
                out.push((name.to_string(), text(value)));
            }
        }
        out.push(("PHP_SELF".into(), text(&s.php_self)));
        out.sort();
        out
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = expected
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn nginx_split_path_info_is_taken_as_sent() {
        let params = [
            ("SCRIPT_FILENAME", "/srv/www/index.php"),
            ("SCRIPT_NAME", "/index.php"),
            ("PATH_INFO", "/a/b"),
            ("DOCUMENT_ROOT", ROOT),
        ];
        let s = script(run(&params, &["/srv/www/index.php"]));
        assert_eq!(s.filename, b"/srv/www/index.php");
        assert_eq!(s.changes, Changes::default());
        assert_eq!(s.php_self, b"/index.php/a/b");
    }

    #[test]
    fn a_script_that_is_there_costs_one_stat() {
        let stats = std::cell::Cell::new(0);
        let target = resolve(
            |name| (name == "SCRIPT_FILENAME").then_some(&b"/srv/www/index.php"[..]),
            &Settings::default(),
            |_| {
                stats.set(stats.get() + 1);
                Kind::File
            },
        );
        assert!(matches!(target, Target::Script(_)));
        assert_eq!(stats.get(), 1);
    }

    #[test]
    fn nginx_without_split_keeps_script_name_and_sends_no_path_info() {
        let params = [
            ("SCRIPT_FILENAME", "/srv/www/index.php/a/b"),
            ("SCRIPT_NAME", "/index.php/a/b"),
            ("DOCUMENT_ROOT", "/srv/www/"),
        ];
        let s = script(run(&params, &["/srv/www/index.php"]));
        assert_eq!(s.filename, b"/srv/www/index.php");
        assert_eq!(
            server(&params, &s),
            pairs(&[
                ("SCRIPT_FILENAME", "/srv/www/index.php"),
                ("ORIG_SCRIPT_FILENAME", "/srv/www/index.php/a/b"),
                ("SCRIPT_NAME", "/index.php/a/b"),
                ("DOCUMENT_ROOT", "/srv/www/"),
                ("PATH_TRANSLATED", "/srv/www"),
                ("PHP_SELF", "/index.php/a/b"),
            ])
        );
    }

    #[test]
    fn a_sent_path_info_longer_than_the_tail_is_split_into_script_name_and_path_info() {
        // nginx: fastcgi_param PATH_INFO $uri with the whole path as SCRIPT_FILENAME.
        let params = [
            ("SCRIPT_FILENAME", "/srv/www/index.php/a/b"),
            ("SCRIPT_NAME", "/index.php/a/b"),
            ("PATH_INFO", "/index.php/a/b"),
            ("PATH_TRANSLATED", "/srv/www/index.php/a/b"),
            ("DOCUMENT_ROOT", ROOT),
        ];
        let s = script(run(&params, &["/srv/www/index.php"]));
        assert_eq!(
            server(&params, &s),
            pairs(&[
                ("SCRIPT_FILENAME", "/srv/www/index.php"),
                ("ORIG_SCRIPT_FILENAME", "/srv/www/index.php/a/b"),
                ("SCRIPT_NAME", "/index.php"),
                ("ORIG_SCRIPT_NAME", "/index.php/a/b"),
                ("PATH_INFO", "/a/b"),
                ("ORIG_PATH_INFO", "/index.php/a/b"),
                ("PATH_TRANSLATED", "/srv/www/a/b"),
                ("ORIG_PATH_TRANSLATED", "/srv/www/index.php/a/b"),
                ("DOCUMENT_ROOT", ROOT),
                ("PHP_SELF", "/index.php/a/b"),
            ])
        );
    }

    #[test]
    fn apache_proxy_fcgi_filename_loses_scheme_host_and_query_in_place() {
        let params = [
            (
                "SCRIPT_FILENAME",
                "proxy:fcgi://localhost/srv/www/index.php?x=1",
            ),
            ("SCRIPT_NAME", "/index.php"),
            ("PATH_INFO", "/extra"),
            ("PATH_TRANSLATED", "/srv/www/extra"),
        ];
        let s = script(run(&params, &["/srv/www/index.php"]));
        assert_eq!(s.filename, b"/srv/www/index.php");
        assert_eq!(
            server(&params, &s),
            pairs(&[
                ("SCRIPT_FILENAME", "/srv/www/index.php"),
                ("SCRIPT_NAME", "/index.php"),
                ("PATH_INFO", "/extra"),
                ("PATH_TRANSLATED", "/srv/www/extra"),
                ("PHP_SELF", "/index.php/extra"),
            ])
        );
        for (sent, path) in [
            (
                "PROXY:FCGI://127.0.0.1:9000/srv/www/index.php",
                "/srv/www/index.php",
            ),
            (
                "proxy:balancer://cluster/srv/www/index.php",
                "/srv/www/index.php",
            ),
        ] {
            let s = script(run(&[("SCRIPT_FILENAME", sent)], &["/srv/www/index.php"]));
            assert_eq!(s.filename, path.as_bytes());
        }
    }

    #[test]
    fn apache_proxy_pass_path_info_comes_off_script_name() {
        let params = [
            (
                "SCRIPT_FILENAME",
                "proxy:fcgi://127.0.0.1:9000/srv/www/index.php/users/7",
            ),
            ("SCRIPT_NAME", "/index.php/users/7"),
            ("DOCUMENT_ROOT", "/srv/www/"),
        ];
        let s = script(run(&params, &["/srv/www/index.php"]));
        assert_eq!(
            server(&params, &s),
            pairs(&[
                ("SCRIPT_FILENAME", "/srv/www/index.php"),
                ("ORIG_SCRIPT_FILENAME", "/srv/www/index.php/users/7"),
                ("SCRIPT_NAME", "/index.php"),
                ("ORIG_SCRIPT_NAME", "/index.php/users/7"),
                ("PATH_INFO", "/users/7"),
                ("PATH_TRANSLATED", "/srv/www/users/7"),
                ("DOCUMENT_ROOT", "/srv/www/"),
                ("PHP_SELF", "/index.php/users/7"),
            ])
        );
    }

    #[test]
    fn mod_fastcgi_redirect_takes_path_translated_and_redirect_url() {
        let params = [
            ("SCRIPT_FILENAME", "/usr/lib/cgi-bin/php"),
            ("SCRIPT_NAME", "/cgi-bin/php"),
            ("PATH_TRANSLATED", "/srv/www/info.php"),
            ("PATH_INFO", "/info.php"),
            ("REDIRECT_URL", "/info.php"),
        ];
        let s = script(run(&params, &["/srv/www/info.php", "/usr/lib/cgi-bin/php"]));
        assert_eq!(s.filename, b"/srv/www/info.php");
        assert_eq!(
            server(&params, &s),
            pairs(&[
                ("SCRIPT_FILENAME", "/srv/www/info.php"),
                ("ORIG_SCRIPT_FILENAME", "/usr/lib/cgi-bin/php"),
                ("SCRIPT_NAME", "/info.php"),
                ("ORIG_SCRIPT_NAME", "/cgi-bin/php"),
                ("ORIG_PATH_INFO", "/info.php"),
                ("ORIG_PATH_TRANSLATED", "/srv/www/info.php"),
                ("REDIRECT_URL", "/info.php"),
                ("PHP_SELF", "/info.php"),
            ])
        );
    }

    #[test]
    fn fix_pathinfo_off_splits_nothing_and_php_self_is_path_info() {
        let off = Settings {
            fix_pathinfo: false,
            ..Settings::default()
        };
        let params = [
            ("SCRIPT_FILENAME", "/srv/www/index.php"),
            ("SCRIPT_NAME", "/index.php"),
            ("PATH_INFO", "/a/b"),
        ];
        let s = script(run_with(&params, &["/srv/www/index.php"], &off));
        assert_eq!(s.changes, Changes::default());
        assert_eq!(s.php_self, b"/a/b");
        let empty = [("SCRIPT_FILENAME", "/srv/www/index.php"), ("PATH_INFO", "")];
        assert_eq!(
            script(run_with(&empty, &["/srv/www/index.php"], &off)).php_self,
            b""
        );

        let unsplit = [("SCRIPT_FILENAME", "/srv/www/index.php/a/b")];
        assert_eq!(
            run_with(&unsplit, &["/srv/www/index.php"], &off),
            Target::Denied {
                filename: b"/srv/www/index.php/a/b".to_vec()
            }
        );
        let missing = [("SCRIPT_FILENAME", "/srv/www/missing.php")];
        assert_eq!(
            run_with(&missing, &[], &off),
            Target::NoInput {
                filename: b"/srv/www/missing.php".to_vec()
            }
        );
        // PATH_TRANSLATED names the script, unless cgi.discard_path.
        let translated = [
            ("SCRIPT_FILENAME", "/srv/www/index.php"),
            ("PATH_TRANSLATED", "/srv/www/other.php"),
        ];
        let files = ["/srv/www/index.php", "/srv/www/other.php"];
        assert_eq!(
            script(run_with(&translated, &files, &off)).filename,
            b"/srv/www/other.php"
        );
        let discard = Settings {
            discard_path: true,
            ..off
        };
        assert_eq!(
            script(run_with(&translated, &files, &discard)).filename,
            b"/srv/www/index.php"
        );
    }

    #[test]
    fn doc_root_stands_in_for_a_missing_document_root() {
        let settings = Settings {
            doc_root: Some(b"/srv/www".to_vec()),
            ..Settings::default()
        };
        let params = [("SCRIPT_FILENAME", "/srv/www/index.php/x")];
        let s = script(run_with(&params, &["/srv/www/index.php"], &settings));
        assert_eq!(s.changes.get("DOCUMENT_ROOT"), Some(Some(&b"/srv/www"[..])));
        assert_eq!(
            s.changes.get("PATH_TRANSLATED"),
            Some(Some(&b"/srv/www"[..]))
        );
    }

    #[test]
    fn no_file_is_not_found_and_a_directory_is_no_input() {
        assert_eq!(
            run(&[("SCRIPT_FILENAME", "/srv/www/missing.php")], &[]),
            Target::NotFound {
                filename: Some(b"/srv/www/missing.php".to_vec())
            }
        );
        assert_eq!(run(&[], &[]), Target::NotFound { filename: None });
        assert!(matches!(
            run(
                &[("SCRIPT_FILENAME", "/srv/www/../www/index.php")],
                &["/srv/www/index.php"]
            ),
            Target::NotFound { .. }
        ));
        assert_eq!(
            run(
                &[("SCRIPT_FILENAME", "/srv/www/dir.php")],
                &["/srv/www/dir.php/inner"]
            ),
            Target::NoInput {
                filename: b"/srv/www/dir.php".to_vec()
            }
        );
    }

    /// A file the worker may not read is still a file to the path split (php-fpm splits
    /// on `stat`), and is "Access denied." (php-fpm's `EACCES` on opening it).
    #[test]
    fn an_unreadable_script_is_split_as_a_file_and_refused() {
        let kind = |path: &[u8]| match path {
            b"/srv/www/secret.php" => Kind::Unreadable,
            b"/srv/www" => Kind::Other,
            _ => Kind::Missing,
        };
        let resolve_for = |filename: &'static str| {
            resolve(
                |name| (name == "SCRIPT_FILENAME").then_some(filename.as_bytes()),
                &Settings::default(),
                kind,
            )
        };
        let refused = Target::Unreadable {
            filename: b"/srv/www/secret.php".to_vec(),
        };
        assert_eq!(resolve_for("/srv/www/secret.php"), refused);
        assert_eq!(resolve_for("/srv/www/secret.php/a/b"), refused);
    }

    #[test]
    fn limit_extensions_refuses_other_suffixes_and_empty_allows_all() {
        let params = [("SCRIPT_FILENAME", "/srv/notes.txt")];
        let with = |limit: &[&str]| Settings {
            limit_extensions: limit.iter().map(|s| s.to_string()).collect(),
            ..Settings::default()
        };
        assert_eq!(
            run_with(&params, &["/srv/notes.txt"], &with(&[".php"])),
            Target::Denied {
                filename: b"/srv/notes.txt".to_vec()
            }
        );
        assert!(matches!(
            run_with(&params, &["/srv/notes.txt"], &with(&[])),
            Target::Script(_)
        ));
        assert!(matches!(
            run_with(&params, &["/srv/notes.txt"], &with(&[".php", ".txt"])),
            Target::Script(_)
        ));
        assert_eq!(parse_extensions(" .php  .php7 "), vec![".php", ".php7"]);
    }
}
