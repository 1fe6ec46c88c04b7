//! `drover -t`: the resolved configuration, every key with its value or default, one block
//! per file. Each block is valid TOML that loads back to the same settings; keys that are
//! unset or do not apply are shown as comments so that the block still lists every key.
//! The keys come in the order of the key table ([`super::keys`]), with its defaults: a test
//! (`config::tests::keys`) renders pools of every runtime and compares.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use super::model::{
    Command, Config, Global, Interface, ListenAddr, LogLevel, LogTarget, Php, PhpRuntime, PmMode,
    Pool, Program, Python, Runtime,
};
use super::value::toml_key;

impl Config {
    pub fn render(&self) -> String {
        let mut out = Out::default();
        out.comment(&format!("global ({})", self.path.display()));
        global(&mut out, &self.global);
        for pool in &self.pools {
            out.blank();
            out.comment(&format!("pool {} ({})", pool.name, pool.file.display()));
            if matches!(pool.runtime, Runtime::Program(_)) {
                // A background pool's block says which keys it takes no value for, so
                // that it loads back (`drover ctl config`, `drover ctl probe`).
                let mut block = Out::default();
                self::pool(&mut block, pool);
                out.0 += &without_refused(&block.0);
            } else {
                self::pool(&mut out, pool);
            }
        }
        out.0
    }
}

fn global(out: &mut Out, g: &Global) {
    match &g.error_log {
        LogTarget::Stderr => out.string("error_log", "stderr"),
        LogTarget::File(path) => out.path("error_log", path),
    }
    let level = match g.log_level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    };
    out.string("log_level", level);
    out.string("log_format", g.log_format.as_str());
    out.optional_path("pid_file", g.pid_file.as_deref());
    out.strings("include", &g.include);
    out.duration("process_control_timeout", g.process_control_timeout);
    out.raw("emergency_restart_threshold", g.emergency_restart_threshold);
    out.duration("emergency_restart_interval", g.emergency_restart_interval);
    out.duration("shutdown_delay", g.shutdown_delay);
    out.raw("exit_on_app_failure", g.exit_on_app_failure);
    let health = g.health_listen.as_ref().map(ToString::to_string);
    out.optional_string("health_listen", health.as_deref(), None);
    out.table("control");
    out.optional_path("listen", g.control.listen.as_deref());
}

