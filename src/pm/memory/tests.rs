use super::*;

fn cgroup(mib: u64) -> MemoryLimit {
    MemoryLimit {
        bytes: mib * MIB,
        source: LimitSource::CgroupV1("/test".into()),
    }
}

fn keys() -> AutoKeys {
    AutoKeys {
        reserve: None,
        floor: 1,
        ceiling: 256,
        max_pool_memory: None,
    }
}

fn measured(mib: u64) -> WorkerEstimate {
    WorkerEstimate::Measured {
        bytes: mib * MIB,
        workers: 4,
    }
}

#[test]
fn the_limit_less_the_reserve_and_parent_is_divided_by_the_worker() {
    let held = Held {
        parents: 12 * MIB,
        total: 40 * MIB,
    };
    let size = auto_max_children(&keys(), cgroup(512), held, measured(20));
    // 512 − 51.2 (a tenth) − 12 = 448.8 MiB; / 20 = 22.
    assert_eq!(size.reserve, 512 * MIB / 10);
    assert_eq!(size.max_children, 22);
    assert_eq!(size.bound, Bound::Memory);
    let line = size.to_string();
    assert!(
        line.starts_with("max_children = 22 from cgroup v1 /test"),
        "{line}"
    );
    assert!(line.contains("highest PSS of 4 measured workers"), "{line}");
}

#[test]
fn a_reserve_of_the_whole_cgroup_limit_is_a_problem_and_memavailable_never() {
    let cgroup = MemoryLimit {
        bytes: 256 * MIB,
        source: LimitSource::CgroupV2("/app".into()),
    };
    assert_eq!(reserve_problem(255 * MIB, &cgroup), None);
    let why = reserve_problem(256 * MIB, &cgroup).expect("a problem");
    assert!(
        why.contains("256.0 MiB (cgroup v2 /app memory.max)"),
        "{why}"
    );
    let available = MemoryLimit {
        bytes: 256 * MIB,
        source: LimitSource::MemAvailable,
    };
    assert_eq!(reserve_problem(1024 * MIB, &available), None);
}

#[test]
fn the_default_reserve_is_a_tenth_within_32_mib_and_1_gib() {
    assert_eq!(default_reserve(128 * MIB), 32 * MIB);
    assert_eq!(default_reserve(1000 * MIB), 100 * MIB);
    assert_eq!(default_reserve(64 * 1024 * MIB), 1024 * MIB);
}

#[test]
fn an_operator_reserve_and_max_pool_memory_bound_the_budget() {
    let k = AutoKeys {
        reserve: Some(100 * MIB),
        max_pool_memory: Some(200 * MIB),
        ..keys()
    };
    let size = auto_max_children(&k, cgroup(512), Held::default(), measured(20));
    assert_eq!((size.budget, size.max_children), (200 * MIB, 10));
    let k = AutoKeys {
        max_pool_memory: Some(1024 * MIB),
        ..k
    };
    let size = auto_max_children(&k, cgroup(512), Held::default(), measured(20));
    assert_eq!(size.max_children, 20, "(512 − 100) / 20");
}

#[test]
fn mem_available_counts_what_the_pool_holds_already() {
    let limit = MemoryLimit {
        bytes: 400 * MIB,
        source: LimitSource::MemAvailable,
    };
    let held = Held {
        parents: 0,
        total: 100 * MIB,
    };
    let size = auto_max_children(&keys(), limit, held, measured(10));
    assert_eq!(size.usable, 500 * MIB);
    assert_eq!(size.max_children, 45, "(500 − 50) / 10");
    assert!(size.to_string().contains("(+ the pool's own 100.0 MiB)"));
}

#[test]
fn the_floor_and_ceiling_hold() {
    let k = AutoKeys {
        floor: 3,
        ceiling: 8,
        ..keys()
    };
    let tight = auto_max_children(&k, cgroup(64), Held::default(), measured(40));
    assert_eq!((tight.max_children, tight.bound), (3, Bound::Floor));
    let roomy = auto_max_children(&k, cgroup(4096), Held::default(), measured(5));
    assert_eq!((roomy.max_children, roomy.bound), (8, Bound::Ceiling));
    // Nothing left at all: the floor, not a division by zero or an underflow.
    let none = auto_max_children(&k, cgroup(16), Held::default(), measured(0));
    assert_eq!(none.max_children, 3);
}

#[test]
fn before_any_measurement_max_memory_or_the_starting_estimate_is_used() {
    let size = auto_max_children(
        &keys(),
        cgroup(512),
        Held::default(),
        WorkerEstimate::MaxMemory(128 * MIB),
    );
    assert_eq!(size.max_children, 3, "460.8 / 128");
    assert!(size.to_string().contains("max_memory: none measured yet"));
    let size = auto_max_children(
        &keys(),
        cgroup(512),
        Held::default(),
        WorkerEstimate::Default,
    );
    assert_eq!(size.max_children, 7, "460.8 / 64");
}

#[test]
fn a_fixed_max_children_that_does_not_fit_is_named_with_its_figures() {
    let warning = overcommitted(40, &cgroup(512), Held::default(), measured(40), None).unwrap();
    assert!(
        warning.starts_with("max_children = 40 does not fit: 40 × 40.0 MiB = 1600.0 MiB"),
        "{warning}"
    );
    assert!(
        warning.ends_with("11 fit (max_children = \"auto\" sizes it)"),
        "{warning}"
    );
    assert_eq!(
        overcommitted(11, &cgroup(512), Held::default(), measured(40), None),
        None
    );
}

fn w(pid: i32, mib: u64, idle: bool) -> WorkerMemory {
    WorkerMemory {
        pid: Pid::from_raw(pid),
        pss: mib * MIB,
        idle,
    }
}

#[test]
fn above_max_pool_memory_the_largest_idle_worker_retires_never_a_busy_one() {
    let workers = [w(1, 30, true), w(2, 90, false), w(3, 50, true)];
    let total = 170 * MIB;
    assert_eq!(
        over_ceiling(&workers, total, Some(160 * MIB), None),
        Some((
            Pid::from_raw(3),
            Over::PoolMemory {
                total,
                limit: 160 * MIB
            }
        ))
    );
    assert_eq!(over_ceiling(&workers, total, Some(170 * MIB), None), None);
    let busy = [w(1, 30, false), w(2, 90, false)];
    assert_eq!(over_ceiling(&busy, total, Some(100 * MIB), None), None);
}

#[test]
fn more_workers_than_the_memory_sized_cap_retire_the_largest_idle() {
    let workers = [w(1, 30, true), w(2, 40, true), w(3, 50, false)];
    assert_eq!(
        over_ceiling(&workers, 0, None, Some(2)),
        Some((
            Pid::from_raw(2),
            Over::AutoCap {
                workers: 3,
                max_children: 2
            }
        ))
    );
    assert_eq!(over_ceiling(&workers, 0, None, Some(3)), None);
}
