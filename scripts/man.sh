#!/usr/bin/env bash
# scripts/man.sh [DIR]: build the man pages drover(8) and drover.toml(5) from the manual's
# pages in docs/ (with scripts/man.py, Python's standard library only) into DIR, by default
# target/man. `man -l DIR/drover.8` reads one; a package installs them in man8/ and man5/.
#
#   drover(8):       the command line, drover ctl, reload and signals
#   drover.toml(5):  the configuration (and docs/pool-keys.md, the generated key reference,
#                    when it is there)
#
# The pages are the source: nothing here is edited by hand, and the scenario test
# `docs::man` builds them and checks that man renders them without a warning.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
out=${1:-$repo/target/man}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
mkdir -p "$out"

man_page() {
    local file=$1
    shift
    python3 "$repo/scripts/man.py" --version "drover $version" "$@" >"$out/$file.tmp"
    mv "$out/$file.tmp" "$out/$file"
    echo "wrote $out/$file"
}

cd "$repo"
man_page drover.8 --name drover --section 8 \
    --summary "a process manager for FastCGI, WSGI and ASGI applications" \
    --see-also "drover.toml(5), nginx(8), php-fpm(8), gunicorn(1), systemd.service(5); the whole manual is the Markdown pages of docs/ in drover's source." \
    docs/command-line.md docs/ctl.md docs/reload.md

toml_pages=(docs/configuration.md)
if [[ -f docs/pool-keys.md ]]; then
    toml_pages+=(docs/pool-keys.md)
fi
man_page drover.toml.5 --name drover.toml --section 5 \
    --summary "drover's configuration: drover.toml and its pool files" \
    --see-also "drover(8); the whole manual is the Markdown pages of docs/ in drover's source." \
    "${toml_pages[@]}"
