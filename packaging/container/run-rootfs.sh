#!/bin/sh
# packaging/container/run-rootfs.sh ROOTFS [ARG...]: runs an image's root filesystem the way a
# container runtime would, for a machine where podman cannot run containers (crun refuses
# hybrid cgroups) but can build them (buildah --isolation chroot):
#
#   RUN_ROOTFS_CWD=/srv/app unshare --pid --fork --mount --net packaging/container/run-rootfs.sh \
#       "$(podman image mount drover-python)" $(podman image inspect --format '{{join .Config.Cmd " "}}' drover-python)
#
# In the new namespaces: the root read-only, tmpfs on /run and /tmp, /run/drover owned by
# the image's user, loopback up; then drover execs as PID 1, as uid 10001, in
# RUN_ROOTFS_CWD (give the image's WORKDIR: /srv/app or /srv/www; default /), with the ARGs
# (the image's CMD; without any, `-c /etc/drover/container.toml`).
set -eu
src=$1
shift
[ $# -gt 0 ] || set -- -c /etc/drover/container.toml
cwd=${RUN_ROOTFS_CWD:-/}
r=${RUN_ROOTFS_AT:-/tmp/drover-rootfs}
mkdir -p "$r"
mount --bind "$src" "$r"
mount -o remount,bind,ro "$r"
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount -t tmpfs -o mode=755 tmpfs "$r/run"
mkdir "$r/run/drover"
chown 10001:65534 "$r/run/drover"
mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
ip link set lo up
exec chroot --userspec=10001:65534 "$r" /usr/bin/env -C "$cwd" /usr/sbin/drover "$@"
