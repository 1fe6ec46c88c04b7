//! The `[pm]` table: how many workers a pool keeps, and when they are recycled. Its plain
//! keys are read by their declarations (`Pm` and `PmMemory` in `model/pm.rs`); the rules
//! between keys are here.

use super::keys::{self, Section};
use super::model::{Pm, PmGiven, PmMemory, PmMemoryGiven, PmMode};
use super::value::Table;

/// Keys that only the dynamic policy reads; anywhere else they would be silently ignored.
const DYNAMIC_ONLY: &[&str] = &["start_servers", "min_spare_servers", "max_spare_servers"];

const MAX: i64 = u32::MAX as i64;

/// The most `auto_max_children` may be: the master maps and reads a slot for every worker
/// the pool may have (twice over for a zygote pool), about 1 KiB each, whether or not the
/// worker exists; at 100000 an idle master held 190 MiB. 4096 keeps that under 8 MiB.
pub const AUTO_CEILING_MAX: u32 = 4096;

pub(super) fn parse(t: &Table<'_, '_>) -> Option<Pm> {
    t.check_keys(&keys::names(Section::Pm));
    let mode: Option<PmMode> = t.required("mode");
    let written = t
        .int_or_word::<u32>("max_children", "auto", 1..=MAX)
        .required(t, "max_children");
    let memory = memory(t, mode, written);
    // "auto": the ceiling, which every rule on max_children (spares, the scoreboard) meets.
    let max_children = match (written, &memory) {
        (Some(Some(n)), _) => Some(n),
        (
            Some(None),
            Some(PmMemory {
                auto: Some((_, ceiling)),
                ..
            }),
        ) => Some(*ceiling),
        _ => None,
    };
    let spares = match mode {
        Some(PmMode::Dynamic) => dynamic(t, max_children),
        Some(fixed) => {
            for key in DYNAMIC_ONLY.iter().filter(|k| t.contains(k)) {
                t.fail(key, "only used by pm.mode = \"dynamic\"");
            }
            // static keeps max_children running; ondemand starts none and keeps none spare.
            match fixed {
                PmMode::Static => max_children.map(|n| (n, n, n)),
                _ => Some((0, 0, 0)),
            }
        }
        None => {
            // Without a mode the values cannot be judged, but their types still can.
            for key in DYNAMIC_ONLY {
                let _ = t.int::<u32>(key, 0..=MAX);
            }
            None
        }
    };
    let (start_servers, min_spare_servers, max_spare_servers) = match spares {
        Some((start, min, max)) => (Some(start), Some(min), Some(max)),
        None => (None, None, None),
    };
    let (max_requests, max_requests_jitter) = match recycling(t) {
        Some((max_requests, jitter)) => (Some(max_requests), Some(jitter)),
        None => (None, None),
    };
    Pm::read(
        t,
        PmGiven {
            mode,
            max_children,
            start_servers,
            min_spare_servers,
            max_spare_servers,
            max_requests,
            max_requests_jitter,
            memory,
        },
    )
}

/// The memory-sizing keys: `max_children = "auto"` (`written` is `Some(None)`) with its floor
/// and ceiling, `memory_reserve` and `max_pool_memory`.
fn memory(
    t: &Table<'_, '_>,
    mode: Option<PmMode>,
    written: Option<Option<u32>>,
) -> Option<PmMemory> {
    let auto = written == Some(None);
    let floor: Option<u32> = t.value("auto_min_children");
    let ceiling: Option<u32> = t.value("auto_max_children");
    let ceiling = match ceiling {
        Some(n) if n > AUTO_CEILING_MAX => {
            t.fail(
                "auto_max_children",
                format!(
                    "must be at most {AUTO_CEILING_MAX}: the master keeps a scoreboard slot for \
                     every worker the pool may have, existing or not; past that, split the \
                     pool or give max_children a number"
                ),
            );
            None
        }
        other => other,
    };
    if !auto {
        for key in ["auto_min_children", "auto_max_children"] {
            if t.contains(key) {
                t.fail(key, "only used with max_children = \"auto\"");
            }
        }
    }
    let mut valid = true;
    if auto && mode == Some(PmMode::Static) {
        // A static pool keeps one count for good; a memory-sized count moves with what the
        // workers measure, so it needs a mode whose count moves.
        t.fail(
            "max_children",
            "\"auto\" needs pm.mode = \"dynamic\" or \"ondemand\" (a static pool's count \
             does not move with its workers' memory)",
        );
        valid = false;
    }
    let bounds = floor.zip(ceiling);
    let memory = PmMemory::read(
        t,
        PmMemoryGiven {
            auto: bounds.map(|bounds| auto.then_some(bounds)),
        },
    );
    let (floor, ceiling) = bounds?;
    if auto && floor > ceiling {
        t.fail(
            "auto_min_children",
            format!("must not be more than auto_max_children ({ceiling})"),
        );
        valid = false;
    }
    valid.then_some(memory?)
}

