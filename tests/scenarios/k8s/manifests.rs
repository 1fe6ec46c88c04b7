//! deploy/kubernetes/: every manifest is read into the official Kubernetes Python client's
//! models (an unknown field, a wrong type or a missing required field fails), and every
//! command, path and port it names is checked against what the repository ships and drover
//! serves (`tests/scenarios/k8s/check_manifests.py`).

use std::path::Path;
use std::process::Command;

use crate::common::{admin_bin, bin, run_bounded};

#[test]
fn the_manifests_are_valid_kubernetes_and_name_what_drover_ships() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = run_bounded(
        Command::new("python3")
            .arg(root.join("tests/scenarios/k8s/check_manifests.py"))
            .arg(root)
            .env("DROVER_BIN", bin())
            .env("DROVER_ADMIN_BIN", admin_bin()),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("checked"), "{stdout}");
}
