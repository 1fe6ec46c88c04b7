//! App factories: `app = "module:create_app(...)"`, as gunicorn takes them. A Flask factory
//! serves; literal arguments reach the factory; the factory runs once in the zygote (or in
//! each worker without preload); a spec gunicorn would refuse is a load error at its line;
//! a factory that returns no callable stops the pool with gunicorn's message.

use super::lifecycle::{LifecyclePool, lifecycle_stack};
use crate::common::{Drover, Site, TIMEOUT, check_config, http};

#[test]
fn a_flask_factory_app_serves() {
    let pool = LifecyclePool::new("factory_app:create_flask_app()");
    let stack = lifecycle_stack(Site::new(), &pool);

    let reply = http::get(&stack.url("/hello"));

    assert_eq!(
        reply.status,
        200,
        "{reply:?}; log:\n{}",
        stack.drover.log.text()
    );
    assert!(
        reply.body.starts_with("hello from a Flask factory, pid "),
        "{reply:?}"
    );
}

#[test]
fn a_factory_gets_its_literal_arguments_and_runs_once_in_the_zygote() {
    let pool = LifecyclePool::new(
        "factory_app:create_app('prod', debug=False, ports=[80, 443], limits={'rps': 1.5})",
    )
    .workers(2);
    let stack = lifecycle_stack(Site::new(), &pool);

    let expected = "env='prod' debug=False extra=[('limits', {'rps': 1.5}), ('ports', [80, 443])] calls=1 pid=";
    for _ in 0..4 {
        let reply = http::get(&stack.url("/"));
        assert_eq!(reply.status, 200, "{reply:?}");
        // calls=1 in every worker: the zygote called the factory, the workers share its app.
        assert!(reply.body.starts_with(expected), "{:?}", reply.body);
    }
}

#[test]
fn without_preload_each_worker_calls_the_factory() {
    let pool = LifecyclePool::new("factory_app:create_app(env='worker')").no_preload();
    let stack = lifecycle_stack(Site::new(), &pool);

    let reply = http::get(&stack.url("/"));

    assert_eq!(reply.status, 200, "{reply:?}");
    assert!(
        reply
            .body
            .starts_with("env='worker' debug=None extra=[] calls=1 pid="),
        "{:?}",
        reply.body
    );
}

#[test]
fn a_factory_spec_gunicorn_refuses_is_a_load_error_at_its_line() {
    let site = Site::new();
    let pool = LifecyclePool::new("factory_app:create_app(os.environ['ENV'])");
    pool.install(&site);
    let written = site.path().join("pools.d/py.toml");
    let text = std::fs::read_to_string(&written).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("app = "))
        .expect("an app line");

    let out = check_config(&site);

    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "drover -t accepted it:\n{stderr}");
    let located = format!("{}:{line}:", written.display());
    assert!(
        stderr.contains(&located)
            && stderr.contains("python.app")
            && stderr.contains("after \"factory_app:\": the factory's arguments must be literals"),
        "expected {located} python.app and the rule in:\n{stderr}"
    );
}

#[test]
fn a_factory_that_returns_no_callable_stops_the_pool_with_gunicorns_message() {
    let site = Site::new();
    let pool = LifecyclePool::new("factory_app:not_an_app()");
    pool.install(&site);
    let drover = Drover::spawn(&site);

    let log = &drover.log;
    log.wait_for_line(
        "Application object must be callable: factory_app:not_an_app() is int",
        TIMEOUT,
    );
    log.wait_for_line(
        "pool py: the app failed to load (traceback above); the pool is stopped until a reload",
        TIMEOUT,
    );
}