fn pool(out: &mut Out, p: &Pool) {
    if p.listen == ListenAddr::NoSocket {
        out.unset("listen", "a [program] pool has no socket");
    } else {
        out.string("listen", &p.listen.to_string());
    }
    out.raw("listen_backlog", p.listen_backlog);
    let unix = !p.listen.is_tcp();
    let only = |applies: bool, what: &str| (!applies).then(|| format!("{what} only"));
    let unix_only = only(unix, "unix sockets");
    out.optional_string(
        "listen_owner",
        p.listen_owner.as_deref(),
        unix_only.as_deref(),
    );
    out.optional_string(
        "listen_group",
        p.listen_group.as_deref(),
        unix_only.as_deref(),
    );
    let mode = format!("{:04o}", p.listen_mode);
    out.optional_string("listen_mode", Some(&mode), unix_only.as_deref());
    let clients: Vec<String> = p
        .listen_allowed_clients
        .iter()
        .map(|ip| ip.to_string())
        .collect();
    match only(!unix, "TCP addresses") {
        None => out.strings("listen_allowed_clients", &clients),
        Some(why) => out.unset("listen_allowed_clients", &why),
    }
    out.optional_string("user", p.user.as_deref(), None);
    out.optional_string("group", p.group.as_deref(), None);
    out.optional_path("chdir", p.chdir.as_deref());
    out.raw("clear_env", p.clear_env);
    out.duration(
        "request_slowlog_timeout",
        p.request_slowlog_timeout.unwrap_or_default(),
    );
    out.raw("request_slowlog_trace_depth", p.request_slowlog_trace_depth);
    out.optional_path("slowlog", p.slowlog.as_deref());
    out.string(
        "slowlog_format",
        if p.slowlog_json { "json" } else { "text" },
    );
    out.raw("decorate_workers_output", p.decorate_workers_output);
    let zygote = match &p.runtime {
        Runtime::Php(php) => matches!(php.runtime, PhpRuntime::Embed { .. }),
        Runtime::Python(_) => true,
        Runtime::Command(_) | Runtime::Program(_) => false,
    };
    if zygote || p.process_dumpable {
        out.raw("process_dumpable", p.process_dumpable);
    } else {
        out.unset(
            "process_dumpable",
            "drover-php and Python pools; php-cgi and [command] programs stay dumpable",
        );
    }
    out.duration(
        "request_terminate_timeout",
        p.request_terminate_timeout.unwrap_or_default(),
    );
    let wsgi = matches!(&p.runtime, Runtime::Python(py) if py.interface == Interface::Wsgi);
    if wsgi && p.request_terminate_timeout.is_some() {
        out.duration("terminate_grace", p.terminate_grace);
    } else {
        out.unset(
            "terminate_grace",
            "WSGI pools with a request_terminate_timeout only",
        );
    }
    out.duration(
        "request_read_timeout",
        p.request_read_timeout.unwrap_or_default(),
    );
    if zygote {
        out.duration("queue_timeout", p.queue_timeout.unwrap_or_default());
    } else {
        out.unset("queue_timeout", "drover-php and Python pools only");
    }
    let status = p.status_listen.as_ref().map(ListenAddr::to_string);
    out.optional_string("status_listen", status.as_deref(), None);
    out.optional_string("status_path", p.status_path.as_deref(), None);
    out.optional_string("ping_path", p.ping_path.as_deref(), None);
    out.string("ping_response", &p.ping_response);
    out.optional_path("access_log", p.access_log.as_deref());
    out.string("access_format", &p.access_format);
    out.strings("access_suppress_path", &p.access_suppress_path);
    out.string(
        "protocol",
        if p.http.is_some() { "http" } else { "fastcgi" },
    );
    if let Some(http) = &p.http {
        out.duration("keepalive_timeout", http.keepalive_timeout);
        let asgi = matches!(&p.runtime, Runtime::Python(py) if py.interface == Interface::Asgi);
        out.strings("forwarded_allow_ips", &http.forwarded_allow_ips);
        match http.max_request_body {
            Some(bytes) => out.string("max_request_body", &size(bytes)),
            None => out.unset("max_request_body", "no limit"),
        }
        if asgi {
            out.string("ws_max_size", &size(http.ws_max_size));
            out.unset("send_timeout", "WSGI pools only, for now");
        } else {
            out.unset("ws_max_size", "ASGI pools only");
            out.duration("send_timeout", http.send_timeout);
        }
        match &http.tls {
            Some(tls) => {
                out.path("certfile", &tls.certfile);
                match &tls.keyfile {
                    Some(path) => out.path("keyfile", path),
                    None => out.unset("keyfile", "the key in certfile"),
                }
                out.optional_path("ca_certs", tls.ca_certs.as_deref());
                out.string("cert_reqs", tls.settings.cert_reqs.name());
                if tls.settings.ciphers.is_empty() {
                    out.unset("ciphers", "rustls's defaults");
                } else {
                    out.strings("ciphers", &tls.settings.ciphers);
                }
                out.string("ssl_version", tls.settings.min_version.name());
            }
            None => {
                for key in [
                    "certfile",
                    "keyfile",
                    "ca_certs",
                    "cert_reqs",
                    "ciphers",
                    "ssl_version",
                ] {
                    out.unset(key, "no TLS: certfile not set");
                }
            }
        }
    }

    let pm = &p.pm;
    out.table("pm");
    out.string("mode", pm.mode.as_str());
    match pm.memory.auto {
        Some(_) => out.string("max_children", "auto"),
        None => out.raw("max_children", pm.max_children),
    }
    for (key, value) in [
        ("start_servers", pm.start_servers),
        ("min_spare_servers", pm.min_spare_servers),
        ("max_spare_servers", pm.max_spare_servers),
    ] {
        match pm.mode {
            PmMode::Dynamic => out.raw(key, value),
            _ => out.unset(key, "pm.mode = \"dynamic\" only"),
        }
    }
    out.raw("max_spawn_rate", pm.max_spawn_rate);
    out.duration("process_idle_timeout", pm.process_idle_timeout);
    out.raw("max_requests", pm.max_requests);
    out.raw("max_requests_jitter", pm.max_requests_jitter);
    match pm.max_memory {
        Some(bytes) => out.string("max_memory", &size(bytes)),
        None => out.unset("max_memory", "no limit"),
    }
    match pm.memory.auto {
        Some((floor, ceiling)) => {
            out.raw("auto_min_children", floor);
            out.raw("auto_max_children", ceiling);
        }
        None => {
            out.unset("auto_min_children", "max_children = \"auto\" only");
            out.unset("auto_max_children", "max_children = \"auto\" only");
        }
    }
    match pm.memory.reserve {
        Some(bytes) => out.string("memory_reserve", &size(bytes)),
        None => out.unset("memory_reserve", "a tenth of the limit, 32 MiB to 1 GiB"),
    }
    match pm.memory.max_pool_memory {
        Some(bytes) => out.string("max_pool_memory", &size(bytes)),
        None => out.unset("max_pool_memory", "no limit"),
    }

    out.table("env");
    for (name, value) in &p.env {
        out.string(&toml_key(name), value);
    }
    match &p.runtime {
        Runtime::Php(php) => self::php(out, php),
        Runtime::Python(python) => self::python(out, python),
        Runtime::Command(command) => self::command(out, command),
        Runtime::Program(program) => self::program(out, program),
    }
}

