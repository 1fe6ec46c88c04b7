//! Status data for the tests of every format and of the server: one busy pool with a
//! hostile URI (quotes, backslash, newline), one pool where most values are unknown.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::model::{Limits, PoolStatus, Recycled, WorkerStatus};
use crate::scoreboard::PoolView;

/// 2024-03-23 10:00:00 UTC.
pub const START: u64 = 1_711_188_000;

pub fn www() -> PoolStatus {
    PoolStatus {
        pool: "www".into(),
        process_manager: "dynamic".into(),
        runtime: "php".into(),
        start_time: UNIX_EPOCH + Duration::from_secs(START),
        start_since: Duration::from_secs(3600),
        accepted_conn: Some(1234),
        listen_queue: Some(2),
        max_listen_queue: Some(7),
        listen_queue_len: 511,
        idle_processes: 1,
        active_processes: 1,
        total_processes: 2,
        max_active_processes: 4,
        max_children_reached: 3,
        slow_requests: 5,
        limits: Limits {
            max_children: 10,
            start_servers: 2,
            min_spare_servers: 1,
            max_spare_servers: 3,
            max_requests: 500,
            max_memory: Some(256 << 20),
            request_terminate_timeout: Some(Duration::from_secs(60)),
            request_slowlog_timeout: Some(Duration::from_millis(2500)),
        },
        recycled: Recycled {
            max_requests: 8,
            max_memory: 1,
            terminate: 2,
            crash: 0,
            idle: 4,
            reload: 3,
            max_lifetime: 5,
        },
        // 10 requests: 6 within 5 ms, 3 within 100 ms, 1 past 10 s; 7 2xx, 1 4xx, 2 5xx.
        requests: Some(PoolView {
            buckets: [6, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1],
            sum: Duration::from_micros(12_250_000),
            classes: [0, 7, 0, 1, 2],
            accepted: 10,
            connections: 10,
        }),
        backoff: crate::control::BackoffStatus::default(),
        queue: crate::control::QueueStatus {
            timeout: Some(Duration::from_secs(2)),
            timed_out: 5,
            oldest_wait: Some(Duration::from_millis(1500)),
            // 6 taken at once, 3 after about a second, 1 answered 503 after 2 s.
            waits: Some(crate::pm::queue::Waits {
                buckets: [6, 0, 0, 3, 1, 0, 0, 0, 0, 0],
                sum: Duration::from_millis(5000),
                count: 10,
            }),
        },
        workers: vec![busy(), idle()],
        memory: None,
    }
}

/// A worker in a request whose URI tries to break every format.
pub fn busy() -> WorkerStatus {
    WorkerStatus {
        pid: 4242,
        state: "Running".into(),
        start_time: UNIX_EPOCH + Duration::from_secs(START + 60),
        start_since: Duration::from_secs(3540),
        requests: Some(17),
        request_duration: Some(Duration::from_micros(1_500_000)),
        request_method: Some("POST".into()),
        request_uri: Some("/a\"b\\c\nd".into()),
        query_string: Some("q=\"x\"".into()),
        script: Some("/srv/www/index.php".into()),
        request_id: Some("4f1c9e0a".into()),
        rss: Some(31_457_280),
        last_request_duration: Some(Duration::from_millis(200)),
        last_request_cpu: Some(Duration::from_millis(50)),
        last_request_memory: Some(2_097_152),
    }
}

pub fn idle() -> WorkerStatus {
    WorkerStatus {
        pid: 4243,
        state: "Idle".into(),
        start_time: UNIX_EPOCH + Duration::from_secs(START + 120),
        start_since: Duration::from_secs(3480),
        requests: Some(3),
        request_duration: Some(Duration::from_micros(12_345)),
        request_method: Some("GET".into()),
        request_uri: Some("/".into()),
        query_string: None,
        script: Some("/srv/www/index.php".into()),
        request_id: None,
        rss: Some(20_971_520),
        last_request_duration: Some(Duration::from_micros(12_345)),
        last_request_cpu: None,
        last_request_memory: None,
    }
}

/// A command pool: drover counts neither requests nor the queue, and knows little of its
/// single worker.
pub fn blind() -> PoolStatus {
    PoolStatus {
        pool: "leg\"acy".into(),
        process_manager: "static".into(),
        runtime: "command".into(),
        start_time: SystemTime::UNIX_EPOCH + Duration::from_secs(START),
        start_since: Duration::from_secs(10),
        accepted_conn: None,
        listen_queue: None,
        max_listen_queue: None,
        listen_queue_len: 128,
        idle_processes: 0,
        active_processes: 1,
        total_processes: 1,
        max_active_processes: 1,
        max_children_reached: 0,
        slow_requests: 0,
        limits: Limits {
            max_children: 1,
            start_servers: 1,
            min_spare_servers: 1,
            max_spare_servers: 1,
            max_requests: 0,
            max_memory: None,
            request_terminate_timeout: None,
            request_slowlog_timeout: None,
        },
        recycled: Recycled::default(),
        requests: None,
        backoff: crate::control::BackoffStatus::default(),
        queue: crate::control::QueueStatus::default(),
        workers: vec![WorkerStatus {
            pid: 77,
            state: "Starting".into(),
            start_time: SystemTime::UNIX_EPOCH + Duration::from_secs(START),
            start_since: Duration::from_secs(10),
            requests: None,
            request_duration: None,
            request_method: None,
            request_uri: None,
            query_string: None,
            script: None,
            request_id: None,
            rss: None,
            last_request_duration: None,
            last_request_cpu: None,
            last_request_memory: None,
        }],
        memory: None,
    }
}
