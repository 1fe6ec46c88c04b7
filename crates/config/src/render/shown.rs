//! What `drover -t` shows for the keys whose declaration names a hook (`model.rs`,
//! `show(shown::NAME)`): a value in a unit, one that depends on the pool's runtime, or why
//! there is none. Each hook answers for the rows of its entry, as `(struct, key)`; the
//! plain shows (`of`, `optional`, `name`, `table`, `map`) are the declaration's own. The
//! order, the `[table]` headers, the comments and the TOML spelling are the walk's
//! (`render.rs`).

use super::{Shown, Shows, Size};
use crate::choices::{Protocol, SlowlogFormat, WorkerBoot};
use crate::keys::Choice as _;
use crate::model::{
    Global, Http, Interface, ListenAddr, LogTarget, Php, PhpRuntime, Pm, PmMemory, PmMode, Pool,
    Program, Python, Runtime, Tls,
};

pub(crate) fn error_log<'a>(global: &'a Global, _key: &str) -> Option<Shown<'a>> {
    Some(match &global.error_log {
        LogTarget::Stderr => Shown::of("stderr"),
        LogTarget::File(path) => Shown::of(path),
    })
}

pub(crate) fn health_listen<'a>(global: &'a Global, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::optional(
        global.health_listen.as_ref().map(address).as_ref(),
    ))
}

fn address(addr: &ListenAddr) -> String {
    addr.to_string()
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
}

/// The socket's keys: which apply depends on its kind.
pub(crate) fn socket<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let unix = !pool.listen.is_tcp();
    let unix_only = |shown: Shown<'static>| match unix {
        true => shown,
        false => Shown::unset("unix sockets only"),
    };
    Some(match key {
        "listen" if pool.listen == ListenAddr::NoSocket => {
            Shown::unset("a [program] pool has no socket")
        }
        "listen" => Shown::of(&address(&pool.listen)),
        "listen_owner" => unix_only(Shown::optional(pool.listen_owner.as_ref())),
        "listen_group" => unix_only(Shown::optional(pool.listen_group.as_ref())),
        "listen_mode" => unix_only(Shown::of(&format!("{:04o}", pool.listen_mode))),
        "listen_allowed_clients" if unix => Shown::unset("TCP addresses only"),
        "listen_allowed_clients" => {
            let clients = pool.listen_allowed_clients.iter().map(|ip| ip.to_string());
            Shown::of(&clients.collect::<Vec<_>>())
        }
        _ => return None,
    })
}

/// A timeout whose `"0s"` is off (`None` in the model).
pub(crate) fn off<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let timeout = match key {
        "request_slowlog_timeout" => pool.request_slowlog_timeout,
        "request_terminate_timeout" => pool.request_terminate_timeout,
        "request_read_timeout" => pool.request_read_timeout,
        _ => return None,
    };
    Some(Shown::of(&timeout.unwrap_or_default()))
}

pub(crate) fn slowlog_format<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    let format = match pool.slowlog_json {
        true => SlowlogFormat::Json,
        false => SlowlogFormat::Text,
    };
    Some(Shown::of(format.name()))
}

pub(crate) fn process_dumpable<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(match pool.zygote() || pool.process_dumpable {
        true => Shown::of(&pool.process_dumpable),
        false => Shown::unset(
            "drover-php and Python pools; php-cgi and [command] programs stay dumpable",
        ),
    })
}

pub(crate) fn terminate_grace<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    let wsgi = pool.interface() == Some(Interface::Wsgi);
    Some(match wsgi && pool.request_terminate_timeout.is_some() {
        true => Shown::of(&pool.terminate_grace),
        false => Shown::unset("WSGI pools with a request_terminate_timeout only"),
    })
}

pub(crate) fn queue_timeout<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(match pool.zygote() {
        true => Shown::of(&pool.queue_timeout.unwrap_or_default()),
        false => Shown::unset("drover-php and Python pools only"),
    })
}

pub(crate) fn status_listen<'a>(pool: &'a Pool, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::optional(
        pool.status_listen.as_ref().map(address).as_ref(),
    ))
}

/// `protocol`, and the HTTP pool's keys (`Http`'s rows): none on a FastCGI pool, and an
/// ASGI pool's WebSockets.
pub(crate) fn http<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    let protocol = match pool.http {
        Some(_) => Protocol::Http,
        None => Protocol::FastCgi,
    };
    let asgi = pool.interface() == Some(Interface::Asgi);
    Some(match (&pool.http, key) {
        (_, "protocol") => Shown::of(protocol.name()),
        (None, _) => Shown::Hidden,
        (Some(_), "ws_max_size") if !asgi => Shown::unset("ASGI pools only"),
        (Some(_), "send_timeout") if asgi => Shown::unset("WSGI pools only, for now"),
        (Some(http), _) => return http.shown(key),
    })
}

