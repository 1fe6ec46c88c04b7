//! The operator's daily tools with the real drover, nginx, php-cgi and CPython, each driven
//! as an operator drives it: `drover ctl` on the control socket, curl-like GETs on a pool's
//! `status_listen`, signals, pool files edited in place.
//!
//! - [`access`]: the workers' access log of a Python and an embedded PHP pool: lines as
//!   the client saw them, JSON, whole under load, the health check left out, logrotate.
//! - [`slowlog`]: a request slow three functions deep gets one slowlog entry whose stack
//!   names the three functions, file and line, under a header with the URI and query; PHP
//!   and Python, text and JSON.
//! - [`status`]: with requests held busy, status in text, JSON and OpenMetrics (parsed by
//!   Prometheus' own parser) shows the right active, idle, total and queue numbers; `/ping`.
//! - [`metrics`]: `/metrics` on `status_listen`, parsed in both formats, counts every
//!   request of a Python and an embedded PHP pool in the duration histogram and by status
//!   class; per-worker series only with `?full`.
//! - [`live`]: `drover ctl set` and `drover ctl workers` resize a static pool without a
//!   restart; an invalid value is refused, named, and changes nothing.
//! - [`probe`]: `drover ctl probe` answers 0 for healthy PHP and Python pools, 1 for a
//!   500 and for a socket nobody listens on; a bare-port `listen` answers on 127.0.0.1.
//! - [`reload`]: HUP every second under 50 concurrent clients drops nothing and the new
//!   configuration applies; a broken pool file keeps the old configuration running.
//! - [`top`]: `drover ctl top` in a tmux pane shows a loaded Python pool live and a held
//!   request's id, sorts and picks a pool by key, and leaves the terminal as it found it on
//!   q, Ctrl-C and SIGTERM; piped, plain blocks of lines.
//! - [`renew`]: HUP with no file changed renews every worker, and a deploy's new PHP
//!   script (past an OPcache that never revalidates) and Python module are served;
//!   `ctl reload --changed` leaves the workers as they were.
//!
//! The fixtures are `tests/apps/{slow,hold,greeting}.php` (copied into the docroot) and
//! `tests/apps/control_app.py` (the Python pools' app).

mod access;
mod live;
mod metrics;
mod probe;
mod reload;
mod renew;
mod slowlog;
mod status;
mod top;

use crate::common::{
    Ctl, Location, Nginx, PoolFile, Site, Stack, default_php_runtime, http, php_table, pool_toml,
    start_with_control,
};

/// A pool file as an operator writes one: top-level keys, `[pm]` (static), `[env]` with
/// `GREETING`, then the runtime's table.
#[derive(Clone)]
struct Pool {
    name: String,
    /// Top-level lines, such as `request_slowlog_timeout = "1s"`.
    top: Vec<String>,
    max_children: u32,
    /// `[env]` `GREETING`, echoed by `greeting.php` and the app's `/greeting`.
    greeting: Option<String>,
    /// A PHP pool's `[php.ini]` lines.
    php_ini: Option<String>,
    runtime: Runtime,
}

#[derive(Clone)]
enum Runtime {
    /// php-cgi; nginx sends it `*.php`.
    Php,
    /// `control_app:application`; nginx sends it everything under `mount` (or `/`).
    Python { mount: Option<String> },
}

impl Pool {
    /// A static PHP pool of one worker.
    fn php(name: &str) -> Pool {
        Pool {
            name: name.to_string(),
            top: Vec::new(),
            max_children: 1,
            greeting: None,
            php_ini: None,
            runtime: Runtime::Php,
        }
    }

    /// A static Python pool of one worker, running `tests/apps/control_app.py`.
    fn python(name: &str) -> Pool {
        Pool {
            runtime: Runtime::Python { mount: None },
            ..Pool::php(name)
        }
    }

    fn top(mut self, line: &str) -> Pool {
        self.top.push(line.to_string());
        self
    }

    fn max_children(mut self, n: u32) -> Pool {
        self.max_children = n;
        self
    }

    fn greeting(mut self, value: &str) -> Pool {
        self.greeting = Some(value.to_string());
        self
    }

    /// A PHP pool's `[php.ini]` table: `"opcache.validate_timestamps" = 0` lines.
    fn php_ini(mut self, lines: &str) -> Pool {
        self.php_ini = Some(lines.to_string());
        self
    }

