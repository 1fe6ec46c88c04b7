//! MediaWiki 1.39 (Debian's `mediawiki`) on a MariaDB of the test's own, installed by its
//! own maintenance/install.php into a LocalSettings.php in the site, which the requests
//! name with the `MW_CONFIG_FILE` param (MediaWiki reads it with getenv()).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use super::mariadb::MariaDb;
use super::{App, Request, missing, serve_both};
use crate::common::{Site, run_bounded};

const STARTUP: &str = "/load.php?lang=en&modules=startup&only=scripts&raw=1&skin=vector";
const RAW: &str = "/index.php?title=Main_Page&action=raw";

fn requests() -> Vec<Request> {
    vec![
        // 301 to /index.php?title=Main_Page, Last-Modified now.
        Request::get("/").time_based(),
        // The rendered pages carry a request id and their timings.
        Request::get("/index.php?title=Main_Page").body_varies(),
        Request::head("/index.php?title=Main_Page"),
        Request::get("/index.php?title=No_such_page").body_varies(),
        // A session cookie.
        Request::get("/index.php?title=Special:UserLogin").body_varies(),
        Request::get("/index.php?title=Special:Random"),
        Request::get(RAW),
        Request::get(RAW).if_modified_since(),
        Request::get(STARTUP),
        Request::get(STARTUP).if_none_match(),
        Request::head(STARTUP).if_none_match(),
        Request::get("/api.php?action=query&titles=Main_Page&format=json"),
    ]
}

#[test]
fn mediawiki_answers_as_under_php_fpm() {
    if let Some(why) = missing(&[
        ("/usr/share/mediawiki/maintenance/install.php", "mediawiki"),
        (super::mariadb::MARIADBD, "mariadb-server"),
    ]) {
        eprintln!("skipped: {why}");
        return;
    }
    let site = Site::new();
    let db = MariaDb::start(&site, &["mediawiki"]);
    let conf = site.path().join("mediawiki");
    std::fs::create_dir(&conf).unwrap();
    let installed = run_bounded(
        Command::new("php")
            .arg("/usr/share/mediawiki/maintenance/install.php")
            .args([
                "--dbtype",
                "mysql",
                "--dbname",
                "mediawiki",
                "--dbuser",
                "app",
            ])
            .args([
                "--dbpass",
                "app",
                "--server",
                "http://localhost",
                "--scriptpath",
                "",
            ])
            .arg(format!("--dbserver=localhost:{}", db.socket.display()))
            .arg("--confpath")
            .arg(&conf)
            .args(["--pass", "admin-password-1", "drover test", "admin"]),
    );
    assert!(
        installed.status.success(),
        "MediaWiki's install: {}{}",
        String::from_utf8_lossy(&installed.stdout),
        String::from_utf8_lossy(&installed.stderr)
    );
    let settings = conf.join("LocalSettings.php");
    // MediaWiki runs queued jobs at the end of random requests ($wgJobRunRate), and a job
    // that touches the page moves its Last-Modified between two requests of the list: the
    // comparison needs the same page twice, so no job runs during a web request.
    let mut local = std::fs::read_to_string(&settings).unwrap();
    local.push_str("\n$wgJobRunRate = 0;\n");
    std::fs::write(&settings, local).unwrap();
    // MediaWiki's cache epoch is LocalSettings.php's mtime ($wgInvalidateCacheOnLocalSettingsChange),
    // and action=raw's Last-Modified is the revision's time: a file written a second after the
    // install made the page turns the If-Modified-Since request's 304 into a 200 (1 run in 8).
    // Dated back to 2020, the page's own time decides.
    std::fs::File::options()
        .write(true)
        .open(&settings)
        .and_then(|file| {
            file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_577_836_800))
        })
        .unwrap();
    // LocalSettings.php has the database password: as the package's, www-data reads it.
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o644)).unwrap();
    let app = App {
        name: "mediawiki",
        root: "/usr/share/mediawiki".into(),
        fallback: "/index.php?$args",
        params: format!("fastcgi_param MW_CONFIG_FILE {};", settings.display()),
        locations: String::new(),
    };
    let requests = requests();
    let compared = serve_both(&site, &app, &requests);

    let codes: Vec<u16> = (0..requests.len())
        .map(|i| compared.fpm(i).code())
        .collect();
    assert_eq!(
        codes,
        [301, 200, 200, 404, 200, 302, 200, 304, 200, 304, 304, 200]
    );
    assert!(compared.fpm(4).has("set-cookie"), "{:?}", compared.fpm(4));
    assert!(
        !compared.fpm(9).has("content-type"),
        "{:?}",
        compared.fpm(9)
    );
    compared.assert_same(&requests);
    drop(db);
}
