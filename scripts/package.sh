#!/usr/bin/env bash
# scripts/package.sh [--version VERSION] [--profile PROFILE]: build drover's Debian packages
# into target/debian/:
#
#   drover_VERSION_ARCH.deb         the master and drover-admin (drover -t, ctl, import), the
#                                   systemd unit, /etc/drover (conffiles), logrotate, the
#                                   man pages, the example pools and apps
#   drover-php_VERSION_ARCH.deb     drover-php, which links PHP's embed library (libphp8.2-embed)
#   drover-python_VERSION_ARCH.deb  drover-python, which links Debian's libpython3.X
#
# so that a Python-only host does not pull libphp and a PHP-only host does not pull
# libpython. The binaries live in /usr/lib/drover (the master execs the others from its own
# folder) and /usr/sbin/drover links to the master. Dependencies on shared libraries are
# computed by dpkg-shlibdeps from the binaries.
#
# VERSION defaults to Cargo.toml's; PROFILE to "release" (cargo's profile; the binaries of a
# profile already built are reused, nothing is rebuilt that is current). drover-python is
# built against Debian's /usr/bin/python3 (PYO3_PYTHON), in its own target folder
# (target/debian/cargo), whatever python3 is first on PATH: the package must load the
# libpython it depends on. Needs dpkg-dev, chrpath and python3-dev; installs them with
# apt-get when missing. docs/install.md says how to install the packages.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml" | head -n 1)
profile=release
while (($# > 0)); do
    case $1 in
    --version)
        version=$2
        shift 2
        ;;
    --profile)
        profile=$2
        shift 2
        ;;
    *) die "usage: scripts/package.sh [--version VERSION] [--profile PROFILE]" ;;
    esac
done
[[ $version =~ ^[0-9][A-Za-z0-9.+~-]*$ ]] || die "not a Debian version: $version"

ensure_packages "dpkg-shlibdeps:dpkg-dev" "chrpath:chrpath" "/usr/bin/python3-config:python3-dev" \
    "man:man-db"
require_cargo

out=$repo/target/debian
stage=$out/stage
python=/usr/bin/python3
arch=$(dpkg --print-architecture)
case $profile in
dev) profile_dir=debug ;;
*) profile_dir=$profile ;;
esac

cd "$repo"
echo "==> cargo build --profile $profile (drover, drover-admin, drover-php)"
nice -n 10 cargo build --quiet --profile "$profile" -p drover -p drover-admin -p drover-php
echo "==> cargo build --profile $profile -p drover-python against $python"
PYO3_PYTHON=$python nice -n 10 cargo build --quiet --profile "$profile" -p drover-python \
    --target-dir "$out/cargo"
bins=$repo/target/$profile_dir
python_bin=$out/cargo/$profile_dir/drover-python

rm -rf "$stage"
mkdir -p "$stage"

# install_bin SRC DEST: the binary, stripped, without an rpath to a folder the loader
# searches anyway (the build links libphp and libpython with one, for pyenv's and
# /usr/local's libraries; a package's come from Debian's folders).
install_bin() {
    install -D -m 0755 "$1" "$2"
    strip --strip-unneeded "$2"
    local runpath
    runpath=$(readelf -d "$2" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    case $runpath in
    "") ;;
    /usr/lib | /usr/lib/"$(dpkg-architecture -qDEB_HOST_MULTIARCH)" | /lib) chrpath -d "$2" >/dev/null ;;
    *) die "$2 has the rpath $runpath, not a Debian library folder: build it against Debian's libraries" ;;
    esac
}

