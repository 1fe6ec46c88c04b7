//! Real frameworks from Debian's packages in worker mode: a Symfony 5.4 micro-kernel app
//! whose worker script is written as Symfony Runtime's FrankenPHP runner runs a kernel
//! (tests/apps/symfony), beside the same app in classic mode; and a Slim 3 app
//! (tests/apps/slim).

use std::path::{Path, PathBuf};

use crate::common::{Drover, Location, Nginx, Site, http};
use crate::embed::Embed;

fn app(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/apps")
        .join(relative)
}

/// Every path under `prefix` to the pool, run by `front` (SCRIPT_NAME `prefix` + its name,
/// as a front controller is served).
fn front_controller(prefix: &str, socket: &Path, front: &Path) -> Location {
    let name = front.file_name().unwrap().to_string_lossy();
    Location::prefix(prefix, socket).with(&format!(
        "fastcgi_param SCRIPT_FILENAME {}; fastcgi_param SCRIPT_NAME {prefix}{name};",
        front.display()
    ))
}

fn missing(path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return false;
    }
    eprintln!("skipped: {path} is missing (install {package})");
    true
}

/// Symfony: the worker script boots the kernel once per worker and serves every route the
/// classic front controller serves, with the same bodies; two clients' sessions stay
/// apart; a route that does not exist is Symfony's 404.
#[test]
fn a_symfony_app_runs_its_frankenphp_worker_script_unchanged() {
    if missing(
        "/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php",
        "php-symfony-twig-bundle",
    ) {
        return;
    }
    let site = Site::new();
    let boots = site.path().join("boots.log");
    let env = format!(
        "APP_CACHE_DIR = {:?}\nAPP_BOOT_LOG = {boots:?}\n",
        site.path().join("cache")
    );
    let sessions = site.path().join("sessions");
    std::fs::create_dir_all(&sessions).unwrap();
    let ini = format!("session.save_path = {sessions:?}\n");
    let worker = Embed::new("worker", 1)
        .php(&format!(
            "worker = {:?}\n",
            app("symfony/public/worker.php")
        ))
        .env(&env)
        .ini(&ini);
    let classic = Embed::new("classic", 1).env(&env).ini(&ini);
    let _drover = Drover::start(&site, &[&worker, &classic]);
    let nginx = Nginx::start_locations(
        &site,
        &[
            front_controller(
                "/w/",
                &site.socket("worker"),
                &app("symfony/public/worker.php"),
            ),
            front_controller(
                "/c/",
                &site.socket("classic"),
                &app("symfony/public/index.php"),
            ),
        ],
    );
    let get = |path: &str| http::get(&nginx.url(path));

    for path in ["hello/drover", "page", "page?title=Other", "hello/again"] {
        let (w, c) = (get(&format!("/w/{path}")), get(&format!("/c/{path}")));
        assert_eq!(w.status, 200, "{path}: {w:?}");
        assert_eq!((w.status, &w.body), (c.status, &c.body), "{path}");
        // The same headers, in the same order, as the classic front controller's (but the
        // date).
        let headers = |r: &http::Reply| -> Vec<(String, String)> {
            r.headers
                .iter()
                .filter(|(n, _)| n != "date")
                .cloned()
                .collect()
        };
        assert_eq!(headers(&w), headers(&c), "{path}");
    }
    assert_eq!(get("/w/hello/drover").body, "Hello drover!");
    let page = get("/w/page").body;
    assert!(
        page.contains("<h1>Products</h1>") && page.contains("ITEM 20"),
        "{page}"
    );
    assert!(
        !page.contains("Other"),
        "the last request's title stayed: {page}"
    );

    let states: Vec<serde_json::Value> = (0..3)
        .map(|i| {
            let reply = http::get_with(
                &nginx.url(&format!("/w/state?n={i}")),
                &[("Cookie", &format!("c={i}"))],
            );
            serde_json::from_str(&reply.body).unwrap()
        })
        .collect();
    assert!(
        states.windows(2).all(|w| w[0]["pid"] == w[1]["pid"]),
        "{states:?}"
    );
    let handled: Vec<u64> = states
        .iter()
        .map(|s| s["handled"].as_u64().unwrap())
        .collect();
    assert_eq!(handled, [1, 2, 3], "one kernel handled them all");
    assert_eq!(states[2]["query"], serde_json::json!({"n": "2"}));
    assert_eq!(states[2]["cookies"], serde_json::json!({"c": "2"}));
    let classic_state: serde_json::Value = serde_json::from_str(&get("/c/state").body).unwrap();
    assert_eq!(
        classic_state["handled"], 1,
        "classic mode boots a kernel per request"
    );
    assert_eq!(
        std::fs::read_to_string(&boots).unwrap().lines().count(),
        1,
        "the worker booted once"
    );

    // Sessions through Symfony's session service, two clients interleaved.
    let session = |cookie: Option<&str>, query: &str| {
        let headers: Vec<(&str, &str)> = cookie.map(|c| ("Cookie", c)).into_iter().collect();
        let reply = http::get_with(&nginx.url(&format!("/w/session{query}")), &headers);
        assert_eq!(reply.status, 200, "{reply:?}");
        let cookie = reply
            .header_values("Set-Cookie")
            .first()
            .map(|c| c.split(';').next().unwrap().to_owned());
        (
            cookie,
            serde_json::from_str::<serde_json::Value>(&reply.body).unwrap(),
        )
    };
    let (alice, a1) = session(None, "?user=alice");
    let (bob, b1) = session(None, "");
    let alice = alice.expect("a session cookie for alice");
    let bob = bob.expect("a session cookie for bob");
    let (_, a2) = session(Some(&alice), "");
    let (_, b2) = session(Some(&bob), "");
    assert_ne!(alice, bob);
    assert_eq!(
        (a1["count"].as_u64(), a1["user"].as_str()),
        (Some(1), Some("alice"))
    );
    assert_eq!(
        (b1["count"].as_u64(), b1["user"].as_str()),
        (Some(1), None),
        "{b1}"
    );
    assert_eq!(
        (a2["count"].as_u64(), a2["user"].as_str()),
        (Some(2), Some("alice"))
    );
    assert_eq!(
        (b2["count"].as_u64(), b2["user"].as_str()),
        (Some(2), None),
        "{b2}"
    );

    let missing_route = get("/w/no/such/route");
    assert_eq!(missing_route.status, 404, "{missing_route:?}");
    assert_eq!(get("/w/hello/after").body, "Hello after!");
}

