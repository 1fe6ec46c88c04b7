//! `[pm]`'s keys (`Pm`, and `PmMemory` for the sizing by memory), each declared with the
//! field it fills (`keys!`, `keys/declare.rs`).

use std::time::Duration;

use crate::keys::Default::{Note, Required, Unset, Value};
use crate::keys::{
    ALWAYS_RUNNING, Choice, NO_COUNT, Section, Type, at_least, choice, key, keys, refused,
};
use crate::show::{Shown, Shows, Size};
use crate::value::Table;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmMode {
    Static,
    Dynamic,
    Ondemand,
}

choice!(PmMode {
    Static = "static",
    Dynamic = "dynamic",
    Ondemand = "ondemand",
});

keys! {
    /// The `[pm]` table, with php-fpm's defaults resolved.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Pm: Section::Pm, given PmGiven {
        pub mode: PmMode = [key(
            "mode",
            Type::Choice(PmMode::NAMES),
            Required,
            "php-fpm's `pm`: a fixed count, a count between spares, or workers started per \
             connection.",
        )] => read(given), show(name);
        pub max_children: u32 = [key(
            "max_children",
            Type::Int,
            Required,
            "The most workers at once (the count of a static pool); `\"auto\"` (dynamic and \
             ondemand): as many as fit in the memory the pool may use, from its workers' measured \
             PSS (docs/memory.md).",
        )] => read(given), show(show_max_children);
        /// dynamic only; default `min_spare + (max_spare - min_spare) / 2`. The three spare
        /// fields are only written for dynamic (elsewhere they are a config error); the loader
        /// fills them with max_children for static and 0 for ondemand.
        pub start_servers: u32 = [refused(
            key(
                "start_servers",
                Type::Int,
                Note("`min_spare_servers + (max_spare_servers - min_spare_servers) / 2`"),
                "`mode = \"dynamic\"` only: the workers started first.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(show_spares);
        pub min_spare_servers: u32 = [refused(
            key(
                "min_spare_servers",
                Type::Int,
                Note("required with `mode = \"dynamic\"`"),
                "`mode = \"dynamic\"` only: fewer idle workers than this start more.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(show_spares);
        pub max_spare_servers: u32 = [refused(
            key(
                "max_spare_servers",
                Type::Int,
                Note("required with `mode = \"dynamic\"`"),
                "`mode = \"dynamic\"` only: more idle workers than this are retired.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(given), show(show_spares);
        /// dynamic: cap of the doubling spawn batch (32).
        pub max_spawn_rate: u32 = [at_least(
            refused(
                key(
                    "max_spawn_rate",
                    Type::Int,
                    Value("32"),
                    "dynamic: the cap of the doubling batch of workers started at once.",
                ),
                &[ALWAYS_RUNNING],
            ),
            1,
        )] => read(value), show(of);
        /// ondemand: retire a worker idle this long (10s).
        pub process_idle_timeout: Duration = [refused(
            key(
                "process_idle_timeout",
                Type::Duration,
                Value("\"10s\""),
                "ondemand: a worker idle this long is retired.",
            ),
            &[ALWAYS_RUNNING],
        )] => read(process_idle_timeout), show(of);
        /// A worker exits after this many requests; 0 = never.
        pub max_requests: u32 = [refused(
            key(
                "max_requests",
                Type::Int,
                Value("0"),
                "A worker exits after this many requests; 0: never.",
            ),
            &[NO_COUNT],
        )] => read(given), show(of);
        /// Each worker draws its own limit in `max_requests ..= max_requests + jitter`.
        pub max_requests_jitter: u32 = [refused(
            key(
                "max_requests_jitter",
                Type::Int,
                Value("0"),
                "Each worker draws its limit in `max_requests ..= max_requests + jitter`.",
            ),
            &[NO_COUNT],
        )] => read(given), show(of);
        /// Retire a worker whose resident memory passes this many bytes.
        pub max_memory: Option<u64> = [key(
            "max_memory",
            Type::Size,
            Unset,
            "A worker whose resident memory passes this is retired; none: no limit.",
        )] => read(max_memory), show(show_max_memory);
        /// Sizing by memory: `max_children = "auto"`, `memory_reserve`, `max_pool_memory`.
        pub memory: PmMemory = [] + PmMemory::ROWS => read(given), show(show_memory);
    }
}

keys! {
    /// The `[pm]` keys that size a pool by memory (docs/memory.md, the master's `pm::memory`).
    #[derive(Debug, Clone, Default, PartialEq, Eq)]
    pub struct PmMemory: Section::Pm, given PmMemoryGiven {
        /// `max_children = "auto"`: (auto_min_children, auto_max_children). The pool's
        /// `max_children` is then the ceiling; the master keeps the live count.
        pub auto: Option<(u32, u32)> = [
            at_least(
                key(
                    "auto_min_children",
                    Type::Int,
                    Value("1"),
                    "`max_children = \"auto\"` only: the fewest workers it allows, whatever the memory \
                     says.",
                ),
                1,
            ),
            // The scoreboard of a zygote pool has twice this many slots; past 128 a pool is
            // better split or given a number.
            at_least(
                key(
                    "auto_max_children",
                    Type::Int,
                    Value("128"),
                    "`max_children = \"auto\"` only: the most workers it allows, at most 4096 (the \
                     master keeps a scoreboard slot for each, existing or not).",
                ),
                1,
            ),
        ] => read(given), show(show_auto);
        /// `memory_reserve`: left out of the budget; None: a tenth of the limit (32 MiB–1 GiB).
        pub reserve: Option<u64> = [key(
            "memory_reserve",
            Type::Size,
            Note("a tenth of the limit, at least 32 MiB and at most 1 GiB"),
            "Memory under the limit (cgroup or MemAvailable) left to all but the pool's workers: \
             `\"auto\"` sizes within the rest, and a fixed `max_children` that does not fit in \
             it is warned about.",
        )] => read(optional), show(show_memory_reserve);
        /// `max_pool_memory`: above this PSS total the largest idle worker retires.
        pub max_pool_memory: Option<u64> = [key(
            "max_pool_memory",
            Type::Size,
            Unset,
            "When the pool's processes together (PSS) pass this, its largest idle worker is \
             retired, and `\"auto\"` sizes within it; none: no limit.",
        )] => read(max_pool_memory), show(show_max_pool_memory);
    }
}

impl PmMode {
    pub fn as_str(self) -> &'static str {
        self.name()
    }
}

// The rules on a key's own value, applied as it is read (`read(FUNCTION)`).

/// `process_idle_timeout`: an idle worker retired at once would be started again at once.
fn process_idle_timeout(t: &Table<'_, '_>) -> Option<Duration> {
    let timeout = t.value("process_idle_timeout");
    if timeout == Some(Duration::ZERO) {
        t.fail("process_idle_timeout", "must be more than 0s");
    }
    timeout
}

/// `max_memory`: 0 would retire every worker; no limit is written by leaving it out.
fn max_memory(t: &Table<'_, '_>) -> Option<Option<u64>> {
    let max_memory = t.optional("max_memory");
    if max_memory == Some(Some(0)) {
        t.fail(
            "max_memory",
            "must be more than 0 (leave it out for no limit)",
        );
    }
    max_memory
}

/// `max_pool_memory`: as `max_memory`, for the pool's processes together.
fn max_pool_memory(t: &Table<'_, '_>) -> Option<Option<u64>> {
    let max_pool_memory = t.optional("max_pool_memory");
    if max_pool_memory == Some(Some(0)) {
        t.fail(
            "max_pool_memory",
            "must be more than 0 (leave it out for no limit)",
        );
    }
    max_pool_memory
}

// What `drover -t` shows for the keys whose declaration names a hook (`show(FUNCTION)`):
// each answers for its entry's rows, as `(struct, key)`.

fn show_max_children<'a>(pm: &'a Pm, _key: &str) -> Option<Shown<'a>> {
    Some(match pm.memory.auto {
        Some(_) => Shown::of("auto"),
        None => Shown::of(&pm.max_children),
    })
}

fn show_spares<'a>(pm: &'a Pm, key: &str) -> Option<Shown<'a>> {
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

fn show_max_memory<'a>(pm: &'a Pm, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(pm.max_memory.map(Size).as_ref(), "no limit"))
}

fn show_memory<'a>(pm: &'a Pm, key: &str) -> Option<Shown<'a>> {
    pm.memory.shown(key)
}

fn show_auto<'a>(memory: &'a PmMemory, key: &str) -> Option<Shown<'a>> {
    let Some((floor, ceiling)) = memory.auto else {
        return Some(Shown::unset("max_children = \"auto\" only"));
    };
    Some(match key {
        "auto_min_children" => Shown::of(&floor),
        "auto_max_children" => Shown::of(&ceiling),
        _ => return None,
    })
}

fn show_memory_reserve<'a>(memory: &'a PmMemory, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        memory.reserve.map(Size).as_ref(),
        "a tenth of the limit, 32 MiB to 1 GiB",
    ))
}

fn show_max_pool_memory<'a>(memory: &'a PmMemory, _key: &str) -> Option<Shown<'a>> {
    Some(Shown::or(
        memory.max_pool_memory.map(Size).as_ref(),
        "no limit",
    ))
}
