//! The man pages: `scripts/man.sh` builds drover(8) and drover.toml(5) from the pages of
//! docs/, and `man -l` renders each without a warning from groff.

use std::process::Command;

use super::markdown::root;

#[test]
fn man_pages_build_and_render() {
    let out = tempfile::tempdir().expect("a temp dir");
    let built = Command::new(root().join("scripts/man.sh"))
        .arg(out.path())
        .output()
        .expect("run scripts/man.sh");
    assert!(
        built.status.success(),
        "scripts/man.sh failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    for (page, expected) in [
        ("drover.8", ["drover ctl", "SIGNALS", "Exit codes"]),
        (
            "drover.toml.5",
            ["max_children", "request_terminate_timeout", "[python]"],
        ),
    ] {
        let rendered = Command::new("man")
            .args(["--warnings", "-l"])
            .arg(out.path().join(page))
            .env("MANWIDTH", "100")
            .env("MAN_KEEP_FORMATTING", "")
            .output()
            .expect("run man (man-db)");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&rendered.stdout),
            String::from_utf8_lossy(&rendered.stderr),
        );
        assert!(rendered.status.success(), "man -l {page}: {stderr}");
        assert!(stderr.trim().is_empty(), "man -l {page} warned:\n{stderr}");
        for text in expected {
            assert!(
                stdout.contains(text),
                "man -l {page} lacks {text:?}:\n{stdout}"
            );
        }
    }
}