/// Slim 3: routes, JSON, a POST body, the request's own headers and query, one app
/// object across requests.
#[test]
fn a_slim_app_serves_from_one_booted_app() {
    if missing("/usr/share/php/Slim/autoload.php", "php-slim") {
        return;
    }
    let site = Site::new();
    let script = app("slim/worker.php");
    let pool = Embed::new("slim", 1).php(&format!("worker = {script:?}\n"));
    let _drover = Drover::start(&site, &[&pool]);
    let nginx = Nginx::start_locations(
        &site,
        &[front_controller("/", &site.socket("slim"), &script)],
    );

    assert_eq!(http::get(&nginx.url("/hello/slim")).body, "Hello slim!");
    let a: serde_json::Value = serde_json::from_str(
        &http::get_with(&nginx.url("/count?who=a"), &[("X-Client", "a")]).body,
    )
    .unwrap();
    let b: serde_json::Value = serde_json::from_str(&http::get(&nginx.url("/count")).body).unwrap();
    assert_eq!(a["pid"], b["pid"]);
    assert_eq!(
        (a["served"].as_u64(), b["served"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(a["query"], serde_json::json!({"who": "a"}));
    assert_eq!(
        (b["query"].clone(), b["client"].as_str()),
        (serde_json::json!([]), Some(""))
    );
    let posted = http::post(
        &nginx.url("/echo"),
        "application/x-www-form-urlencoded",
        b"k=v",
    );
    let posted: serde_json::Value = serde_json::from_str(&posted.body).unwrap();
    assert_eq!(posted["parsed"], serde_json::json!({"k": "v"}));
    assert_eq!(posted["raw"], "k=v");
    let missing_route = http::get(&nginx.url("/nope"));
    assert_eq!(missing_route.status, 404, "{missing_route:?}");
}

/// Symfony with the bundle's default session configuration (`NativeFileSessionHandler`,
/// which sets `session.save_path` with `ini_set()` when it is built, on the first request
/// that uses the session) keeps its sessions in worker mode: one client's counter goes 1,
/// 2, 3, as under php-fpm (it went 1, 1, 2), and the sessions are in the cache's folder;
/// booted in the worker and in the zygote.
#[test]
fn symfony_keeps_its_sessions_with_its_default_session_configuration() {
    if missing(
        "/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php",
        "php-symfony-twig-bundle",
    ) {
        return;
    }
    for boot in ["", "worker_boot = \"zygote\"\n"] {
        let site = Site::new();
        let cache = site.path().join("cache");
        let env = format!("APP_CACHE_DIR = {cache:?}\nAPP_SESSION_DEFAULTS = \"1\"\n");
        let worker = Embed::new("worker", 1)
            .php(&format!(
                "worker = {:?}\n{boot}",
                app("symfony/public/worker.php")
            ))
            .env(&env);
        let drover = Drover::start(&site, &[&worker]);
        let nginx = Nginx::start_locations(
            &site,
            &[front_controller(
                "/w/",
                &site.socket("worker"),
                &app("symfony/public/worker.php"),
            )],
        );
        let mut cookie: Option<String> = None;
        let mut counts = Vec::new();
        for _ in 0..3 {
            let headers: Vec<(&str, &str)> =
                cookie.iter().map(|c| ("Cookie", c.as_str())).collect();
            let reply = http::get_with(&nginx.url("/w/session"), &headers);
            assert_eq!(reply.status, 200, "{reply:?}\n{}", drover.log.text());
            if let Some(set) = reply.header_values("Set-Cookie").first() {
                cookie = Some(set.split(';').next().unwrap().to_owned());
            }
            let body: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
            counts.push(body["count"].as_u64());
        }
        assert_eq!(counts, [Some(1), Some(2), Some(3)], "{}", drover.log.text());
        let stored = std::fs::read_dir(cache.join("prod/sessions"))
            .map(|dir| dir.count())
            .unwrap_or(0);
        assert!(stored > 0, "no session under the cache's sessions/");
    }
}