fn php(out: &mut Out, php: &Php) {
    out.table("php");
    out.string("runtime", php.runtime.name());
    let embed_only = "runtime = \"embed\" only";
    match &php.runtime {
        PhpRuntime::Cgi { binary, .. } => out.path("binary", binary),
        PhpRuntime::Embed { .. } => out.unset("binary", "runtime = \"cgi\" only"),
    }
    out.optional_path("ini_file", php.ini_file.as_deref());
    match &php.runtime {
        PhpRuntime::Embed {
            limit_extensions, ..
        } => out.strings("limit_extensions", limit_extensions),
        PhpRuntime::Cgi { any_file: true, .. } => out.strings("limit_extensions", &[]),
        PhpRuntime::Cgi { .. } => out.unset(
            "limit_extensions",
            "runtime = \"embed\" only, or [] for any file",
        ),
    }
    match &php.runtime {
        PhpRuntime::Embed {
            worker,
            boot_in_zygote,
            ..
        } => {
            out.optional_path("worker", worker.as_deref());
            out.string(
                "worker_boot",
                if *boot_in_zygote { "zygote" } else { "worker" },
            );
        }
        PhpRuntime::Cgi { .. } => {
            out.unset("worker", embed_only);
            out.unset("worker_boot", embed_only);
        }
    }
    out.table("php.ini");
    for (name, value) in &php.ini {
        out.string(&toml_key(name), value);
    }
    match &php.runtime {
        PhpRuntime::Embed { admin_ini, .. } => {
            out.table("php.admin_ini");
            for (name, value) in admin_ini {
                out.string(&toml_key(name), value);
            }
        }
        PhpRuntime::Cgi { .. } => {
            out.blank();
            out.comment(&format!("[php.admin_ini] ({embed_only})"));
        }
    }
}

fn python(out: &mut Out, py: &Python) {
    out.table("python");
    out.string("app", &format!("{}:{}", py.module, py.callable));
    let paths: Vec<String> = py
        .python_path
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    out.strings("python_path", &paths);
    out.optional_path("virtualenv", py.virtualenv.as_deref());
    out.raw("preload", py.preload);
    out.string("mount", &py.mount);
    out.strings("warmup", &py.warmup);
    out.optional_string("hooks", py.hooks.as_deref(), None);
    out.string("interface", py.interface.as_str());
    out.raw("threads", py.threads);
}

fn command(out: &mut Out, command: &Command) {
    out.table("command");
    out.strings("argv", &command.argv);
}

/// A `[program]` pool's rendered block with each key it refuses
/// (`config::program::refused`) as a comment.
fn without_refused(block: &str) -> String {
    let mut table = String::new();
    let mut out = String::new();
    for line in block.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = name.to_owned();
        }
        let key = line.split_once(" = ").map(|(key, _)| key);
        let path = match key {
            Some(key) if table.is_empty() => key.to_owned(),
            Some(key) => format!("{table}.{key}"),
            None => String::new(),
        };
        if key.is_some() && super::program::refused(&path).is_some() {
            let key = key.unwrap_or_default();
            out += &format!("# {key} = (a [program] pool takes none)\n");
        } else {
            out += line;
            out.push('\n');
        }
    }
    out
}

fn program(out: &mut Out, program: &Program) {
    out.table("program");
    out.strings("command", &program.command);
    out.string("stop_signal", &program.stop_signal);
    match program.stop_timeout {
        Some(timeout) => out.duration("stop_timeout", timeout),
        None => out.unset("stop_timeout", "process_control_timeout"),
    }
    match program.max_lifetime {
        Some(lifetime) => out.duration("max_lifetime", lifetime),
        None => out.unset("max_lifetime", "not set"),
    }
    out.duration("max_lifetime_jitter", program.max_lifetime_jitter);
}

