//! What each key of each section shows in `drover -t`: one [`Shows`] impl per model struct,
//! one arm per row of its section. The order, the `[table]` headers, the comments and the
//! TOML spelling are the walk's (`render.rs`); an arm says only which value, or why none.

use super::{Shown, Shows, Size};
use crate::choices::{Protocol, SlowlogFormat, WorkerBoot};
use crate::keys::{self, Choice as _};
use crate::model::{
    Command, Control, Global, Http, Interface, ListenAddr, LogTarget, Php, PhpRuntime, Pm, PmMode,
    Pool, Program, Python, Runtime, Tls,
};

impl Shows for Global {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        Some(match key {
            "error_log" => match &self.error_log {
                LogTarget::Stderr => Shown::of("stderr"),
                LogTarget::File(path) => Shown::of(path),
            },
            "log_level" => Shown::of(self.log_level.name()),
            "log_format" => Shown::of(self.log_format.name()),
            "pid_file" => Shown::optional(self.pid_file.as_ref()),
            "include" => Shown::of(&self.include),
            "process_control_timeout" => Shown::of(&self.process_control_timeout),
            "emergency_restart_threshold" => Shown::of(&self.emergency_restart_threshold),
            "emergency_restart_interval" => Shown::of(&self.emergency_restart_interval),
            "shutdown_delay" => Shown::of(&self.shutdown_delay),
            "exit_on_app_failure" => Shown::of(&self.exit_on_app_failure),
            "health_listen" => Shown::optional(self.health_listen.as_ref().map(address).as_ref()),
            "control" => Shown::Table(&self.control),
            _ => return None,
        })
    }
}

impl Shows for Control {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        match key {
            "listen" => Some(Shown::optional(self.listen.as_ref())),
            _ => None,
        }
    }
}

fn address(addr: &ListenAddr) -> String {
    addr.to_string()
}

/// Whether only an HTTP pool takes `key` (a FastCGI pool's block leaves it out).
fn http_only(key: &str) -> bool {
    keys::http_only().any(|k| k.name == key)
}

impl Pool {
    /// Whether a zygote of drover's own starts the workers (drover-php, Python).
    fn zygote(&self) -> bool {
        match &self.runtime {
            Runtime::Php(php) => matches!(php.runtime, PhpRuntime::Embed { .. }),
            Runtime::Python(_) => true,
            Runtime::Command(_) | Runtime::Program(_) => false,
        }
    }

    fn interface(&self) -> Option<Interface> {
        match &self.runtime {
            Runtime::Python(python) => Some(python.interface),
            _ => None,
        }
    }

    /// The socket's keys: which apply depends on its kind.
    fn socket(&self, key: &str) -> Option<Shown<'_>> {
        let unix = !self.listen.is_tcp();
        let unix_only = |shown: Shown<'static>| match unix {
            true => shown,
            false => Shown::unset("unix sockets only"),
        };
        Some(match key {
            "listen" if self.listen == ListenAddr::NoSocket => {
                Shown::unset("a [program] pool has no socket")
            }
            "listen" => Shown::of(&address(&self.listen)),
            "listen_backlog" => Shown::of(&self.listen_backlog),
            "listen_owner" => unix_only(Shown::optional(self.listen_owner.as_ref())),
            "listen_group" => unix_only(Shown::optional(self.listen_group.as_ref())),
            "listen_mode" => unix_only(Shown::of(&format!("{:04o}", self.listen_mode))),
            "listen_allowed_clients" if unix => Shown::unset("TCP addresses only"),
            "listen_allowed_clients" => {
                let clients = self.listen_allowed_clients.iter().map(|ip| ip.to_string());
                Shown::of(&clients.collect::<Vec<_>>())
            }
            _ => return None,
        })
    }
}

