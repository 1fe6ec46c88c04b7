//! Every route, every query form and every refusal, without a socket.

use super::*;

fn control(method: &str, target: &str, body: &str) -> Result<Route, Refusal> {
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (target, None),
    };
    route(method, path, query, body.as_bytes(), &Scope::Control)
}

fn status_of(pool: &str, target: &str) -> Result<Route, Refusal> {
    let (path, query) = target
        .split_once('?')
        .map_or((target, None), |(p, q)| (p, Some(q)));
    route(
        "GET",
        path,
        query,
        b"",
        &Scope::Status { pool: pool.into() },
    )
}

fn status(pool: Option<&str>, format: Format, full: bool) -> Route {
    Route::Status {
        pool: pool.map(str::to_owned),
        format,
        full,
    }
}

fn refused(result: Result<Route, Refusal>) -> (u16, String) {
    let refusal = result.unwrap_err();
    (refusal.status, refusal.message)
}

#[test]
fn status_takes_our_query_and_php_fpms() {
    assert_eq!(
        control("GET", "/status", ""),
        Ok(status(None, Format::Text, false))
    );
    assert_eq!(
        control("HEAD", "/status", ""),
        Ok(status(None, Format::Text, false))
    );
    assert_eq!(
        control("GET", "/status?pool=www&format=json&full", ""),
        Ok(status(Some("www"), Format::Json, true))
    );
    assert_eq!(
        control("GET", "/status?json&full", ""),
        Ok(status(None, Format::Json, true))
    );
    assert_eq!(
        control("GET", "/status?openmetrics", ""),
        Ok(status(None, Format::OpenMetrics, false))
    );
    assert_eq!(
        control("GET", "/status?format=openmetrics&openmetrics", ""),
        Ok(status(None, Format::OpenMetrics, false))
    );
    assert_eq!(
        control("GET", "/status?pool=my%20pool", ""),
        Ok(status(Some("my pool"), Format::Text, false))
    );
    assert_eq!(
        control("GET", "/status?pool=a+b", ""),
        Ok(status(Some("a b"), Format::Text, false))
    );
}

#[test]
fn status_refuses_unknown_formats_keys_and_empty_pools() {
    assert_eq!(refused(control("GET", "/status?html", "")).0, 400);
    assert!(
        refused(control("GET", "/status?format=yaml", ""))
            .1
            .contains("\"yaml\" is not served")
    );
    assert!(
        refused(control("GET", "/status?json&openmetrics", ""))
            .1
            .contains("more than one format")
    );
    assert!(
        refused(control("GET", "/status?pol=www", ""))
            .1
            .contains("unknown query parameter \"pol\"")
    );
    assert_eq!(refused(control("GET", "/status?pool=", "")).0, 400);
    assert_eq!(refused(control("GET", "/status?pool", "")).0, 400);
    assert!(
        refused(control("GET", "/status?pool=%zz", ""))
            .1
            .contains("percent-escape")
    );
    assert!(
        refused(control("GET", "/status?pool=%ff", ""))
            .1
            .contains("UTF-8")
    );
}

#[test]
fn ping_config_and_reload() {
    assert_eq!(control("GET", "/ping", ""), Ok(Route::Ping));
    assert_eq!(
        control("GET", "/config", ""),
        Ok(Route::Master(ControlRequest::Config { pool: None }))
    );
    assert_eq!(
        control("GET", "/config?pool=www", ""),
        Ok(Route::Master(ControlRequest::Config {
            pool: Some("www".into())
        }))
    );
    assert_eq!(
        control("POST", "/reload", ""),
        Ok(Route::Master(ControlRequest::Reload {
            pool: None,
            changed: false
        }))
    );
    assert_eq!(
        control("POST", "/reload?pool=app", ""),
        Ok(Route::Master(ControlRequest::Reload {
            pool: Some("app".into()),
            changed: false
        }))
    );
    assert_eq!(
        control("POST", "/reload?changed", ""),
        Ok(Route::Master(ControlRequest::Reload {
            pool: None,
            changed: true
        }))
    );
    assert_eq!(
        control("POST", "/reload?pool=app&changed", ""),
        Ok(Route::Master(ControlRequest::Reload {
            pool: Some("app".into()),
            changed: true
        }))
    );
}

#[test]
fn set_reads_key_value_lines() {
    let body = "pm.max_children=12\n\n  pm.min_spare_servers = 3 \r\npm.max_memory=\"256MiB\"\n";
    let expected = vec![
        ("pm.max_children".to_owned(), "12".to_owned()),
        ("pm.min_spare_servers".to_owned(), "3".to_owned()),
        ("pm.max_memory".to_owned(), "\"256MiB\"".to_owned()),
    ];
    assert_eq!(
        control("POST", "/pools/www/set", body),
        Ok(Route::Master(ControlRequest::Set {
            pool: "www".into(),
            changes: expected
        }))
    );
    // A name with a slash or a plus, escaped by the client.
    assert_eq!(
        control("POST", "/pools/a%2Fb+c/set", "x=1"),
        Ok(Route::Master(ControlRequest::Set {
            pool: "a/b+c".into(),
            changes: vec![("x".into(), "1".into())]
        }))
    );
    assert!(
        refused(control(
            "POST",
            "/pools/www/set",
            "pm.max_children=1\nnonsense"
        ))
        .1
        .starts_with("line 2: expected KEY=VALUE")
    );
    assert!(
        refused(control("POST", "/pools/www/set", "=12"))
            .1
            .contains("KEY=VALUE")
    );
    assert!(
        refused(control("POST", "/pools/www/set", "\n \n"))
            .1
            .starts_with("no changes")
    );
    assert_eq!(
        refused(route(
            "POST",
            "/pools/www/set",
            None,
            b"k=\xff",
            &Scope::Control
        ))
        .0,
        400
    );
}