/// The largest binary unit that states the size exactly, so it parses back unchanged.
fn size(bytes: u64) -> String {
    for (unit, factor) in [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}

fn quote(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[derive(Default)]
struct Out(String);

impl Out {
    fn line(&mut self, text: &str) {
        self.0.push_str(text);
        self.0.push('\n');
    }

    fn blank(&mut self) {
        self.line("");
    }

    fn comment(&mut self, text: &str) {
        self.line(&format!("# {text}"));
    }

    fn table(&mut self, name: &str) {
        self.blank();
        self.line(&format!("[{name}]"));
    }

    fn raw(&mut self, key: &str, value: impl std::fmt::Display) {
        let _ = writeln!(self.0, "{key} = {value}");
    }

    fn string(&mut self, key: &str, value: &str) {
        self.raw(key, quote(value));
    }

    fn path(&mut self, key: &str, value: &Path) {
        self.string(key, &value.display().to_string());
    }

    fn strings(&mut self, key: &str, values: &[String]) {
        let items: Vec<String> = values.iter().map(|v| quote(v)).collect();
        self.raw(key, format!("[{}]", items.join(", ")));
    }

    fn duration(&mut self, key: &str, value: Duration) {
        self.string(key, &humantime::format_duration(value).to_string());
    }

    /// A key with no value, or one that does not apply (`why`).
    fn unset(&mut self, key: &str, why: &str) {
        self.comment(&format!("{key} = ({why})"));
    }

    fn optional_string(&mut self, key: &str, value: Option<&str>, not_applicable: Option<&str>) {
        match (not_applicable, value) {
            (Some(why), _) => self.unset(key, why),
            (None, Some(value)) => self.string(key, value),
            (None, None) => self.unset(key, "not set"),
        }
    }

    fn optional_path(&mut self, key: &str, value: Option<&Path>) {
        match value {
            Some(path) => self.path(key, path),
            None => self.unset(key, "not set"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{MINIMAL, loaded};
    use super::*;

    #[test]
    fn a_rendered_pool_loads_back_the_same() {
        let pool = MINIMAL
            .replace("mode = \"static\"", "mode = \"dynamic\"\nmin_spare_servers = 1\nmax_spare_servers = 3\nmax_memory = \"1536KiB\"")
            .replace("[php]", "[env]\nA = \"b\"\n[php]\n[php.ini]\n\"opcache.enable\" = 1");
        let (_dir, config) = loaded(&[("www", &pool)]);
        let text = config.render();
        let block = text.split("# pool www (").nth(1).unwrap();
        let (_dir2, again) = loaded(&[("www", block.split_once('\n').unwrap().1)]);
        let (mut a, b) = (config.pools[0].clone(), again.pools[0].clone());
        a.file = b.file.clone();
        assert_eq!(a, b, "rendered:\n{text}");
    }

    #[test]
    fn a_rendered_http_pool_loads_back_the_same() {
        let pool = MINIMAL.replace("[php]\nbinary = \"/bin/sh\"", "[python]\napp = \"app\"");
        let pool = format!(
            "protocol = \"http\"\nkeepalive_timeout = \"5s\"\nforwarded_allow_ips = [\"10.0.0.5\"]\n\
             max_request_body = \"20MiB\"\nsend_timeout = \"7s\"\n{pool}"
        );
        let (_dir, config) = loaded(&[("www", &pool)]);
        let text = config.render();
        let block = text.split("# pool www (").nth(1).unwrap();
        let (_dir2, again) = loaded(&[("www", block.split_once('\n').unwrap().1)]);
        let (mut a, b) = (config.pools[0].clone(), again.pools[0].clone());
        a.file = b.file.clone();
        assert!(a.http.is_some());
        assert_eq!(a, b, "rendered:\n{text}");
    }

    #[test]
    fn a_rendered_asgi_http_pool_keeps_ws_max_size() {
        let pool = MINIMAL.replace(
            "[php]\nbinary = \"/bin/sh\"",
            "[python]\napp = \"app\"\ninterface = \"asgi\"",
        );
        let pool = format!("protocol = \"http\"\nws_max_size = \"4MiB\"\n{pool}");
        let (_dir, config) = loaded(&[("www", &pool)]);
        let text = config.render();
        assert!(text.contains("ws_max_size = \"4MiB\""), "{text}");
        let block = text.split("# pool www (").nth(1).unwrap();
        let (_dir2, again) = loaded(&[("www", block.split_once('\n').unwrap().1)]);
        let (mut a, b) = (config.pools[0].clone(), again.pools[0].clone());
        a.file = b.file.clone();
        assert_eq!(a, b, "rendered:\n{text}");
    }

    #[test]
    fn sizes_render_exactly() {
        assert_eq!(size(256 << 20), "256MiB");
        assert_eq!(size(1 << 30), "1GiB");
        assert_eq!(size(1000), "1000B");
        assert_eq!(toml_key("opcache.enable"), "\"opcache.enable\"");
        assert_eq!(toml_key("memory_limit"), "memory_limit");
    }
}
