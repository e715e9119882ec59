# Sourced first by each script of scripts/kube/ that changes the machine: its messages named after it, and root only.
script_name="kube/$(basename "$0")"
log() { echo "$script_name: $*" >&2; }
fail() { log "$*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root"
