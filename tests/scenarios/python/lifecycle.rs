//! What the factory, hooks and abort tests share: a Python pool on the fixture apps of
//! `tests/apps/` (`factory_app.py`, `hooks_app.py`, and `gunicorn_hooks.py`, a
//! gunicorn.conf.py used as the hooks file), with the keys those tests set.

use crate::common::{Drover, Location, Nginx, PoolFile, Site, Stack, TIMEOUT, pool_toml};

const APPS: [(&str, &str); 3] = [
    ("factory_app.py", include_str!("../../apps/factory_app.py")),
    ("hooks_app.py", include_str!("../../apps/hooks_app.py")),
    (
        "gunicorn_hooks.py",
        include_str!("../../apps/gunicorn_hooks.py"),
    ),
];

/// A static Python pool `py` on `<site>/py.sock`.
pub struct LifecyclePool {
    app: String,
    workers: u32,
    max_requests: Option<u32>,
    preload: bool,
    hooks: bool,
    /// Lines above `[pm]` (request_terminate_timeout, terminate_grace).
    top: String,
}

impl LifecyclePool {
    pub fn new(app: &str) -> LifecyclePool {
        LifecyclePool {
            app: app.to_string(),
            workers: 1,
            max_requests: None,
            preload: true,
            hooks: false,
            top: String::new(),
        }
    }

    /// `hooks_app:application` with `gunicorn_hooks.py` as its hooks file.
    pub fn hooked() -> LifecyclePool {
        LifecyclePool {
            hooks: true,
            ..LifecyclePool::new("hooks_app:application")
        }
    }

    pub fn workers(mut self, n: u32) -> LifecyclePool {
        self.workers = n;
        self
    }

    pub fn max_requests(mut self, n: u32) -> LifecyclePool {
        self.max_requests = Some(n);
        self
    }

    pub fn no_preload(mut self) -> LifecyclePool {
        self.preload = false;
        self
    }

    pub fn top(mut self, line: &str) -> LifecyclePool {
        self.top += line;
        self.top += "\n";
        self
    }

    /// The apps and `drover.toml` plus this pool's file, without starting anything.
    pub fn install(&self, site: &Site) {
        for (name, source) in APPS {
            site.write(&format!("apps/{name}"), source);
        }
        site.write(
            "drover.toml",
            "error_log = \"stderr\"\nlog_level = \"info\"\n",
        );
        site.write("pools.d/py.toml", &self.toml(site));
    }
}

impl PoolFile for LifecyclePool {
    fn name(&self) -> &str {
        "py"
    }

    fn toml(&self, site: &Site) -> String {
        let apps = site.path().join("apps");
        let mut pm = format!("[pm]\nmode = \"static\"\nmax_children = {}\n", self.workers);
        if let Some(n) = self.max_requests {
            pm += &format!("max_requests = {n}\n");
        }
        let mut python = format!(
            "[python]\napp = {:?}\npython_path = [{:?}]\npreload = {}\n",
            self.app,
            apps.display().to_string(),
            self.preload
        );
        if self.hooks {
            let hooks = apps.join("gunicorn_hooks.py");
            python += &format!("hooks = {:?}\n", hooks.display().to_string());
        }
        let env = format!(
            "[env]\nHOOKS_SITE = {:?}\n",
            site.path().display().to_string()
        );
        pool_toml(
            &site.socket("py"),
            &format!("{}\n{pm}\n{env}\n{python}", self.top),
        )
    }
}

/// drover serving `pool`, nginx passing every path to it.
pub fn lifecycle_stack(site: Site, pool: &LifecyclePool) -> Stack {
    pool.install(&site);
    let drover = Drover::spawn(&site);
    drover.log.wait_for_line("ready:", TIMEOUT);
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("py"))]);
    Stack {
        nginx,
        drover,
        site,
    }
}
