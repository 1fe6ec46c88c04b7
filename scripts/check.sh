#!/usr/bin/env bash
# scripts/check.sh: the gates that keep the tree honest, run by CI before the tests:
#
#   1. cargo fmt --all --check: the code is formatted;
#   2. cargo clippy --workspace --all-targets -- -D warnings: no compiler or clippy warning
#      (the lints are the workspace's, in Cargo.toml: [workspace.lints]), tests and benches
#      included;
#   3. cargo doc --workspace --no-deps with RUSTDOCFLAGS="-D warnings": the docs build,
#      with every intra-doc link resolved;
#   4. scripts/imports.py: no import circle among the modules of src/ and no arrow from a
#      lower layer up to a higher one (the layers and the allow-list are in the script).
#
# It installs what the build needs when missing, as scripts/test.sh does (clippy and rustdoc
# compile the build scripts, pyo3's among them), and the rustfmt and clippy components.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"

ensure_packages "${BUILD_PACKAGES[@]}"
require_cargo
ensure_rust_components rustfmt clippy
cd "$repo"
echo "==> cargo fmt --all --check"
cargo fmt --all --check
echo "==> cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "==> cargo doc --workspace --no-deps (RUSTDOCFLAGS=\"-D warnings\")"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
echo "==> scripts/imports.py (no import circle, no arrow up)"
python3 scripts/imports.py
