//! The `[pm]` table: how many workers a pool keeps, and when they are recycled.

use std::time::Duration;

use super::keys::{self, Section};
use super::model::{Pm, PmMode};
use super::value::Table;

/// Keys that only the dynamic policy reads; anywhere else they would be silently ignored.
const DYNAMIC_ONLY: &[&str] = &["start_servers", "min_spare_servers", "max_spare_servers"];

const MAX: i64 = u32::MAX as i64;

pub(super) fn parse(t: &Table<'_, '_>) -> Option<Pm> {
    t.check_keys(&keys::names(Section::Pm));
    let mode = t.parse("mode", mode).required(t, "mode");
    let max_children = t.int("max_children", 1..=MAX).required(t, "max_children");
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
    let max_spawn_rate = t.int("max_spawn_rate", 1..=MAX).or(32);
    let process_idle_timeout = t
        .duration("process_idle_timeout")
        .or(Duration::from_secs(10));
    if process_idle_timeout == Some(Duration::ZERO) {
        t.fail("process_idle_timeout", "must be more than 0s");
    }
    let recycling = recycling(t);
    let max_memory = t.size("max_memory").optional();
    if max_memory == Some(Some(0)) {
        t.fail(
            "max_memory",
            "must be more than 0 (leave it out for no limit)",
        );
    }
    let (start_servers, min_spare_servers, max_spare_servers) = spares?;
    let (max_requests, max_requests_jitter) = recycling?;
    Some(Pm {
        mode: mode?,
        max_children: max_children?,
        start_servers,
        min_spare_servers,
        max_spare_servers,
        max_spawn_rate: max_spawn_rate?,
        process_idle_timeout: process_idle_timeout?,
        max_requests,
        max_requests_jitter,
        max_memory: max_memory?,
    })
}

fn mode(s: &str) -> Result<PmMode, String> {
    match s {
        "static" => Ok(PmMode::Static),
        "dynamic" => Ok(PmMode::Dynamic),
        "ondemand" => Ok(PmMode::Ondemand),
        _ => Err("expected one of static, dynamic, ondemand".into()),
    }
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
    let max_requests: Option<u32> = t.int("max_requests", 0..=MAX).or(0);
    let jitter: Option<u32> = t.int("max_requests_jitter", 0..=MAX).or(0);
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

    #[test]
    fn modes_are_the_three_php_fpm_names() {
        assert_eq!(mode("ondemand"), Ok(PmMode::Ondemand));
        assert!(mode("Dynamic").is_err());
    }
}
