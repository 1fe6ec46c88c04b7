#!/usr/bin/env bash
# scripts/test.sh: run drover's whole test suite, installing what it needs when missing.
#
# The tests start the real drover binary, nginx, php-cgi and CPython apps, so php-cgi, nginx
# and curl are installed with apt-get (through sudo when not root) if their commands are
# absent; a C toolchain too, which cargo needs to link; and Flask, FastAPI, uvloop,
# Django 5, prometheus_client (which parses /metrics) and Celery, with pip, for the python3 on PATH,
# and Python's venv module (the wheel's test makes virtualenvs). Then: cargo test --workspace --release (every crate, the release profile).
# Then the scenario tests' PHP pools again on php-cgi (DROVER_TEST_PHP_RUNTIME=cgi; the
# default is drover-php). Extra arguments go to cargo test, e.g. scripts/test.sh signals,
# and skip that second pass.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"

ensure_packages "${DROVER_PACKAGES[@]}"
ensure_flask
ensure_fastapi
ensure_django
ensure_prometheus_client
ensure_kubernetes_client
ensure_celery
ensure_venv
require_cargo
cd "$repo"
echo "==> cargo test --workspace --release${*:+ $*}"
cargo test --workspace --release "$@"
# PHP pools run on drover-php unless they say otherwise; the PHP scenario tests run a
# second time on php-cgi, the runtime kept for PHP builds drover-php was not built against.
# Skipped there: what runs no default-runtime PHP pool (Python, the packages, Kubernetes)
# and what names drover-php itself (embed::, PHP worker mode).
if (($# == 0)); then
    echo "==> DROVER_TEST_PHP_RUNTIME=cgi cargo test --release --test scenarios (PHP pools on php-cgi)"
    DROVER_TEST_PHP_RUNTIME=cgi cargo test --release --test scenarios -- --skip python --skip embed \
        --skip worker:: --skip package:: --skip k8s::
fi
