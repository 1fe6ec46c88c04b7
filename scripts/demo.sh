#!/usr/bin/env bash
# scripts/demo.sh: run drover with the example pools behind nginx, on a fresh Debian machine:
# the PHP pool (pools.d/www.toml) at / and the Python WSGI pool (pools.d/app.toml) at /app/.
#
#   1. installs nginx, curl, a C toolchain, python3-dev and PHP's embed library and headers
#      (DEMO_PACKAGES in scripts/common.sh: what the build and the two pools need, none of
#      the tests' apps and peers) with apt-get when they are missing (through sudo when not
#      root), and builds drover, drover-python and drover-php (cargo build --workspace
#      --release);
#   2. sets up /tmp/drover-demo (drover.toml, the PHP docroot, a copy of the Python app in
#      examples/app, nginx.conf, logs);
#   3. checks the configuration (drover -t), starts drover, waits for its `ready:` line,
#      starts nginx on 127.0.0.1:8080 (or the next free port up to 8090) and asks it for the
#      PHP page and the Python page;
#   4. prints both URLs and the `drover ctl` command that reaches this drover (its drover.toml
#      has a [control] socket), and follows drover's log until Ctrl-C, then stops nginx and drover
#      (SIGTERM: drover stops gracefully) and waits for both.
#
# The runtime folder lives in /tmp, not in the repository: the repository may sit in a 0700
# home folder that the www-data workers could not enter. The Python pool's
# python_path = ["examples/app"] is relative to drover.toml's folder, so it finds the copy in
# /tmp/drover-demo/examples/app.
#
# Run as root, the example pools are used as they are (workers and nginx run as www-data).
# Run as another user, the demo writes copies of the pools without user/group/listen_owner/
# listen_group (a non-root drover cannot switch users or chown the socket).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
# shellcheck source=scripts/common.sh
source "$repo/scripts/common.sh"

demo=/tmp/drover-demo
ready_timeout=30 # seconds to wait for drover's `ready:` line
answer_timeout=15 # seconds to wait for the first answered request

drover_pid=
nginx_pid=
tail_pid=
drover_status=1 # set by stop(): drover's exit status

main() {
    check_runtime_dir
    ensure_packages "${DEMO_PACKAGES[@]}"
    require_cargo
    echo "==> building drover, drover-python and drover-php (cargo build --workspace --release)"
    (cd "$repo" && cargo build --workspace --release)
    drover=$(target_dir)/release/drover
    [[ -x $drover ]] || die "cargo build succeeded but $drover is missing"

    [[ -f /etc/nginx/fastcgi.conf ]] || die "/etc/nginx/fastcgi.conf not found (Debian's nginx ships it)"
    prepare_runtime_dir
    write_drover_config
    port=$(free_port 8080 8090) || die "no free port in 127.0.0.1:8080..8090"
    write_nginx_config "$port"

    echo "==> checking the configuration (drover -t)"
    if ! "$drover" -t -c "$demo/drover.toml" >"$demo/drover-t.txt" 2>&1; then
        cat "$demo/drover-t.txt" >&2
        die "drover -t rejected $demo/drover.toml"
    fi

    # From here on, whatever happens, stop what we started. Ctrl-C is the normal way out:
    # the exit status is then drover's own (0 after a graceful stop).
    trap 'stop; exit "$drover_status"' INT TERM
    trap 'rc=$?; stop; exit "$rc"' EXIT

    # setsid: drover and nginx get their own session, so Ctrl-C reaches only this script,
    # which stops them with SIGTERM (drover's graceful stop), not the terminal's SIGINT.
    echo "==> starting drover"
    : >"$demo/drover.log" # exists before the first grep below
    (cd "$demo" && exec setsid "$drover" -c "$demo/drover.toml") >"$demo/drover.log" 2>&1 &
    drover_pid=$!
    wait_for_ready

    echo "==> starting nginx on 127.0.0.1:$port"
    setsid nginx -p "$demo/nginx/" -c "$demo/nginx/nginx.conf" -e "$demo/nginx/error.log" &
    nginx_pid=$!
    wait_for_answer "http://127.0.0.1:$port/" "Hello from drover"
    wait_for_answer "http://127.0.0.1:$port/app/" "Hello from drover (Python WSGI)"

    echo
    echo "drover is serving:"
    echo "    PHP     http://127.0.0.1:$port/          (pools.d/www.toml)"
    echo "    Python  http://127.0.0.1:$port/app/      (pools.d/app.toml, examples/app/hello.py)"
    echo "            try also /app/stream, /app/error, and: curl --data-binary @FILE http://127.0.0.1:$port/app/echo"
    echo
    echo "drover ctl reaches it through its control socket ($demo/run/ctl.sock):"
    echo "    $drover ctl -c $demo/drover.toml status"
    echo "    $drover ctl -c $demo/drover.toml status www --full"
    echo "(drover's log follows; it is also in $demo/drover.log. Ctrl-C stops the demo.)"
    echo
    tail -n +1 -f "$demo/drover.log" &
    tail_pid=$!

    # Returns early only when Ctrl-C runs the trap above; otherwise one of them died.
    wait -n "$drover_pid" "$nginx_pid" || true
    die "drover or nginx exited on its own; see $demo/drover.log and $demo/nginx/error.log"
}