/// (start_servers, min_spare_servers, max_spare_servers), with php-fpm's rules:
/// 1 ≤ min_spare ≤ start ≤ max_spare ≤ max_children.
fn dynamic(t: &Table<'_, '_>, max_children: Option<u32>) -> Option<(u32, u32, u32)> {
    let min = t
        .int::<u32>("min_spare_servers", 1..=MAX)
        .required(t, "min_spare_servers");
    let max = t
        .int::<u32>("max_spare_servers", 1..=MAX)
        .required(t, "max_spare_servers");
    let start = t.int::<u32>("start_servers", 1..=MAX);
    let mut valid = true;
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        t.fail(
            "min_spare_servers",
            format!("must not be more than max_spare_servers ({max})"),
        );
        valid = false;
    }
    if let (Some(max), Some(children)) = (max, max_children)
        && max > children
    {
        t.fail(
            "max_spare_servers",
            format!("must not be more than max_children ({children})"),
        );
        valid = false;
    }
    let (min, max) = (min?, max?);
    let start = start.or_else(|| min + max.saturating_sub(min) / 2)?;
    if valid && !(min..=max).contains(&start) {
        t.fail(
            "start_servers",
            format!("must be between min_spare_servers ({min}) and max_spare_servers ({max})"),
        );
        valid = false;
    }
    valid.then_some((start, min, max))
}

/// (max_requests, max_requests_jitter).
fn recycling(t: &Table<'_, '_>) -> Option<(u32, u32)> {
    let max_requests: Option<u32> = t.value("max_requests");
    let jitter: Option<u32> = t.value("max_requests_jitter");
    let (max_requests, jitter) = (max_requests?, jitter?);
    if max_requests == 0 && jitter > 0 {
        t.fail(
            "max_requests_jitter",
            "must be 0 when max_requests is 0 (workers are never recycled by count)",
        );
        return None;
    }
    if max_requests.checked_add(jitter).is_none() {
        t.fail(
            "max_requests_jitter",
            format!("max_requests + jitter must not pass {}", u32::MAX),
        );
        return None;
    }
    Some((max_requests, jitter))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors of pool `www` from `text`, as `(line, key, rule)`.
    fn errors(text: &str) -> Vec<(usize, String, String)> {
        crate::tests::located_errors("www", text)
    }

    #[test]
    fn auto_max_children_past_its_bound_is_refused_with_its_line_and_why() {
        let pool = |ceiling: u32| {
            format!(
                "listen = \"/run/www.sock\"\nuser = \"root\"\n\n[pm]\nmode = \"dynamic\"\n\
                 max_children = \"auto\"\nmin_spare_servers = 1\nmax_spare_servers = 2\n\
                 auto_max_children = {ceiling}\n\n\
                 [command]\nargv = [\"/bin/true\"]\n"
            )
        };
        assert_eq!(errors(&pool(AUTO_CEILING_MAX)), []);
        let found = errors(&pool(100_000));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            (found[0].0, found[0].1.as_str()),
            (9, "pm.auto_max_children")
        );
        assert!(found[0].2.contains("at most 4096"), "{found:?}");
    }

    #[test]
    fn modes_are_the_three_php_fpm_names() {
        use crate::keys::Choice;
        assert_eq!(PmMode::from_name("ondemand"), Ok(PmMode::Ondemand));
        assert_eq!(
            PmMode::from_name("Dynamic"),
            Err("must be \"static\", \"dynamic\" or \"ondemand\"".to_owned())
        );
    }
}
