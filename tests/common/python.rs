//! Python pools: the fixture apps of `tests/apps/`, a `[python]` pool file, and what
//! drover's log says about zygotes and workers.
//!
//! The apps are copied into each test's site (`<site>/apps/`), so that CPython's
//! `__pycache__` lands in the temp dir, not in the repository.

use std::path::PathBuf;
use std::time::Duration;

use super::drover::{PoolFile, pool_toml};
use super::{Log, Site};

/// The fixture apps, by file name.
const APPS: [(&str, &str); 12] = [
    ("wsgi_app.py", include_str!("../apps/wsgi_app.py")),
    ("flask_app.py", include_str!("../apps/flask_app.py")),
    ("broken_app.py", include_str!("../apps/broken_app.py")),
    ("pep3333_app.py", include_str!("../apps/pep3333_app.py")),
    ("asgi_app.py", include_str!("../apps/asgi_app.py")),
    // A Django project, served as `djangosite.asgi:application`.
    (
        "djangosite/__init__.py",
        include_str!("../apps/djangosite/__init__.py"),
    ),
    (
        "djangosite/settings.py",
        include_str!("../apps/djangosite/settings.py"),
    ),
    (
        "djangosite/urls.py",
        include_str!("../apps/djangosite/urls.py"),
    ),
    (
        "djangosite/views.py",
        include_str!("../apps/djangosite/views.py"),
    ),
    (
        "djangosite/asgi.py",
        include_str!("../apps/djangosite/asgi.py"),
    ),
    (
        "djangosite/templates/form.html",
        include_str!("../apps/djangosite/templates/form.html"),
    ),
    ("asgi_ws_app.py", include_str!("../apps/asgi_ws_app.py")),
];

/// Writes the fixture apps into `<site>/apps/` and returns that folder.
pub fn install_apps(site: &Site) -> PathBuf {
    for (name, source) in APPS {
        site.write(&format!("apps/{name}"), source);
    }
    site.path().join("apps")
}

/// A static `[python]` pool on `<site>/<name>.sock`, its `python_path` the site's apps.
pub struct PythonPool {
    pub name: String,
    /// "module:callable"
    pub app: String,
    pub max_children: u32,
    /// (max_requests, max_requests_jitter)
    pub max_requests: Option<(u32, u32)>,
    /// `mount`, and the nginx location prefix of the pool.
    pub mount: Option<String>,
    /// `warmup` request paths.
    pub warmup: Vec<String>,
    /// `interface` when not the default ("wsgi").
    pub interface: Option<String>,
    /// More top-level keys, each on its own line.
    pub keys: String,
    /// `[python] threads`, when set.
    pub threads: Option<u32>,
    /// More `[python]` keys, each on its own line.
    pub python_keys: String,
}

impl PythonPool {
    pub fn new(name: &str, app: &str) -> PythonPool {
        PythonPool {
            name: name.to_string(),
            app: app.to_string(),
            max_children: 2,
            max_requests: None,
            mount: None,
            warmup: Vec::new(),
            interface: None,
            keys: String::new(),
            threads: None,
            python_keys: String::new(),
        }
    }

    /// A top-level key, `key = value` (the value as TOML writes it).
    pub fn key(mut self, key: &str, value: &str) -> PythonPool {
        self.keys += &format!("{key} = {value}\n");
        self
    }

    /// An ASGI app of `tests/apps/asgi_app.py` (`interface = "asgi"`).
    pub fn asgi(name: &str, callable: &str) -> PythonPool {
        let mut pool = PythonPool::new(name, &format!("asgi_app:{callable}"));
        pool.interface = Some("asgi".to_string());
        pool
    }

    /// The plain WSGI fixture, `wsgi_app:application`.
    pub fn wsgi(name: &str) -> PythonPool {
        PythonPool::new(name, "wsgi_app:application")
    }

    /// The Flask fixture, `flask_app:app`.
    pub fn flask(name: &str) -> PythonPool {
        PythonPool::new(name, "flask_app:app")
    }

    pub fn max_children(mut self, n: u32) -> PythonPool {
        self.max_children = n;
        self
    }

    pub fn max_requests(mut self, n: u32, jitter: u32) -> PythonPool {
        self.max_requests = Some((n, jitter));
        self
    }

    /// A `[python]` key, `key = value` (the value as TOML writes it).
    pub fn python_key(mut self, key: &str, value: &str) -> PythonPool {
        self.python_keys += &format!("{key} = {value}\n");
        self
    }

    /// `[python] threads`: each worker's threads taking requests.
    pub fn threads(mut self, n: u32) -> PythonPool {
        self.threads = Some(n);
        self
    }

    pub fn warmup(mut self, paths: &[&str]) -> PythonPool {
        self.warmup = paths.iter().map(|p| p.to_string()).collect();
        self
    }

    pub fn mount(mut self, prefix: &str) -> PythonPool {
        self.mount = Some(prefix.to_string());
        self
    }

    /// The nginx location prefix that reaches this pool: `/` or `<mount>/`.
    pub fn location(&self) -> String {
        match &self.mount {
            Some(mount) => format!("{mount}/"),
            None => "/".to_string(),
        }
    }
}

impl PoolFile for PythonPool {
    fn name(&self) -> &str {
        &self.name
    }

    fn toml(&self, site: &Site) -> String {
        let mut pm = format!("mode = \"static\"\nmax_children = {}\n", self.max_children);
        if let Some((n, jitter)) = self.max_requests {
            pm += &format!("max_requests = {n}\nmax_requests_jitter = {jitter}\n");
        }
        let mut python = format!(
            "app = \"{}\"\npython_path = [\"{}\"]\n",
            self.app,
            site.path().join("apps").display()
        );
        if let Some(mount) = &self.mount {
            python += &format!("mount = \"{mount}\"\n");
        }
        if let Some(interface) = &self.interface {
            python += &format!("interface = \"{interface}\"\n");
        }
        python += &self.python_keys;
        if let Some(threads) = self.threads {
            python += &format!("threads = {threads}\n");
        }
        if !self.warmup.is_empty() {
            let quoted: Vec<String> = self.warmup.iter().map(|p| format!("{p:?}")).collect();
            python += &format!("warmup = [{}]\n", quoted.join(", "));
        }
        pool_toml(
            &site.socket(&self.name),
            &format!("{}[pm]\n{pm}\n[python]\n{python}", self.keys),
        )
    }
}

/// `pool POOL: ROLE PID started` → PID, for `role` "worker" or "python zygote".
pub fn started_pid(line: &str, pool: &str, role: &str) -> Option<i32> {
    let rest = line.split(&format!("pool {pool}: {role} ")).nth(1)?;
    let (pid, rest) = rest.split_once(' ')?;
    rest.starts_with("started").then(|| pid.parse().ok())?
}

/// Waits for `n` `ROLE PID started` lines of `pool` from log line `from` on; their pids.
pub fn wait_started(
    log: &Log,
    from: usize,
    pool: &str,
    role: &str,
    n: usize,
    timeout: Duration,
) -> Vec<i32> {
    let what = format!("pool {pool}: {role} PID started");
    log.wait_for_lines(
        from,
        &what,
        |l| started_pid(l, pool, role).is_some(),
        n,
        timeout,
    )
    .iter()
    .filter_map(|l| started_pid(l, pool, role))
    .collect()
}

/// Every `ROLE PID started` line of `pool` so far; their pids.
pub fn started_so_far(log: &Log, pool: &str, role: &str) -> Vec<i32> {
    log.lines()
        .iter()
        .filter_map(|l| started_pid(l, pool, role))
        .collect()
}
