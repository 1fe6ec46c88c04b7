//! Which script a request runs, as php-fpm decides it (`init_request_info` in php-src's
//! `sapi/fpm/fpm/fpm_main.c`, with `cgi.fix_pathinfo = 1`, its default): pure, so that every
//! case is a unit test.
//!
//! - `SCRIPT_FILENAME` names the script. Apache's mod_proxy_fcgi in its default (FPM)
//!   backend mode sends `proxy:fcgi://HOST/path/to/script.php`, sometimes with the query
//!   appended: the scheme, host and query are stripped, as php-fpm does.
//! - When that path is not a file, its trailing components are path info: the longest
//!   leading part that is a regular file is the script, the rest becomes `PATH_INFO`,
//!   `PATH_TRANSLATED` is `DOCUMENT_ROOT` + `PATH_INFO`, and `SCRIPT_NAME` loses the same
//!   tail.
//! - `security.limit_extensions` then refuses scripts with another suffix ("Access
//!   denied.", 403), and no file at all is "File not found." (404).

/// What a request runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Script(Script),
    /// No script file: php-fpm answers 404 "File not found." and logs "Primary script
    /// unknown".
    NotFound {
        filename: String,
    },
    /// The file's suffix is not in `security.limit_extensions`: 403 "Access denied.".
    Denied {
        filename: String,
    },
}

/// The script and the variables derived from where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub filename: String,
    /// `SCRIPT_NAME` when it differs from the param (path info was split off).
    pub script_name: Option<String>,
    pub path_info: Option<String>,
    pub path_translated: Option<String>,
    /// `SCRIPT_NAME` + `PATH_INFO`.
    pub php_self: String,
}

/// Decides the target of a request from its params (`param` looks one up), the allowed
/// suffixes (empty: any) and the file system (`is_file`: a regular file exists there).
pub fn resolve<'a>(
    param: impl Fn(&str) -> Option<&'a str>,
    limit_extensions: &[String],
    is_file: impl Fn(&str) -> bool,
) -> Target {
    let raw = param("SCRIPT_FILENAME")
        .or_else(|| param("PATH_TRANSLATED"))
        .unwrap_or("");
    let filename = strip_proxy(raw);
    let script_name = param("SCRIPT_NAME").unwrap_or("");
    let (filename, split_info) = if is_file(filename) {
        (filename.to_owned(), None)
    } else {
        match split_path_info(filename, &is_file) {
            Some((script, info)) => (script.to_owned(), Some(info.to_owned())),
            None => {
                return Target::NotFound {
                    filename: filename.to_owned(),
                };
            }
        }
    };
    if !allowed(&filename, limit_extensions) {
        return Target::Denied { filename };
    }
    let script = match split_info {
        None => {
            let path_info = param("PATH_INFO").filter(|info| !info.is_empty());
            Script {
                php_self: format!("{script_name}{}", path_info.unwrap_or("")),
                filename,
                script_name: None,
                path_info: None,
                path_translated: None,
            }
        }
        Some(info) => {
            let name = script_name
                .strip_suffix(info.as_str())
                .unwrap_or(script_name);
            let translated = param("DOCUMENT_ROOT")
                .map(|root| format!("{}{info}", root.strip_suffix('/').unwrap_or(root)));
            Script {
                php_self: format!("{name}{info}"),
                filename,
                script_name: Some(name.to_owned()),
                path_info: Some(info),
                path_translated: translated,
            }
        }
    };
    Target::Script(script)
}

/// `proxy:fcgi://host:port/path?query` (or `proxy:balancer://`) → `/path`.
fn strip_proxy(filename: &str) -> &str {
    let rest = ["proxy:fcgi://", "proxy:balancer://"]
        .iter()
        .find_map(|scheme| {
            filename
                .get(..scheme.len())
                .filter(|head| head.eq_ignore_ascii_case(scheme))
                .map(|_| &filename[scheme.len()..])
        });
    let Some(rest) = rest else {
        return filename;
    };
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    path.split_once('?').map_or(path, |(path, _)| path)
}

/// The longest leading part of `path`, ending before a '/', that is a file, and the rest.
fn split_path_info<'p>(
    path: &'p str,
    is_file: &impl Fn(&str) -> bool,
) -> Option<(&'p str, &'p str)> {
    let mut end = path.len();
    while let Some(slash) = path[..end].rfind('/') {
        if slash == 0 {
            return None;
        }
        if is_file(&path[..slash]) {
            return Some((&path[..slash], &path[slash..]));
        }
        end = slash;
    }
    None
}

