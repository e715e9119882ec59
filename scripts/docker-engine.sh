#!/usr/bin/env bash
# Makes a real Docker Engine available on this machine, idempotently:
#   - installs Debian's docker.io (dockerd, containerd, runc) when dockerd is missing
#   - starts dockerd in the background when the socket does not answer
#   - with --test-image, imports the local image the tests run bots from
#     (busybox userland; no registry is needed)
# Usage: bash scripts/docker-engine.sh [--test-image]   (run as root)
# Stop the engine again with: kill "$(cat /var/run/docker.pid)"
set -euo pipefail

TEST_IMAGE=bot-agent-testbot:latest
SOCK=/var/run/docker.sock
LOG=${DOCKERD_LOG:-/tmp/bot-agent-dockerd.log}
want_image=false
[ "${1:-}" = --test-image ] && want_image=true
export DEBIAN_FRONTEND=noninteractive

fail() { echo "docker-engine: $*" >&2; exit 1; }

need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
$want_image && [ ! -x /bin/busybox ] && need_pkgs+=(busybox-static)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "needs ${need_pkgs[*]}; run as root, or install them first"
  echo "docker-engine: installing ${need_pkgs[*]} from Debian's packages" >&2
  apt-get update -qq >/dev/null || fail "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null || fail "could not install ${need_pkgs[*]}"
fi

# Debian's docker CLI lives in /usr/bin; prefer it over any other client on PATH.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker) || fail "no docker CLI found"
engine_answers() { "$DOCKER" -H "unix://$SOCK" version >/dev/null 2>&1; }

# The host keeps a neighbour (ARP) entry for each container that talks to it; past gc_thresh3 (Linux: 1,024 in
# all) it drops new ones, and a bot's connection to the agent goes unanswered ("neighbor table overflow" in
# the kernel's log). A host of 1,000 bots needs more (docs/docker.md): raised, never lowered, where root may.
raise_sysctl() {
  local now
  now=$(sysctl -n "$1" 2>/dev/null) || return 0
  [ "$now" -ge "$2" ] || sysctl -qw "$1=$2" >/dev/null 2>&1 || echo "docker-engine: could not raise $1 to $2 (now $now)" >&2
}
if [ "$(id -u)" = 0 ]; then
  for family in ipv4 ipv6; do
    raise_sysctl "net.$family.neigh.default.gc_thresh1" 4096
    raise_sysctl "net.$family.neigh.default.gc_thresh2" 8192
    raise_sysctl "net.$family.neigh.default.gc_thresh3" 16384
  done
fi

if ! engine_answers; then
  # A stale pid file from a killed daemon blocks a new start.
  if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
    rm -f /var/run/docker.pid
  fi
  echo "docker-engine: starting dockerd (log: $LOG)" >&2
  # Its own session: a shell (or test run) that is killed later does not take the engine with it.
  setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    engine_answers && break
    sleep 0.5
  done
  engine_answers || { tail -20 "$LOG" >&2; fail "dockerd did not start; see $LOG"; }
fi

if $want_image && ! "$DOCKER" -H "unix://$SOCK" image inspect "$TEST_IMAGE" >/dev/null 2>&1; then
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root/bin" "$root/tmp" "$root/etc" "$root/lib/x86_64-linux-gnu" "$root/lib64"
  cp /bin/busybox "$root/bin/busybox"
  # Static busybox still resolves host names through glibc's NSS modules,
  # loaded at run time: ship the host's so that names resolve in containers.
  for lib in libc.so.6 libnss_files.so.2 libnss_dns.so.2 libresolv.so.2; do
    cp -L "/lib/x86_64-linux-gnu/$lib" "$root/lib/x86_64-linux-gnu/"
  done
  cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$root/bin/$applet"
  done
  echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
  tar -C "$root" -c . | "$DOCKER" -H "unix://$SOCK" import -c 'CMD ["/bin/sh"]' - "$TEST_IMAGE" >/dev/null
  echo "docker-engine: imported $TEST_IMAGE (busybox)" >&2
fi

echo "$SOCK"
