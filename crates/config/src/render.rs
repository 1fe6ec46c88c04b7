//! `drover -t`: the resolved configuration, every key with its value or default, one block
//! per file. Each block is valid TOML that loads back to the same settings; keys that are
//! unset or do not apply are shown as comments so that the block still lists every key.
//!
//! The walk is the key table's ([`super::keys::KEYS`]): each section's rows in their order,
//! a table row opening its own section. What a key shows is the model's answer
//! ([`Shows`], one impl per section struct, written by `keys!` from each key's declaration
//! in `model/`: a plain show, or a hook beside the declaration); how a value is written is
//! its type's ([`Toml`], `show.rs`). A row the model does not answer for fails the render test
//! (`config::tests::keys`), which renders a pool of every runtime.

use std::fmt::Write as _;

use super::keys::{KEYS, Key, Section, Type};
use super::model::{Config, Runtime};
use super::show::{Shown, Shows, Toml};
use super::value::toml_key;

impl Config {
    pub fn render(&self) -> String {
        let mut out = Out::default();
        out.comment(&format!("global ({})", self.path.display()));
        out.section(Section::Global, &self.global, false);
        for pool in &self.pools {
            out.blank();
            out.comment(&format!("pool {} ({})", pool.name, pool.file.display()));
            // A background pool's block says which keys it takes no value for, so that it
            // loads back (`drover ctl config`, `drover ctl probe`).
            let program = matches!(pool.runtime, Runtime::Program(_));
            out.section(Section::Pool, pool, program);
        }
        out.0
    }
}

/// Whether a `[program]` pool refuses `key` (its row's rule), so that its block shows the
/// key without a value.
fn refused_by_program(key: &Key) -> bool {
    super::program::refused(&key.path()).is_some()
}

#[derive(Default)]
struct Out(String);

impl Out {
    /// The keys of `section`, in the table's order, as `model` answers for them.
    fn section(&mut self, section: Section, model: &dyn Shows, program: bool) {
        for key in KEYS.iter().filter(|k| k.section == section) {
            let shown = model.shown(key.name).unwrap_or_else(|| {
                panic!(
                    "{} has a row but its declaration shows nothing (config/model/)",
                    key.path()
                )
            });
            match shown {
                Shown::Value(_) if program && refused_by_program(key) => {
                    self.unset(key.name, "a [program] pool takes none");
                }
                Shown::Value(text) => self.line(&format!("{} = {text}", key.name)),
                Shown::Unset(why) => self.unset(key.name, &why),
                Shown::Table(table) => {
                    let path = key.path();
                    self.table(&path);
                    let inner = Section::ALL.into_iter().find(|s| s.table() == path);
                    let inner = inner.unwrap_or_else(|| panic!("no section for [{path}]"));
                    self.section(inner, table, program);
                }
                Shown::Map(names) => {
                    self.table(&key.path());
                    for (name, value) in names {
                        let _ = writeln!(self.0, "{} = {}", toml_key(name), value.toml());
                    }
                }
                Shown::NoTable(why) => {
                    debug_assert!(matches!(key.ty, Type::Table | Type::Map));
                    self.blank();
                    self.comment(&format!("[{}] ({why})", key.path()));
                }
                Shown::Hidden => {}
            }
        }
    }

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

    /// A key with no value, or one that does not apply (`why`).
    fn unset(&mut self, key: &str, why: &str) {
        self.comment(&format!("{key} = ({why})"));
    }
}

#[cfg(test)]
mod tests {
    use super::super::show::size;
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