    /// A Python pool mounted under `prefix` (`/py`): SCRIPT_NAME, and nginx's location.
    fn mount(mut self, prefix: &str) -> Pool {
        self.runtime = Runtime::Python {
            mount: Some(prefix.to_string()),
        };
        self
    }

    /// The nginx location that reaches this pool.
    fn location(&self, site: &Site) -> Location {
        let socket = site.socket(&self.name);
        match &self.runtime {
            Runtime::Php => Location::php(&socket),
            Runtime::Python { mount: None } => Location::prefix("/", &socket),
            Runtime::Python { mount: Some(m) } => Location::prefix(&format!("{m}/"), &socket),
        }
    }
}

impl PoolFile for Pool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toml(&self, site: &Site) -> String {
        let mut tables: String = self.top.iter().map(|l| format!("{l}\n")).collect();
        tables += &format!(
            "\n[pm]\nmode = \"static\"\nmax_children = {}\n",
            self.max_children
        );
        if let Some(greeting) = &self.greeting {
            tables += &format!("\n[env]\nGREETING = \"{greeting}\"\n");
        }
        tables += &match &self.runtime {
            Runtime::Php => {
                let mut php = format!("\n{}", php_table(default_php_runtime()));
                if let Some(ini) = &self.php_ini {
                    php += &format!("\n[php.ini]\n{ini}");
                }
                php
            }
            Runtime::Python { mount } => {
                let apps = site.path().join("apps");
                let mut python = format!(
                    "\n[python]\napp = \"control_app:application\"\npython_path = [\"{}\"]\n",
                    apps.display()
                );
                if let Some(mount) = mount {
                    python += &format!("mount = \"{mount}\"\n");
                }
                python
            }
        };
        pool_toml(&site.socket(&self.name), &tables)
    }
}

/// drover (with its control socket) and nginx serving `pools`, the fixtures installed.
/// Fields drop in order: nginx, drover, the temp dir.
struct Setup {
    stack: Stack,
    ctl: Ctl,
}

/// The fixture scripts and app, in the docroot and `<site>/apps/`.
fn site() -> Site {
    let site = Site::new();
    site.script("slow.php", include_str!("../../apps/slow.php"));
    site.script("hold.php", include_str!("../../apps/hold.php"));
    site.script("greeting.php", include_str!("../../apps/greeting.php"));
    site.write(
        "apps/control_app.py",
        include_str!("../../apps/control_app.py"),
    );
    site
}

/// Starts drover with `pools` and nginx in front, with room for `connections` at once.
fn start_sized(site: Site, pools: &[&Pool], connections: u32) -> Setup {
    let files: Vec<&dyn PoolFile> = pools.iter().map(|p| *p as &dyn PoolFile).collect();
    let (drover, ctl) = start_with_control(&site, &files);
    let locations: Vec<Location> = pools.iter().map(|p| p.location(&site)).collect();
    let nginx = Nginx::start_sized(&site, &locations, connections);
    Setup {
        stack: Stack {
            nginx,
            drover,
            site,
        },
        ctl,
    }
}

fn start(site: Site, pools: &[&Pool]) -> Setup {
    start_sized(site, pools, 64)
}

impl Setup {
    fn log(&self) -> String {
        self.stack.drover.log.text()
    }

    /// GET through nginx; a transport failure panics with drover's log.
    fn get(&self, path: &str) -> http::Reply {
        http::try_get(&self.stack.url(path))
            .unwrap_or_else(|e| panic!("{e}; drover's log:\n{}", self.log()))
    }

    /// GET through nginx, asserting a 200; its body.
    fn get_ok(&self, path: &str) -> String {
        let reply = self.get(path);
        assert_eq!(
            reply.status,
            200,
            "GET {path}: {reply:?}; drover's log:\n{}",
            self.log()
        );
        reply.body
    }

    /// `drover ctl status POOL --json`.
    fn status(&self, pool: &str) -> serde_json::Value {
        self.ctl.status_json(pool, &self.log())
    }
}

/// A number field of a status JSON object (php-fpm's key names, with spaces).
fn number(status: &serde_json::Value, key: &str) -> u64 {
    status[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no number {key:?} in status {status:#}"))
}

/// The 1-based number of the only line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    let found: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(found.len(), 1, "{needle:?} on lines {found:?} of:\n{text}");
    found[0]
}

/// The value of `label:` in php-fpm's text status (`active processes:     2` → `2`).
fn text_field<'t>(text: &'t str, label: &str) -> &'t str {
    let prefix = format!("{label}:");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {label:?} line in the status:\n{text}"))
}
