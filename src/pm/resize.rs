//! A background pool (`[program]`) scaled in place: `drover ctl workers` and a live
//! `pm.max_children` change start or stop copies in the running generation, instead of
//! renewing every copy as a new generation would (a queue consumer's job in hand is not
//! cut for a scale-up). A reload from the files still renews them. Here is whether a
//! change can be done so and which copies stop; the master takes the new `[pm]` and
//! carries out the actions (`master::pool::program`).

use std::time::Instant;

use nix::unistd::Pid;

use super::Action;
use crate::config::Pool;

/// The generation a change would be done in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InPlace {
    /// It runs a program's copies (`[program]`): nothing else is resized in place.
    pub program: bool,
    /// A reload replaced or removed it: it takes no change.
    pub draining: bool,
}

/// `changed` done in place in a generation running `current`, with `running` (its copies
/// neither retiring nor orphaned, and when each started): the copies above the new
/// `max_children` stop, the newest first, so the ones that have run longest are kept; the
/// copies missing are the next tick's plan's. None when a new generation is needed: not a
/// program's, draining, or `changed` differs in more than `pm.max_children` (and the spare
/// counts of a static pool, which follow it).
pub fn resize_in_place(
    current: &Pool,
    changed: &Pool,
    generation: InPlace,
    running: Vec<(Pid, Instant)>,
) -> Option<Vec<Action>> {
    if !generation.program || generation.draining {
        return None;
    }
    // A static pool's spare counts follow max_children (config::pm).
    let mut same = changed.clone();
    same.pm.max_children = current.pm.max_children;
    same.pm.start_servers = current.pm.start_servers;
    same.pm.min_spare_servers = current.pm.min_spare_servers;
    same.pm.max_spare_servers = current.pm.max_spare_servers;
    if same != *current {
        return None;
    }
    let max_children = changed.pm.max_children;
    let mut actions: Vec<Action> = surplus(running, max_children)
        .into_iter()
        .map(|pid| Action::StopSurplus { pid, max_children })
        .collect();
    actions.push(Action::SignalRetiring);
    Some(actions)
}

/// The copies to stop for `max_children` to run: the newest started first.
fn surplus(mut running: Vec<(Pid, Instant)>, max_children: u32) -> Vec<Pid> {
    running.sort_by_key(|&(pid, started)| (started, pid));
    let keep = (max_children as usize).min(running.len());
    running[keep..].iter().map(|&(pid, _)| pid).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    const PROGRAM: InPlace = InPlace {
        program: true,
        draining: false,
    };

    /// Pool `jobs` from `text`, loaded as drover loads a file.
    fn pool(text: &str) -> Pool {
        let main = Path::new("/etc/drover/drover.toml");
        let files = BTreeMap::from([
            (main.to_path_buf(), String::new()),
            (main.with_file_name("pools.d/jobs.toml"), text.to_owned()),
        ]);
        let config = crate::config::load_texts(main, &files).expect("the pool loads");
        config.pools.into_iter().next().expect("one pool")
    }

    fn program(max_children: u32, extra: &str) -> Pool {
        pool(&format!(
            "{extra}[pm]\nmode = \"static\"\nmax_children = {max_children}\n\
             [program]\ncommand = [\"/bin/sh\", \"-c\", \"sleep 60\"]\n"
        ))
    }

    /// Copies 10, 20, 30, started in that order (listed out of it).
    fn three() -> Vec<(Pid, Instant)> {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        vec![
            (Pid::from_raw(30), at(3)),
            (Pid::from_raw(10), at(1)),
            (Pid::from_raw(20), at(2)),
        ]
    }

    #[test]
    fn a_scale_down_stops_the_newest_copies() {
        let running = three();
        assert_eq!(
            surplus(running.clone(), 1),
            [Pid::from_raw(20), Pid::from_raw(30)]
        );
        assert_eq!(surplus(running.clone(), 3), []);
        assert_eq!(surplus(running, 5), []);
    }

    #[test]
    fn a_program_pool_scaled_down_in_place_stops_its_newest_copies() {
        let stop = |pid| Action::StopSurplus {
            pid: Pid::from_raw(pid),
            max_children: 1,
        };
        assert_eq!(
            resize_in_place(&program(3, ""), &program(1, ""), PROGRAM, three()),
            Some(vec![stop(20), stop(30), Action::SignalRetiring])
        );
    }

    #[test]
    fn a_program_pool_scaled_up_in_place_stops_none_and_leaves_the_spawns_to_the_plan() {
        assert_eq!(
            resize_in_place(&program(3, ""), &program(5, ""), PROGRAM, three()),
            Some(vec![Action::SignalRetiring])
        );
    }

    #[test]
    fn a_change_beyond_max_children_or_not_a_program_s_needs_a_new_generation() {
        let current = program(3, "");
        let other_key = program(1, "user = \"nobody\"\n");
        assert_eq!(
            resize_in_place(&current, &other_key, PROGRAM, three()),
            None
        );
        let draining = InPlace {
            draining: true,
            ..PROGRAM
        };
        assert_eq!(
            resize_in_place(&current, &program(1, ""), draining, three()),
            None
        );
        let not_program = InPlace {
            program: false,
            ..PROGRAM
        };
        assert_eq!(
            resize_in_place(&current, &program(1, ""), not_program, three()),
            None
        );
    }
}
