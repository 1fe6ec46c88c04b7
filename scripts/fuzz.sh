#!/usr/bin/env bash
# scripts/fuzz.sh: run each cargo-fuzz target (fuzz/fuzz_targets/) for a bounded time on
# its seed corpus (fuzz/corpus/TARGET/), failing on the first crash, hang or leak.
#
# cargo-fuzz is installed with `cargo install` when missing. libFuzzer needs -Z flags,
# which stable Rust accepts with RUSTC_BOOTSTRAP=1. New inputs libFuzzer finds go to a
# temporary folder, so the corpus in the repository stays as committed; a crashing input
# is saved under fuzz/artifacts/TARGET/ and its path printed.
#
# Usage: scripts/fuzz.sh [SECONDS] (default 60 per target).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"
seconds=${1:-60}

require_cargo
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> cargo install cargo-fuzz"
    cargo install --locked cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
cd "$repo"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every target builds before any runs: a target that no longer compiles against the crates
# fails here, at once.
echo "==> cargo fuzz build"
cargo fuzz build
for target in $(cargo fuzz list); do
    echo "==> cargo fuzz run $target (${seconds}s)"
    mkdir -p "$work/$target"
    # -timeout: one input running 10 s is a hang, and a failure.
    cargo fuzz run "$target" "$work/$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1
done