fn allowed(filename: &str, limit_extensions: &[String]) -> bool {
    limit_extensions.is_empty()
        || limit_extensions
            .iter()
            .any(|ext| filename.ends_with(ext.as_str()))
}

/// `security.limit_extensions` as php-fpm writes it: suffixes separated by spaces.
pub fn parse_extensions(list: &str) -> Vec<String> {
    list.split_whitespace().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(params: &[(&str, &str)], files: &[&str], limit: &[&str]) -> Target {
        let limit: Vec<String> = limit.iter().map(|s| s.to_string()).collect();
        resolve(
            |name| params.iter().find(|(n, _)| *n == name).map(|(_, v)| *v),
            &limit,
            |path| files.contains(&path),
        )
    }

    fn script(target: Target) -> Script {
        match target {
            Target::Script(script) => script,
            other => panic!("expected a script, got {other:?}"),
        }
    }

    #[test]
    fn nginx_split_path_info_is_taken_as_sent() {
        let s = script(run(
            &[
                ("SCRIPT_FILENAME", "/srv/index.php"),
                ("SCRIPT_NAME", "/index.php"),
                ("PATH_INFO", "/a/b"),
            ],
            &["/srv/index.php"],
            &[".php"],
        ));
        assert_eq!(s.filename, "/srv/index.php");
        assert_eq!(s.php_self, "/index.php/a/b");
        assert_eq!(s.path_info, None, "the param is kept as nginx sent it");
    }

    #[test]
    fn apache_proxy_fcgi_filename_loses_scheme_host_and_query() {
        let s = script(run(
            &[
                (
                    "SCRIPT_FILENAME",
                    "proxy:fcgi://localhost/var/www/html/index.php?x=1",
                ),
                ("SCRIPT_NAME", "/index.php"),
            ],
            &["/var/www/html/index.php"],
            &[".php"],
        ));
        assert_eq!(s.filename, "/var/www/html/index.php");
        assert_eq!(s.php_self, "/index.php");
        assert_eq!(strip_proxy("PROXY:FCGI://127.0.0.1:9000/x.php"), "/x.php");
        assert_eq!(strip_proxy("proxy:balancer://cluster/x.php"), "/x.php");
        assert_eq!(strip_proxy("/plain.php"), "/plain.php");
    }

    #[test]
    fn path_info_is_split_off_a_filename_that_is_not_a_file() {
        let s = script(run(
            &[
                (
                    "SCRIPT_FILENAME",
                    "proxy:fcgi://localhost/var/www/index.php/users/7",
                ),
                ("SCRIPT_NAME", "/index.php/users/7"),
                ("DOCUMENT_ROOT", "/var/www/"),
            ],
            &["/var/www/index.php"],
            &[".php"],
        ));
        assert_eq!(s.filename, "/var/www/index.php");
        assert_eq!(s.path_info.as_deref(), Some("/users/7"));
        assert_eq!(s.script_name.as_deref(), Some("/index.php"));
        assert_eq!(s.path_translated.as_deref(), Some("/var/www/users/7"));
        assert_eq!(s.php_self, "/index.php/users/7");
    }

    #[test]
    fn no_file_is_not_found() {
        assert_eq!(
            run(&[("SCRIPT_FILENAME", "/srv/missing.php")], &[], &[".php"]),
            Target::NotFound {
                filename: "/srv/missing.php".into()
            }
        );
        assert!(matches!(run(&[], &[], &[".php"]), Target::NotFound { .. }));
        assert!(matches!(
            run(&[("SCRIPT_FILENAME", "/x.php")], &["/"], &[]),
            Target::NotFound { .. }
        ));
    }

    #[test]
    fn limit_extensions_refuses_other_suffixes_and_empty_allows_all() {
        let params = [("SCRIPT_FILENAME", "/srv/notes.txt")];
        assert_eq!(
            run(&params, &["/srv/notes.txt"], &[".php"]),
            Target::Denied {
                filename: "/srv/notes.txt".into()
            }
        );
        assert!(matches!(
            run(&params, &["/srv/notes.txt"], &[]),
            Target::Script(_)
        ));
        assert!(matches!(
            run(&params, &["/srv/notes.txt"], &[".php", ".txt"]),
            Target::Script(_)
        ));
        assert_eq!(parse_extensions(" .php  .php7 "), vec![".php", ".php7"]);
    }
}
