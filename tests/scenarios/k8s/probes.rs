//! `/livez` and `/readyz`: on `health_listen` (TCP, for kubelet) and on the control socket;
//! busy workers never fail either probe, a pool whose app failed makes drover unready but
//! never unlive.

use std::thread;

use super::{curl, start_with_health};
use crate::common::{Location, Nginx};
use crate::common::{PhpPool, PythonPool, Site, TIMEOUT, http, python, wait_until};

#[test]
fn probes_answer_on_health_listen_and_the_control_socket_even_when_every_worker_is_busy() {
    let site = Site::new();
    let started = site.path().join("hold.started");
    site.script(
        "hold.php",
        &format!(
            "<?php touch('{}'); usleep(1500000); echo 'done';",
            started.display()
        ),
    );
    let control = site.path().join("ctl.sock");
    let pool = PhpPool::new("www").max_children(1);
    let (drover, health) = start_with_health(
        &site,
        &format!("[control]\nlisten = \"{}\"\n", control.display()),
        &[&pool],
    );
    let nginx = Nginx::start(&site, &site.socket("www"));
    let url = |path: &str| format!("http://{health}{path}");
    assert_eq!(curl(&url("/livez"), None), (200, "ok\n".into()));
    assert_eq!(curl(&url("/readyz"), None), (200, "ok\n".into()));
    let (status, verbose) = curl(&url("/readyz?verbose"), None);
    assert_eq!(status, 200, "{verbose}");
    assert!(verbose.contains("[+]pool www: ready\n"), "{verbose}");
    assert!(verbose.ends_with("readyz check passed\n"), "{verbose}");
    // The control socket answers the same routes.
    let over_control = |path: &str| curl(&format!("http://drover{path}"), Some(&control));
    assert_eq!(over_control("/livez"), (200, "ok\n".into()));
    assert_eq!(over_control("/readyz"), (200, "ok\n".into()));
    // health_listen serves the probes and nothing else.
    let (status, body) = curl(&url("/status"), None);
    assert_eq!(status, 404, "{body}");

    // The pool's one worker is busy: both probes still pass (busy is not unready).
    let slow = nginx.url("/hold.php");
    let request = thread::spawn(move || http::get(&slow));
    wait_until(TIMEOUT, "the request to start", || {
        started.exists().then_some(())
    });
    assert_eq!(curl(&url("/livez"), None), (200, "ok\n".into()));
    assert_eq!(curl(&url("/readyz"), None), (200, "ok\n".into()));
    let reply = request.join().unwrap();
    assert_eq!((reply.status, reply.body.as_str()), (200, "done"));
    drop(drover);
}

#[test]
fn a_pool_whose_app_fails_to_load_is_not_ready_and_drover_stays_live() {
    let site = Site::new();
    python::install_apps(&site);
    let good = PythonPool::wsgi("good").max_children(1);
    let broken = PythonPool::new("broken", "broken_app:application").max_children(1);
    let (drover, health) = start_with_health(&site, "", &[&good, &broken]);
    let url = |path: &str| format!("http://{health}{path}");
    let (status, body) = curl(&url("/readyz"), None);
    assert_eq!(status, 503, "{body}\nlog:\n{}", drover.log.text());
    assert!(
        body.contains("[-]pool broken: failed") && !body.contains("pool good"),
        "{body}"
    );
    assert!(body.ends_with("readyz check failed\n"), "{body}");
    let (_, verbose) = curl(&url("/readyz?verbose"), None);
    assert!(verbose.contains("[+]pool good: ready"), "{verbose}");
    assert_eq!(curl(&url("/livez"), None), (200, "ok\n".into()));
    // The good pool still serves.
    let nginx = Nginx::start_locations(&site, &[Location::prefix("/", &site.socket("good"))]);
    assert_eq!(http::get(&nginx.url("/")).status, 200);
}
