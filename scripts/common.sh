# shellcheck shell=bash
# Helpers shared by scripts/demo.sh and scripts/test.sh (sourced, not run).

# Debian keeps nginx in /usr/sbin, which is not on a normal user's PATH.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

die() {
    echo "error: $*" >&2
    exit 1
}

# as_root CMD...: run CMD as root, through sudo when we are not root.
as_root() {
    if ((EUID == 0)); then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root to run: $*  (run this script as root, or install sudo)"
    fi
}

# ensure_packages "COMMAND:PACKAGE [PACKAGE...]" ...
# Installs, with apt-get, the packages of every COMMAND that is not on PATH (a COMMAND
# with a slash is a file that must exist, for packages that ship no command). Runs
# apt-get update only when something must be installed; prints apt's log only on failure.
have() {
    if [[ $1 == */* ]]; then
        [[ -e $1 ]]
    else
        command -v "$1" >/dev/null 2>&1
    fi
}

ensure_packages() {
    local pair pkgs missing=()
    for pair in "$@"; do
        if ! have "${pair%%:*}"; then
            read -ra pkgs <<<"${pair#*:}"
            missing+=("${pkgs[@]}")
        fi
    done
    ((${#missing[@]} > 0)) || return 0

    command -v apt-get >/dev/null 2>&1 ||
        die "missing: ${missing[*]}; install them with your package manager"
    echo "==> installing ${missing[*]}"
    local log
    log=$(mktemp)
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >"$log" 2>&1 ||
        ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${missing[@]}" >>"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        die "apt-get could not install: ${missing[*]}"
    fi
    rm -f "$log"
}

# The packages each script needs, by the command that proves each is there: the build's
# (BUILD_PACKAGES, scripts/check.sh), the demo's (DEMO_PACKAGES, scripts/demo.sh: the build's
# and what its two pools are served with, nothing more) and the tests' (DROVER_PACKAGES,
# scripts/test.sh: the demo's and every peer and app the tests run).
# gcc and libc6-dev: cargo needs a C toolchain to link (and to build the `ring` crate).
# python3-dev: drover embeds CPython (pyo3), so the build needs python3 and libpython3.X.so;
# python3-config is the command it ships. libphp-embed: drover-php links PHP's embed library
# (libphp8.2.so); php-dev has its headers (php-config ships with it), against which a test
# also checks the struct offsets drover reads php-cgi workers with.
# shellcheck disable=SC2034  # used by the scripts that source this file
BUILD_PACKAGES=(
    "cc:gcc libc6-dev"
    "python3-config:python3-dev"
    "php-config:php-dev"
    "/usr/lib/libphp8.2.so:libphp-embed"
)

# nginx passes the demo's two pools; curl asks them for their pages.
# shellcheck disable=SC2034
DEMO_PACKAGES=(
    "${BUILD_PACKAGES[@]}"
    "nginx:nginx"
    "curl:curl"
)

# php-cgi: the PHP scenario tests run a second time on it (runtime = "cgi").
# strace: a test watches which system calls the master makes while it spawns workers.
# gdb: tests read a worker's stack. php-apcu: a test shows one APCu shared by a pool's
# workers; apache2: a test serves a pool through Apache's stock php-fpm wiring. php8.2-fpm:
# `drover import php-fpm` is tested on Debian's stock php-fpm.conf and www.conf, against
# php-fpm serving the same page.
# tmux: `drover ctl top` is tested in a real terminal (send-keys, capture-pane).
# openssl: the HTTPS tests make their certificates and keys with `openssl req`.
# man-db: a test renders the man pages scripts/man.sh builds with `man -l`.
# lintian: the packages scripts/package.sh builds are checked with it (package::deb).
# wordpress (with its default theme, and `php` so that apt takes the PHP already here rather
# than Apache's mod_php), mediawiki, dokuwiki and mariadb-server: drover-php's answers are
# compared with php-fpm's on these apps (tests/scenarios/embed/apps).
# php-symfony-framework-bundle, php-symfony-twig-bundle, php-twig and php-slim: PHP worker
# mode runs a Symfony 5.4 app and a Slim 3 app (tests/scenarios/worker/frameworks.rs).
# shellcheck disable=SC2034
DROVER_PACKAGES=(
    "${DEMO_PACKAGES[@]}"
    "php-cgi:php-cgi"
    "strace:strace"
    "gdb:gdb"
    "/usr/lib/php/20220829/apcu.so:php-apcu"
    "apache2:apache2"
    "/usr/sbin/php-fpm8.2:php8.2-fpm"
    "man:man-db"
    "tmux:tmux"
    "openssl:openssl"
    "/usr/share/wordpress/wp-settings.php:php wordpress"
    "/usr/share/wordpress/wp-content/themes/twentytwentythree:wordpress-theme-twentytwentythree"
    "/usr/share/mediawiki/index.php:php mediawiki"
    "/usr/share/dokuwiki/doku.php:php dokuwiki"
    "mariadbd:mariadb-server"
    "/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php:php-symfony-framework-bundle php-symfony-twig-bundle php-twig"
    "/usr/share/php/Slim/autoload.php:php-slim"
    "lintian:lintian"
    # A background pool runs `php artisan queue:work` of a Laravel 8 app on Debian's framework,
    # its queue in SQLite (tests/scenarios/program/laravel.rs).
    "/usr/share/php/Illuminate/autoload.php:php-laravel-framework"
    "/usr/lib/php/20220829/pdo_sqlite.so:php-sqlite3"
)

# ensure_flask: the Python scenario tests serve a Flask app through the python3 on PATH, the
# CPython that drover is built against (pyo3); installs Flask with pip when it cannot be
# imported.
ensure_flask() {
    command -v python3 >/dev/null 2>&1 ||
        die "python3 not found: drover's Python runtime and its tests need CPython 3"
    python3 -c 'import flask' >/dev/null 2>&1 && return 0
    echo "==> installing flask (python3 -m pip)"
    python3 -m pip install -q flask || die "pip could not install flask for $(command -v python3)"
}

# ensure_fastapi: the ASGI scenario tests serve a FastAPI app (and run it on uvloop, as a
# production install with uvicorn[standard] would), and WebSockets (the worker's codec and
# the tests' client are the websockets package); installed with pip when missing.
ensure_fastapi() {
    python3 -c 'import fastapi, uvloop, websockets' >/dev/null 2>&1 && return 0
    echo "==> installing fastapi, uvloop and websockets (python3 -m pip)"
    python3 -m pip install -q fastapi uvloop websockets ||
        die "pip could not install fastapi, uvloop and websockets for $(command -v python3)"
}

# ensure_django: a scenario test serves a Django 5 project through Django's ASGI handler.
# Django 6 needs Python 3.12, so the newest 5.x is pinned for the CPython drover embeds.
ensure_django() {
    python3 -c 'import django, sys; sys.exit(django.VERSION[0] != 5)' >/dev/null 2>&1 && return 0
    echo "==> installing django 5 (python3 -m pip)"
    python3 -m pip install -q 'django>=5,<6' ||
        die "pip could not install django 5 for $(command -v python3)"
}

# ensure_prometheus_client: the metrics scenario tests parse /metrics with Prometheus's own
# Python parser (prometheus_client), in both formats; installed with pip when missing.
ensure_prometheus_client() {
    python3 -c 'import prometheus_client' >/dev/null 2>&1 && return 0
    echo "==> installing prometheus_client (python3 -m pip)"
    python3 -m pip install -q prometheus_client ||
        die "pip could not install prometheus_client for $(command -v python3)"
}

# ensure_kubernetes_client: the manifests' test reads deploy/kubernetes/ into the official
# Kubernetes Python client's models (and PyYAML, which it depends on); installed with pip
# when missing.
ensure_kubernetes_client() {
    python3 -c 'import kubernetes, yaml' >/dev/null 2>&1 && return 0
    echo "==> installing kubernetes (python3 -m pip)"
    python3 -m pip install -q kubernetes ||
        die "pip could not install kubernetes for $(command -v python3)"
}

# ensure_celery: a background pool runs a real Celery worker (tests/apps/celery, on kombu's
# filesystem transport: no broker service); installed with pip when missing.
ensure_celery() {
    python3 -c 'import celery' >/dev/null 2>&1 && return 0
    echo "==> installing celery (python3 -m pip)"
    python3 -m pip install -q celery || die "pip could not install celery for $(command -v python3)"
}

# ensure_venv: the wheel's scenario tests (package::wheel) make virtualenvs with `python3 -m
# venv`, which needs ensurepip; Debian's python3 ships it apart, in python3-venv (a pyenv or
# python.org build has it). The wheel's build backend needs nothing beyond the standard
# library and pip (pyproject.toml: no build requirements to download).
ensure_venv() {
    local stdlib
    stdlib=$(python3 -c 'import sysconfig; print(sysconfig.get_path("stdlib"))') ||
        die "python3 not found: drover's Python runtime and its tests need CPython 3"
    ensure_packages "$stdlib/ensurepip/__init__.py:python3-venv"
}

require_cargo() {
    command -v cargo >/dev/null 2>&1 && return 0
    if [[ -n ${SUDO_USER:-} ]]; then
        die "cargo not found for root: run this script as yourself, without sudo (it uses sudo only for apt-get)"
    fi
    die "cargo not found: install Rust first (https://rustup.rs), then run this again"
}

# ensure_rust_components COMPONENT...: the cargo subcommands the checks use (rustfmt for
# `cargo fmt`, clippy for `cargo clippy`); a toolchain from rustup may lack them, and rustup
# adds them for the user who runs cargo (no root needed).
ensure_rust_components() {
    local component subcommand missing=()
    for component in "$@"; do
        subcommand=${component/rustfmt/fmt}
        cargo "$subcommand" --version >/dev/null 2>&1 || missing+=("$component")
    done
    ((${#missing[@]} > 0)) || return 0
    command -v rustup >/dev/null 2>&1 ||
        die "missing cargo components: ${missing[*]}; install them with your Rust toolchain"
    echo "==> rustup component add ${missing[*]}"
    rustup component add "${missing[@]}"
}