pub(crate) fn runtime<'a>(pool: &'a Pool, key: &str) -> Option<Shown<'a>> {
    if key != pool.runtime.name() {
        return Some(Shown::Hidden);
    }
    Some(Shown::Table(match &pool.runtime {
        Runtime::Php(php) => php as &dyn Shows,
        Runtime::Python(python) => python,
        Runtime::Command(command) => command,
        Runtime::Program(program) => program,
    }))
}

pub(crate) fn max_request_body<'a>(http: &'a Http, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        http.max_request_body.map(Size).as_ref(),
        "no limit",
    ))
}

pub(crate) fn ws_max_size<'a>(http: &'a Http, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::of(&Size(http.ws_max_size)))
}

pub(crate) fn tls<'a>(http: &'a Http, key: &str) -> Option<Shown<'a>> {
    match &http.tls {
        Some(tls) => tls.shown(key),
        None => Some(Shown::unset("no TLS: certfile not set")),
    }
}

pub(crate) fn keyfile<'a>(tls: &'a Tls, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(tls.keyfile.as_ref(), "the key in certfile"))
}

pub(crate) fn tls_settings<'a>(tls: &'a Tls, key: &str) -> Option<Shown<'a>> {
    let settings = &tls.settings;
    Some(match key {
        "cert_reqs" => Shown::of(settings.cert_reqs.name()),
        "ciphers" if settings.ciphers.is_empty() => Shown::unset("rustls's defaults"),
        "ciphers" => Shown::of(&settings.ciphers),
        "ssl_version" => Shown::of(settings.min_version.name()),
        _ => return None,
    })
}

pub(crate) fn max_children<'a>(pm: &'a Pm, _key: &str) -> Option<Shown<'a>> {
    Some(match pm.memory.auto {
        Some(_) => Shown::of("auto"),
        None => Shown::of(&pm.max_children),
    })
}

pub(crate) fn spares<'a>(pm: &'a Pm, key: &str) -> Option<Shown<'a>> {
    if pm.mode != PmMode::Dynamic {
        return Some(Shown::unset("pm.mode = \"dynamic\" only"));
    }
    Some(match key {
        "start_servers" => Shown::of(&pm.start_servers),
        "min_spare_servers" => Shown::of(&pm.min_spare_servers),
        "max_spare_servers" => Shown::of(&pm.max_spare_servers),
        _ => return None,
    })
}

pub(crate) fn max_memory<'a>(pm: &'a Pm, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(pm.max_memory.map(Size).as_ref(), "no limit"))
}

pub(crate) fn memory<'a>(pm: &'a Pm, key: &str) -> Option<Shown<'a>> {
    pm.memory.shown(key)
}

pub(crate) fn auto<'a>(memory: &'a PmMemory, key: &str) -> Option<Shown<'a>> {
    let Some((floor, ceiling)) = memory.auto else {
        return Some(Shown::unset("max_children = \"auto\" only"));
    };
    Some(match key {
        "auto_min_children" => Shown::of(&floor),
        "auto_max_children" => Shown::of(&ceiling),
        _ => return None,
    })
}

pub(crate) fn memory_reserve<'a>(memory: &'a PmMemory, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        memory.reserve.map(Size).as_ref(),
        "a tenth of the limit, 32 MiB to 1 GiB",
    ))
}

pub(crate) fn max_pool_memory<'a>(memory: &'a PmMemory, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        memory.max_pool_memory.map(Size).as_ref(),
        "no limit",
    ))
}

/// `[php]`'s keys that one runtime only takes: their values are in its variant.
pub(crate) fn php<'a>(php: &'a Php, key: &str) -> Option<Shown<'a>> {
    const EMBED_ONLY: &str = "runtime = \"embed\" only";
    Some(match (key, &php.runtime) {
        ("runtime", runtime) => Shown::of(runtime.name()),
        ("binary", PhpRuntime::Cgi { binary, .. }) => Shown::of(binary),
        ("binary", PhpRuntime::Embed { .. }) => Shown::unset("runtime = \"cgi\" only"),
        (
            "limit_extensions",
            PhpRuntime::Embed {
                limit_extensions, ..
            },
        ) => Shown::of(limit_extensions),
        ("limit_extensions", PhpRuntime::Cgi { any_file: true, .. }) => Shown::of::<[String]>(&[]),
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
        ("admin_ini", PhpRuntime::Embed { admin_ini, .. }) => Shown::Map(admin_ini),
        ("admin_ini", PhpRuntime::Cgi { .. }) => Shown::NoTable(EMBED_ONLY),
        _ => return None,
    })
}

pub(crate) fn app<'a>(python: &'a Python, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::of(&format!("{}:{}", python.module, python.callable)))
}

pub(crate) fn stop_timeout<'a>(program: &'a Program, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        program.stop_timeout.as_ref(),
        "process_control_timeout",
    ))
}