impl Shows for Pool {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        let off = |timeout: Option<std::time::Duration>| Shown::of(&timeout.unwrap_or_default());
        let wsgi = self.interface() == Some(Interface::Wsgi);
        Some(match key {
            "user" => Shown::optional(self.user.as_ref()),
            "group" => Shown::optional(self.group.as_ref()),
            "chdir" => Shown::optional(self.chdir.as_ref()),
            "clear_env" => Shown::of(&self.clear_env),
            "request_slowlog_timeout" => off(self.request_slowlog_timeout),
            "request_slowlog_trace_depth" => Shown::of(&self.request_slowlog_trace_depth),
            "slowlog" => Shown::optional(self.slowlog.as_ref()),
            "slowlog_format" => Shown::of(
                match self.slowlog_json {
                    true => SlowlogFormat::Json,
                    false => SlowlogFormat::Text,
                }
                .name(),
            ),
            "decorate_workers_output" => Shown::of(&self.decorate_workers_output),
            "process_dumpable" if self.zygote() || self.process_dumpable => {
                Shown::of(&self.process_dumpable)
            }
            "process_dumpable" => Shown::unset(
                "drover-php and Python pools; php-cgi and [command] programs stay dumpable",
            ),
            "rlimit_files" => Shown::optional(self.rlimit_files.as_ref()),
            "request_terminate_timeout" => off(self.request_terminate_timeout),
            "terminate_grace" if wsgi && self.request_terminate_timeout.is_some() => {
                Shown::of(&self.terminate_grace)
            }
            "terminate_grace" => Shown::unset("WSGI pools with a request_terminate_timeout only"),
            "request_read_timeout" => off(self.request_read_timeout),
            "queue_timeout" if self.zygote() => off(self.queue_timeout),
            "queue_timeout" => Shown::unset("drover-php and Python pools only"),
            "status_listen" => Shown::optional(self.status_listen.as_ref().map(address).as_ref()),
            "status_path" => Shown::optional(self.status_path.as_ref()),
            "ping_path" => Shown::optional(self.ping_path.as_ref()),
            "ping_response" => Shown::of(&self.ping_response),
            "access_log" => Shown::optional(self.access_log.as_ref()),
            "access_format" => Shown::of(&self.access_format),
            "access_suppress_path" => Shown::of(&self.access_suppress_path),
            "protocol" => Shown::of(
                match self.http {
                    Some(_) => Protocol::Http,
                    None => Protocol::FastCgi,
                }
                .name(),
            ),
            "pm" => Shown::Table(&self.pm),
            "env" => Shown::Map(&self.env),
            "php" | "python" | "command" | "program" if key != self.runtime.name() => Shown::Hidden,
            "php" | "python" | "command" | "program" => Shown::Table(match &self.runtime {
                Runtime::Php(php) => php as &dyn Shows,
                Runtime::Python(python) => python,
                Runtime::Command(command) => command,
                Runtime::Program(program) => program,
            }),
            _ if !http_only(key) => return self.socket(key),
            _ => match &self.http {
                Some(http) => return http.shown(key, self.interface()),
                None => Shown::Hidden,
            },
        })
    }
}

impl Http {
    /// An HTTP pool's keys (`interface`: its app's, ASGI's taking WebSockets).
    fn shown(&self, key: &str, interface: Option<Interface>) -> Option<Shown<'_>> {
        let asgi = interface == Some(Interface::Asgi);
        Some(match key {
            "keepalive_timeout" => Shown::of(&self.keepalive_timeout),
            "forwarded_allow_ips" => Shown::of(&self.forwarded_allow_ips),
            "max_request_body" => Shown::or(self.max_request_body.map(Size).as_ref(), "no limit"),
            "ws_max_size" if asgi => Shown::of(&Size(self.ws_max_size)),
            "ws_max_size" => Shown::unset("ASGI pools only"),
            "send_timeout" => Shown::of(&self.send_timeout),
            _ => match &self.tls {
                Some(tls) => return tls.shown(key),
                None => Shown::unset("no TLS: certfile not set"),
            },
        })
    }
}

impl Tls {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        Some(match key {
            "certfile" => Shown::of(&self.certfile),
            "keyfile" => Shown::or(self.keyfile.as_ref(), "the key in certfile"),
            "ca_certs" => Shown::optional(self.ca_certs.as_ref()),
            "cert_reqs" => Shown::of(self.settings.cert_reqs.name()),
            "ciphers" if self.settings.ciphers.is_empty() => Shown::unset("rustls's defaults"),
            "ciphers" => Shown::of(&self.settings.ciphers),
            "ssl_version" => Shown::of(self.settings.min_version.name()),
            _ => return None,
        })
    }
}

