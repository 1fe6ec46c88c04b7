//! gunicorn's `bind` (and the socket's `umask`, `user`, `group`) as the pool's `listen`,
//! and the nginx change that goes with it.

use std::net::SocketAddr;
#[cfg(test)]
use std::path::Path;

use serde_json::Value as Json;

use super::{DEFAULT_BIND, Mapper, origin, strings};
#[cfg(test)]
use crate::import::doc::Doc;
use crate::import::doc::Value;
use crate::import::gunicorn::Setting;

/// gunicorn's bind as drover's listen: (address, is a unix socket).
pub(super) fn listen(bind: Option<&Setting>, m: &mut Mapper) -> Option<(String, bool)> {
    let Some(bind) = bind else {
        return Some((DEFAULT_BIND.to_owned(), false));
    };
    let addresses = strings(&bind.value);
    let Some(first) = addresses.first() else {
        m.note(bind, "refused: no address");
        return None;
    };
    if addresses.len() > 1 {
        m.note(
            bind,
            &format!(
                "only {first} carried over: a drover pool listens on one address; nginx \
                 reaches it there"
            ),
        );
    }
    if let Some(path) = first.strip_prefix("unix:") {
        return Some((m.path(path), true));
    }
    if first.starts_with("fd://") {
        m.note(
            bind,
            "refused: drover takes a socket from systemd by name (socket activation), not \
             by number; see docs/systemd.md, Socket activation",
        );
        return None;
    }
    let (host, port) = match first.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() && !host.ends_with(':') => (host, port),
        // gunicorn's port when none is given.
        _ => (first.as_str(), "8000"),
    };
    let address = match host {
        "" => port.to_owned(),
        "localhost" => format!("127.0.0.1:{port}"),
        _ => format!("{host}:{port}"),
    };
    if address.parse::<SocketAddr>().is_err() && address.parse::<u16>().is_err() {
        m.note(
            bind,
            &format!("refused: drover takes an IP address, not the host name {host}"),
        );
        return None;
    }
    if address != *first {
        m.note(bind, &format!("carried over as {address}"));
    }
    Some((address, false))
}

/// A unix socket as gunicorn made it: owned by the workers' user and group, its mode what
/// the umask (0 by default) leaves of 0777, so that nginx can connect as before.
pub(super) fn socket_access(
    umask: Option<&Setting>,
    user: Option<&Setting>,
    group: Option<&Setting>,
    m: &mut Mapper,
) {
    let mask = match umask {
        None => Some(0),
        Some(s) => match &s.value {
            Json::Number(n) => n.as_i64(),
            Json::String(text) => {
                let text = text.trim();
                if let Some(hex) = text.strip_prefix("0x") {
                    i64::from_str_radix(hex, 16).ok()
                } else if let Some(oct) = text.strip_prefix("0o") {
                    i64::from_str_radix(oct, 8).ok()
                } else if text.len() > 1 && text.starts_with('0') {
                    i64::from_str_radix(&text[1..], 8).ok()
                } else {
                    text.parse().ok()
                }
            }
            _ => None,
        },
    };
    let mode_origin = umask.map_or(
        "gunicorn's default umask (0) on the socket".to_owned(),
        |s| format!("{} on the socket", origin(s)),
    );
    match mask {
        Some(mask) if (0..=0o777).contains(&mask) => {
            let mode = format!("{:04o}", 0o777 & !mask);
            m.pool
                .set("", "listen_mode", Value::Str(mode), &mode_origin);
            if let Some(s) = umask {
                m.note(
                    s,
                    "carried over for the socket (listen_mode); the files workers create \
                     keep drover's umask",
                );
            }
        }
        _ => {
            if let Some(s) = umask {
                m.note(s, "refused: not a umask (0 to 0o777)");
            }
        }
    }
    for (key, setting) in [("listen_owner", user), ("listen_group", group)] {
        if let Some(s) = setting
            && let Some(name) = s.value.as_str().filter(|n| n.parse::<u32>().is_err())
        {
            m.pool.set(
                "",
                key,
                Value::str(name),
                &format!("{} (gunicorn chowns the socket)", origin(s)),
            );
        }
    }
}

/// The nginx change: the location that proxied to gunicorn passes FastCGI to the pool.
pub(super) fn nginx(bind: Option<&Setting>, listen: Option<(&str, bool)>) -> String {
    let Some((address, unix)) = listen else {
        return "nginx: no change written (the bind was not carried over).".to_owned();
    };
    let was = match bind
        .map(|b| strings(&b.value))
        .and_then(|b| b.first().cloned())
    {
        Some(first) if first.starts_with("unix:") => format!("http://{first}:"),
        Some(first) => format!("http://{first}"),
        None => format!("http://{DEFAULT_BIND}"),
    };
    let pass = if unix {
        format!("unix:{address}")
    } else if address.bytes().all(|b| b.is_ascii_digit()) {
        format!("127.0.0.1:{address}")
    } else {
        address.replace("0.0.0.0", "127.0.0.1")
    };
    format!(
        "In nginx, the location that proxied to gunicorn becomes:\n\n    \
         location / {{\n        \
         # was: proxy_pass {was};\n        \
         #      and its proxy_set_header lines (nginx sends the client's address and\n        \
         #      HTTPS as FastCGI params now)\n        \
         include fastcgi.conf;\n        \
         fastcgi_pass {pass};\n    \
         }}\n\n\
         Check the pool with drover -t, start drover, then reload nginx."
    )
}

/// [`listen`] alone, for the unit tests: `bind` as drover's listen, gunicorn's folder
/// being `folder`.
#[cfg(test)]
pub(in crate::import::gunicorn) fn listen_of(
    bind: &Setting,
    folder: &Path,
) -> Option<(String, bool)> {
    let mut m = Mapper {
        global: Doc::default(),
        pool: Doc::default(),
        report: Vec::new(),
        folder: folder.to_path_buf(),
    };
    listen(Some(bind), &mut m)
}