# The cargo target folder, honouring CARGO_TARGET_DIR.
target_dir() {
    local dir=${CARGO_TARGET_DIR:-target}
    [[ $dir == /* ]] || dir=$repo/$dir
    echo "$dir"
}

# Refuse to start over a runtime folder that is not ours, or in use.
check_runtime_dir() {
    # A fixed name in /tmp: refuse anything we did not make ourselves.
    if [[ -L $demo ]] || { [[ -e $demo ]] && [[ ! -O $demo ]]; }; then
        die "$demo exists and is not ours; remove it first"
    fi
    if [[ -f $demo/demo.pid ]] && kill -0 "$(cat "$demo/demo.pid")" 2>/dev/null; then
        die "a demo is already running (pid $(cat "$demo/demo.pid")); stop it with Ctrl-C first"
    fi
}

prepare_runtime_dir() {
    check_runtime_dir
    rm -rf "$demo"
    # 0755 all the way down: the www-data workers and nginx must reach the docroot and socket.
    mkdir -m 0755 "$demo" "$demo/run" "$demo/nginx" "$demo/examples"
    echo $$ >"$demo/demo.pid"
    cp -R "$repo/examples/www" "$demo/www"
    # The Python pool imports hello.py from here (python_path = ["examples/app"]).
    cp -R "$repo/examples/app" "$demo/examples/app"
    rm -rf "$demo/examples/app/__pycache__"
    chmod -R u=rwX,go=rX "$demo/www" "$demo/examples"
}

write_drover_config() {
    local include pool
    for pool in www app; do
        [[ -f $repo/pools.d/$pool.toml ]] || die "$repo/pools.d/$pool.toml is missing"
    done
    if ((EUID == 0)); then
        include="$repo/pools.d/*.toml"
    else
        # Not root: the same pools, minus what only root can do.
        mkdir -m 0755 "$demo/pools.d"
        for pool in "$repo"/pools.d/*.toml; do
            sed -E '/^[[:space:]]*(user|group|listen_owner|listen_group)[[:space:]]*=/d' \
                "$pool" >"$demo/pools.d/$(basename "$pool")"
        done
        include="$demo/pools.d/*.toml"
    fi
    # The pools' relative paths resolve against this file's folder: `listen = "run/www.sock"`
    # is /tmp/drover-demo/run/www.sock, python_path = ["examples/app"] is
    # /tmp/drover-demo/examples/app.
    cat >"$demo/drover.toml" <<TOML
# Written by scripts/demo.sh. The full example is $repo/drover.toml.
error_log = "stderr"
include = ["$include"]

# drover ctl's way in: status, config, reload, workers (see docs/ctl.md).
[control]
listen = "$demo/run/ctl.sock"
TOML
}

# free_port FIRST LAST: print the first port nobody listens on at 127.0.0.1.
free_port() {
    local port
    for ((port = $1; port <= $2; port++)); do
        # A refused connection means the port is free.
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    return 1
}

write_nginx_config() {
    local port=$1 user_line=""
    # nginx started as root runs its workers as this user; the pool's socket is
    # www-data:www-data 0660, so they can connect.
    ((EUID == 0)) && user_line="user www-data;"
    cat >"$demo/nginx/nginx.conf" <<NGINX
# Written by scripts/demo.sh.
$user_line
daemon off;
worker_processes 1;
pid $demo/nginx/nginx.pid;
error_log $demo/nginx/error.log;

events {
    worker_connections 256;
}

http {
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log $demo/nginx/access.log;
    client_body_temp_path $demo/nginx/client_body;
    proxy_temp_path $demo/nginx/proxy;
    fastcgi_temp_path $demo/nginx/fastcgi;
    uwsgi_temp_path $demo/nginx/uwsgi;
    scgi_temp_path $demo/nginx/scgi;

    server {
        listen 127.0.0.1:$port;
        root $demo/www;
        index index.php;

        location ~ \.php\$ {
            try_files \$uri =404;
            include /etc/nginx/fastcgi.conf;
            fastcgi_pass unix:$demo/run/www.sock;
        }

        # The Python pool, mount = "/app": drover splits the path into SCRIPT_NAME = /app
        # and PATH_INFO = the rest. ^~ keeps /app/x.php away from the PHP location above.
        # A request for /app gets nginx's redirect to /app/.
        location ^~ /app/ {
            client_max_body_size 64m; # nginx's default is 1m: try /app/echo with a big file
            include /etc/nginx/fastcgi.conf;
            fastcgi_pass unix:$demo/run/app.sock;
        }
    }
}
NGINX
}

# Wait (bounded) for drover's `ready:` line: every pool's workers are up.
wait_for_ready() {
    local deadline=$((SECONDS + ready_timeout))
    until grep -q 'ready:' "$demo/drover.log"; do
        if ! kill -0 "$drover_pid" 2>/dev/null; then
            cat "$demo/drover.log" >&2
            die "drover exited before it was ready (log above)"
        fi
        if ((SECONDS >= deadline)); then
            cat "$demo/drover.log" >&2
            die "drover did not log 'ready:' within ${ready_timeout}s (log above)"
        fi
        sleep 0.1
    done
}

# wait_for_answer URL TEXT: wait (bounded) until nginx answers URL with a page that contains
# TEXT; print the answer.
wait_for_answer() {
    local url=$1 text=$2 body deadline=$((SECONDS + answer_timeout))
    until body=$(curl -fsS --max-time 5 "$url" 2>"$demo/curl.err"); do
        if ! kill -0 "$nginx_pid" 2>/dev/null; then
            cat "$demo/nginx/error.log" >&2 || true
            die "nginx exited (its error log is above)"
        fi
        if ((SECONDS >= deadline)); then
            cat "$demo/curl.err" "$demo/nginx/error.log" >&2 || true
            echo "--- the end of drover's log:" >&2
            tail -n 30 "$demo/drover.log" >&2 || true
            die "no answer from $url within ${answer_timeout}s"
        fi
        sleep 0.2
    done
    [[ $body == *"$text"* ]] || {
        echo "$body" >&2
        die "$url answered, but not with the demo page"
    }
    echo "==> GET $url"
    local line
    while IFS= read -r line; do echo "    $line"; done <<<"$body"
}

# Stop nginx, then drover (SIGTERM = graceful stop), by PID, and wait for both; sets
# drover_status. A second Ctrl-C while stopping sends SIGINT: drover's fast stop.
# shellcheck disable=SC2317  # reached through the traps set in main
stop() {
    trap - INT TERM EXIT
    trap 'kill -INT $drover_pid $nginx_pid 2>/dev/null || true' INT
    if [[ -n $nginx_pid ]] && kill -TERM "$nginx_pid" 2>/dev/null; then
        echo
        echo "==> stopping nginx (pid $nginx_pid)"
        reap "$nginx_pid" || true
    fi
    if [[ -n $drover_pid ]] && kill -TERM "$drover_pid" 2>/dev/null; then
        echo "==> stopping drover (pid $drover_pid)"
        drover_status=0
        reap "$drover_pid" || drover_status=$?
        echo "==> drover exited with status $drover_status"
    fi
    if [[ -n $tail_pid ]]; then
        kill -TERM "$tail_pid" 2>/dev/null || true
        reap "$tail_pid" || true
    fi
    rm -f "$demo/demo.pid"
}

# reap PID: wait until our child PID has exited (a trapped signal can interrupt `wait`);
# return its exit status.
# shellcheck disable=SC2317  # reached through stop()
reap() {
    local rc
    while :; do
        rc=0
        wait "$1" 2>/dev/null || rc=$?
        kill -0 "$1" 2>/dev/null || return "$rc"
    done
}

main "$@"