impl Shows for Pm {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        let auto = |value: fn((u32, u32)) -> u32| match self.memory.auto {
            Some(bounds) => Shown::of(&value(bounds)),
            None => Shown::unset("max_children = \"auto\" only"),
        };
        let size = |bytes: Option<u64>, why| Shown::or(bytes.map(Size).as_ref(), why);
        Some(match key {
            "mode" => Shown::of(self.mode.name()),
            "max_children" if self.memory.auto.is_some() => Shown::of("auto"),
            "max_children" => Shown::of(&self.max_children),
            "start_servers" | "min_spare_servers" | "max_spare_servers"
                if self.mode != PmMode::Dynamic =>
            {
                Shown::unset("pm.mode = \"dynamic\" only")
            }
            "start_servers" => Shown::of(&self.start_servers),
            "min_spare_servers" => Shown::of(&self.min_spare_servers),
            "max_spare_servers" => Shown::of(&self.max_spare_servers),
            "max_spawn_rate" => Shown::of(&self.max_spawn_rate),
            "process_idle_timeout" => Shown::of(&self.process_idle_timeout),
            "max_requests" => Shown::of(&self.max_requests),
            "max_requests_jitter" => Shown::of(&self.max_requests_jitter),
            "max_memory" => size(self.max_memory, "no limit"),
            "auto_min_children" => auto(|(floor, _)| floor),
            "auto_max_children" => auto(|(_, ceiling)| ceiling),
            "memory_reserve" => size(self.memory.reserve, "a tenth of the limit, 32 MiB to 1 GiB"),
            "max_pool_memory" => size(self.memory.max_pool_memory, "no limit"),
            _ => return None,
        })
    }
}

impl Shows for Php {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        const EMBED_ONLY: &str = "runtime = \"embed\" only";
        Some(match (key, &self.runtime) {
            ("runtime", runtime) => Shown::of(runtime.name()),
            ("binary", PhpRuntime::Cgi { binary, .. }) => Shown::of(binary),
            ("binary", PhpRuntime::Embed { .. }) => Shown::unset("runtime = \"cgi\" only"),
            ("ini_file", _) => Shown::optional(self.ini_file.as_ref()),
            (
                "limit_extensions",
                PhpRuntime::Embed {
                    limit_extensions, ..
                },
            ) => Shown::of(limit_extensions),
            ("limit_extensions", PhpRuntime::Cgi { any_file: true, .. }) => {
                Shown::of::<[String]>(&[])
            }
            ("limit_extensions", PhpRuntime::Cgi { .. }) => {
                Shown::unset("runtime = \"embed\" only, or [] for any file")
            }
            ("worker", PhpRuntime::Embed { worker, .. }) => Shown::optional(worker.as_ref()),
            ("worker_boot", PhpRuntime::Embed { boot_in_zygote, .. }) => Shown::of(
                match boot_in_zygote {
                    true => WorkerBoot::Zygote,
                    false => WorkerBoot::Worker,
                }
                .name(),
            ),
            ("worker" | "worker_boot", PhpRuntime::Cgi { .. }) => Shown::unset(EMBED_ONLY),
            ("ini", _) => Shown::Map(&self.ini),
            ("admin_ini", PhpRuntime::Embed { admin_ini, .. }) => Shown::Map(admin_ini),
            ("admin_ini", PhpRuntime::Cgi { .. }) => Shown::NoTable(EMBED_ONLY),
            _ => return None,
        })
    }
}

impl Shows for Python {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        Some(match key {
            "app" => Shown::of(&format!("{}:{}", self.module, self.callable)),
            "python_path" => Shown::of(&self.python_path),
            "virtualenv" => Shown::optional(self.virtualenv.as_ref()),
            "preload" => Shown::of(&self.preload),
            "mount" => Shown::of(&self.mount),
            "warmup" => Shown::of(&self.warmup),
            "hooks" => Shown::optional(self.hooks.as_ref()),
            "interface" => Shown::of(self.interface.name()),
            "threads" => Shown::of(&self.threads),
            _ => return None,
        })
    }
}

impl Shows for Command {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        match key {
            "argv" => Some(Shown::of(&self.argv)),
            _ => None,
        }
    }
}

impl Shows for Program {
    fn shown(&self, key: &str) -> Option<Shown<'_>> {
        Some(match key {
            "command" => Shown::of(&self.command),
            "stop_signal" => Shown::of(&self.stop_signal),
            "stop_timeout" => Shown::or(self.stop_timeout.as_ref(), "process_control_timeout"),
            "max_lifetime" => Shown::optional(self.max_lifetime.as_ref()),
            "max_lifetime_jitter" => Shown::of(&self.max_lifetime_jitter),
            _ => return None,
        })
    }
}