# shlib_depends PKG BIN...: the Depends: dpkg-shlibdeps finds for the binaries (run in a
# scratch source tree: it wants a debian/control).
shlib_depends() {
    local pkg=$1 scratch
    shift
    scratch=$(mktemp -d)
    mkdir -p "$scratch/debian"
    printf 'Source: drover\n\nPackage: %s\nArchitecture: any\n' "$pkg" >"$scratch/debian/control"
    (cd "$scratch" && dpkg-shlibdeps -O "$@" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
    rm -rf "$scratch"
}

# docs PKG: the files every package carries in /usr/share/doc/PKG.
docs() {
    local doc=$stage/$1/usr/share/doc/$1
    install -D -m 0644 packaging/debian/copyright "$doc/copyright"
    {
        echo "$1 ($version) unstable; urgency=medium"
        echo
        echo "  * Built from drover's source by scripts/package.sh."
        echo
        echo " -- drover authors <drover@example.org>  $(date -R -d @"$(git log -1 --format=%ct 2>/dev/null || date +%s)")"
    } | gzip -9n >"$doc/changelog.gz"
    chmod 0644 "$doc/changelog.gz"
}

# control PKG DEPENDS DESCRIPTION...: DEBIAN/control, with the installed size.
control() {
    local pkg=$1 depends=$2 summary=$3 size
    shift 3
    size=$(du -sk --exclude=DEBIAN "$stage/$pkg" | cut -f1)
    mkdir -p "$stage/$pkg/DEBIAN"
    {
        echo "Package: $pkg"
        echo "Version: $version"
        echo "Architecture: $arch"
        echo "Maintainer: drover authors <drover@example.org>"
        echo "Installed-Size: $size"
        echo "Depends: $depends"
        [[ $pkg == drover ]] && echo "Suggests: drover-php, drover-python, nginx"
        echo "Section: httpd"
        echo "Priority: optional"
        echo "Description: $summary"
        local line
        for line in "$@"; do
            if [[ -z $line ]]; then echo " ."; else echo " $line"; fi
        done
    } >"$stage/$pkg/DEBIAN/control"
}

# --- drover ---------------------------------------------------------------------------
root=$stage/drover
install_bin "$bins/drover" "$root/usr/lib/drover/drover"
install_bin "$bins/drover-admin" "$root/usr/lib/drover/drover-admin"
mkdir -p "$root/usr/sbin"
ln -s ../lib/drover/drover "$root/usr/sbin/drover"

# The repository's examples, made to work from /etc/drover: sockets in /run/drover, a
# control socket for `drover ctl`, the example app from /usr/share/drover/examples.
install -d -m 0755 "$root/etc/drover/pools.d"
{
    echo "# /etc/drover/drover.toml: drover's global configuration (the default of drover -c)."
    sed -e '1,2d' -e 's|^# listen = "/run/drover/control.sock"|listen = "/run/drover/control.sock"|' drover.toml
} >"$root/etc/drover/drover.toml"
grep -q '^listen = "/run/drover/control.sock"' "$root/etc/drover/drover.toml" ||
    die "drover.toml: the control socket's line was not found"
for pool in www app command; do
    src=pools.d/$pool.toml
    [[ -f $src ]] || src=pools.d/$pool.toml.example
    {
        echo "# An example: copy it to /etc/drover/pools.d/$pool.toml (pools.d/*.toml are the pools),"
        echo "# edit it, check with drover -t, then systemctl restart drover."
        sed -e 's|^listen = "run/\([a-z]*\)\.sock"|listen = "/run/drover/\1.sock"|' \
            -e 's|^python_path = \["examples/app"\]|python_path = ["/usr/share/drover/examples/app"]|' \
            -e 's|^# slowlog = "log/|# slowlog = "/var/log/drover/|' "$src"
    } >"$root/etc/drover/pools.d/$pool.toml.example"
done
grep -q '^python_path = \["/usr/share/drover/examples/app"\]' "$root/etc/drover/pools.d/app.toml.example" ||
    die "pools.d/app.toml: the python_path line was not found"
chmod 0644 "$root"/etc/drover/drover.toml "$root"/etc/drover/pools.d/*
install -D -m 0644 examples/app/hello.py "$root/usr/share/drover/examples/app/hello.py"
install -D -m 0644 examples/www/index.php "$root/usr/share/drover/examples/www/index.php"
install -D -m 0644 examples/www/info.php "$root/usr/share/drover/examples/www/info.php"

# The unit, with the packaged binary, and started only once a pool exists.
install -d "$root/lib/systemd/system"
sed -e 's|^ExecStart=/usr/local/bin/drover |ExecStart=/usr/sbin/drover |' \
    -e 's|^After=network.target|After=network.target\nConditionPathExistsGlob=/etc/drover/pools.d/*.toml|' \
    -e '/^#   install/d; /^#   (in \/etc/d; /^#   systemctl daemon-reload/d' \
    systemd/drover.service >"$root/lib/systemd/system/drover.service"
grep -q '^ExecStart=/usr/sbin/drover ' "$root/lib/systemd/system/drover.service" ||
    die "systemd/drover.service: the ExecStart line was not found"
chmod 0644 "$root/lib/systemd/system/drover.service"
install -D -m 0644 systemd/drover.socket "$root/usr/share/doc/drover/examples/drover.socket"
install -D -m 0644 packaging/debian/tmpfiles.conf "$root/usr/lib/tmpfiles.d/drover.conf"
install -D -m 0644 packaging/debian/drover.logrotate "$root/etc/logrotate.d/drover"
install -d -m 0755 "$root/var/log/drover"

scripts/man.sh "$stage/man" >/dev/null
install -D -m 0644 "$stage/man/drover.8" "$root/usr/share/man/man8/drover.8"
install -D -m 0644 "$stage/man/drover.toml.5" "$root/usr/share/man/man5/drover.toml.5"
gzip -9n "$root/usr/share/man/man8/drover.8" "$root/usr/share/man/man5/drover.toml.5"
# Shell completions, from the command line's own definition (drover completions SHELL).
admin="$root/usr/lib/drover/drover-admin"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
    "$root/usr/share/fish/vendor_completions.d"
"$admin" completions bash >"$root/usr/share/bash-completion/completions/drover"
"$admin" completions zsh >"$root/usr/share/zsh/vendor-completions/_drover"
"$admin" completions fish >"$root/usr/share/fish/vendor_completions.d/drover.fish"
chmod 0644 "$root/usr/share/bash-completion/completions/drover" \
    "$root/usr/share/zsh/vendor-completions/_drover" "$root/usr/share/fish/vendor_completions.d/drover.fish"
docs drover
install -m 0644 README.md "$root/usr/share/doc/drover/README.md"
gzip -9n "$root/usr/share/doc/drover/README.md"

control drover "$(shlib_depends drover "$root/usr/lib/drover/drover" "$root/usr/lib/drover/drover-admin"), init-system-helpers (>= 1.54~)" \
    "process manager for FastCGI, WSGI and ASGI applications" \
    "drover does php-fpm's job for PHP and gunicorn's for Python apps: it keeps" \
    "a set of workers per pool, all accepting on one socket that nginx talks to," \
    "with php-fpm's process managers, slowlogs with stacks, status and metrics," \
    "a control socket and reloads that drop no request." \
    "" \
    "This package has the master and its command line (drover -t, drover ctl," \
    "drover import). PHP pools need drover-php (or php-cgi), Python pools" \
    "drover-python."
(cd "$root" && find etc -type f -printf '/%p\n' | sort) >"$root/DEBIAN/conffiles"
for script in postinst prerm postrm; do
    install -m 0755 "packaging/debian/drover.$script" "$root/DEBIAN/$script"
done

# --- drover-php, drover-python -----------------------------------------------------------
install_bin "$bins/drover-php" "$stage/drover-php/usr/lib/drover/drover-php"
php_lib=$(readelf -d "$stage/drover-php/usr/lib/drover/drover-php" |
    sed -n 's/.*(NEEDED).*\[\(libphp[^]]*\)\]/\1/p')
[[ -n $php_lib ]] || die "drover-php does not link libphp: install libphp8.2-embed and php8.2-dev, then build again"
# libphp8.2-embed ships no shlibs file (its soname is plain libphp.so): the package that
# holds the library drover-php links is named by hand.
php_file=$(readlink -f "/usr/lib/$php_lib")
php_pkg=$(dpkg -S "$php_file" | cut -d: -f1)
# The direct-call copy of libphp (docs/php.md, "PHP's calls bound directly"): made by the
# postinst, made again by the file trigger when a package installs a new libphp, removed by
# the postrm.
mkdir -p "$stage/drover-php/DEBIAN"
for script in postinst postrm; do
    install -m 0755 "packaging/debian/drover-php.$script" "$stage/drover-php/DEBIAN/$script"
done
sed "s|@LIBPHP@|$php_file|" packaging/debian/drover-php.triggers >"$stage/drover-php/DEBIAN/triggers"
chmod 0644 "$stage/drover-php/DEBIAN/triggers"
docs drover-php
control drover-php \
    "drover (= $version), $php_pkg, $(shlib_depends drover-php "$stage/drover-php/usr/lib/drover/drover-php")" \
    "drover's PHP runtime (embedded PHP SAPI)" \
    "drover-php runs a PHP pool as one zygote that starts PHP once and forks the" \
    "workers, so every pool has one OPcache, in every process manager mode."

install_bin "$python_bin" "$stage/drover-python/usr/lib/drover/drover-python"
docs drover-python
control drover-python \
    "drover (= $version), $(shlib_depends drover-python "$stage/drover-python/usr/lib/drover/drover-python")" \
    "drover's Python runtime (WSGI and ASGI)" \
    "drover-python embeds CPython: a zygote per pool imports the app once and forks" \
    "the workers, which serve WSGI or ASGI apps over FastCGI or HTTP/1.1."

rm -f "$out"/drover_*.deb "$out"/drover-php_*.deb "$out"/drover-python_*.deb
for pkg in drover drover-php drover-python; do
    dpkg-deb --root-owner-group -Zxz --build "$stage/$pkg" "$out/${pkg}_${version}_$arch.deb" >/dev/null
    echo "wrote $out/${pkg}_${version}_$arch.deb ($(du -k "$out/${pkg}_${version}_$arch.deb" | cut -f1) KiB)"
    dpkg-deb --field "$out/${pkg}_${version}_$arch.deb" Depends | sed 's/^/    Depends: /'
done