#[test]
fn workers_needs_a_sign_and_a_nonzero_count() {
    let workers = |delta| {
        Ok(Route::Master(ControlRequest::Workers {
            pool: "www".into(),
            delta,
        }))
    };
    assert_eq!(control("POST", "/pools/www/workers", "+2"), workers(2));
    assert_eq!(control("POST", "/pools/www/workers", " -1\n"), workers(-1));
    for bad in ["2", "", "+", "-x", "+1.5", "++1", "+99999999999", "+ 1"] {
        assert!(
            refused(control("POST", "/pools/www/workers", bad))
                .1
                .contains("+N or -N"),
            "{bad:?}"
        );
    }
    assert!(
        refused(control("POST", "/pools/www/workers", "-0"))
            .1
            .contains("0 workers")
    );
}

#[test]
fn wrong_methods_and_paths_are_refused() {
    let refusal = control("POST", "/status", "").unwrap_err();
    assert_eq!((refusal.status, refusal.allow), (405, Some("GET, HEAD")));
    assert_eq!(
        control("GET", "/reload", "").unwrap_err().allow,
        Some("POST")
    );
    assert_eq!(control("DELETE", "/config", "").unwrap_err().status, 405);
    for path in [
        "/",
        "/nope",
        "/status/",
        "/pools//set",
        "/pools/www",
        "/pools/www/kill",
    ] {
        assert_eq!(refused(control("POST", path, "x=1")).0, 404, "{path}");
    }
    assert!(
        refused(control("GET", "/ping?x", ""))
            .1
            .contains("takes none")
    );
}

#[test]
fn a_status_listener_serves_only_its_pool_status_metrics_and_ping() {
    assert_eq!(
        status_of("www", "/status?json"),
        Ok(status(Some("www"), Format::Json, false))
    );
    assert_eq!(
        status_of("www", "/status?pool=www"),
        Ok(status(Some("www"), Format::Text, false))
    );
    assert_eq!(status_of("www", "/ping"), Ok(Route::Ping));
    assert!(
        refused(status_of("www", "/status?pool=app"))
            .1
            .contains("pool \"www\" only")
    );
    for path in ["/config", "/reload", "/pools/www/set", "/pools/www/workers"] {
        let (code, message) = refused(status_of("www", path));
        assert_eq!(code, 404, "{path}");
        assert!(
            message.contains("serves /status, /metrics and /ping"),
            "{message}"
        );
    }
    assert_eq!(
        status_of("www", "/metrics"),
        Ok(Route::Metrics {
            pool: Some("www".into()),
            full: false
        })
    );
    assert_eq!(refused(status_of("www", "/metrics?pool=app")).0, 404);
}

#[test]
fn metrics_takes_pool_and_full_only() {
    assert_eq!(
        control("GET", "/metrics", ""),
        Ok(Route::Metrics {
            pool: None,
            full: false
        })
    );
    assert_eq!(
        control("HEAD", "/metrics?pool=www&full", ""),
        Ok(Route::Metrics {
            pool: Some("www".into()),
            full: true
        })
    );
    assert_eq!(refused(control("GET", "/metrics?openmetrics", "")).0, 400);
    assert_eq!(refused(control("POST", "/metrics", "")).0, 405);
}

#[test]
fn health_listen_serves_the_probes_only_and_status_listen_none() {
    let health = |target: &str| {
        let (path, query) = target
            .split_once('?')
            .map_or((target, None), |(p, q)| (p, Some(q)));
        route("GET", path, query, b"", &Scope::Health)
    };
    assert_eq!(health("/livez"), Ok(Route::Live));
    assert_eq!(health("/readyz"), Ok(Route::Ready { verbose: false }));
    assert_eq!(
        health("/readyz?verbose"),
        Ok(Route::Ready { verbose: true })
    );
    assert_eq!(health("/ping"), Ok(Route::Ping));
    let (status, message) = refused(health("/status"));
    assert_eq!(status, 404);
    assert!(message.contains("/livez, /readyz and /ping"), "{message}");
    assert_eq!(refused(health("/readyz?pool=www")).0, 400);
    assert_eq!(
        control("GET", "/readyz", ""),
        Ok(Route::Ready { verbose: false })
    );
    assert_eq!(control("GET", "/livez", ""), Ok(Route::Live));
    assert_eq!(refused(control("POST", "/livez", "")).0, 405);
    assert_eq!(refused(status_of("www", "/readyz")).0, 404);
}
