#!/usr/bin/env bash
# A real image registry on loopback for tests and benches, idempotently: the Distribution project's
# `registry`, built from Go modules once per version into a cache (cold: about 2 minutes on 2 cores;
# warm: nothing), with htpasswd logins (bcrypt entries, made by a helper built in the same module).
# The Docker engine pulls from and pushes to 127.0.0.1:PORT over plain HTTP (loopback registries are
# insecure-allowed by default).
# Its last line of output is the registry's address, host:port.
# Usage: bash scripts/registry.sh          Stop: bash scripts/registry.sh --stop
# Logins: $BOT_AGENT_REGISTRY_USER / $BOT_AGENT_REGISTRY_PASSWORD (defaults below).
set -euo pipefail
cd "$(dirname "$0")/.."

REGISTRY_VERSION=3.1.2
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}/registry-v$REGISTRY_VERSION
DATA=${BOT_AGENT_REGISTRY_DATA:-/var/lib/bot-agent-registry}
PORT=${BOT_AGENT_REGISTRY_PORT:-25500}
USER_NAME=${BOT_AGENT_REGISTRY_USER:-botagent}
PASSWORD=${BOT_AGENT_REGISTRY_PASSWORD:-registry-local-only}

fail() { echo "registry.sh: $*" >&2; exit 1; }

if [ "${1:-}" = --stop ]; then
  source scripts/stop-pid.sh
  stop_pid_file "$DATA/pid"
  exit 0
fi

if [ ! -x "$CACHE/registry" ] || [ ! -x "$CACHE/htpasswd" ]; then
  command -v go >/dev/null 2>&1 || fail "needs Go (1.24 or newer) on PATH"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  mkdir -p "$(dirname "$CACHE")"
  work=$(mktemp -d "$(dirname "$CACHE")/.registry-build-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  started=$(date +%s)
  echo "registry.sh: building registry v$REGISTRY_VERSION into $CACHE" >&2
  mkdir -p "$work/mod/htpasswd"
  printf 'module bot-agent.local/registry\n\ngo 1.24.0\n\nrequire github.com/distribution/distribution/v3 v%s\n' "$REGISTRY_VERSION" >"$work/mod/go.mod"
  cat >"$work/mod/htpasswd/main.go" <<'EOF'
// One htpasswd line (user:bcrypt) for the user and password given as arguments.
package main

import (
	"fmt"
	"os"

	"golang.org/x/crypto/bcrypt"
)

func main() {
	hash, err := bcrypt.GenerateFromPassword([]byte(os.Args[2]), bcrypt.DefaultCost)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s:%s\n", os.Args[1], hash)
}
EOF
  (
    cd "$work/mod"
    go get "github.com/distribution/distribution/v3@v$REGISTRY_VERSION" golang.org/x/crypto/bcrypt >/dev/null 2>&1 || true
    go build -trimpath -ldflags="-s -w" -o "$work/out/" github.com/distribution/distribution/v3/cmd/registry ./htpasswd
  )
  mv -T "$work/out" "$CACHE" 2>/dev/null || [ -x "$CACHE/registry" ]
  echo "registry.sh: built in $(( $(date +%s) - started )) s" >&2
fi

answers() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/v2/" 2>/dev/null | grep -q 401; }
if [ -f "$DATA/pid" ] && kill -0 "$(cat "$DATA/pid")" 2>/dev/null && answers; then
  echo "127.0.0.1:$PORT"
  exit 0
fi

mkdir -p "$DATA/storage"
"$CACHE/htpasswd" "$USER_NAME" "$PASSWORD" >"$DATA/htpasswd"
cat >"$DATA/config.yml" <<EOF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $DATA/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$PORT
auth:
  htpasswd:
    realm: bot-agent-test
    path: $DATA/htpasswd
EOF
# Detached from this shell's session, so that it outlives the caller (as dockerd does).
setsid "$CACHE/registry" serve "$DATA/config.yml" >"$DATA/registry.log" 2>&1 < /dev/null &
echo $! >"$DATA/pid"
for _ in $(seq 1 100); do
  answers && { echo "127.0.0.1:$PORT"; exit 0; }
  kill -0 "$(cat "$DATA/pid")" 2>/dev/null || break
  sleep 0.1
done
tail -n 20 "$DATA/registry.log" >&2
fail "the registry did not answer on 127.0.0.1:$PORT"
