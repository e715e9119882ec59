#!/usr/bin/env bash
# Prometheus' own checker, `promtool`, for `promtool check metrics` in the tests: built from Go modules once per
# version into a cache (cold: about 8 minutes on 2 cores, most of it fetching Prometheus' modules; warm: nothing).
# Its last line of output is the binary's path.
# Usage: bash scripts/promtool.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PROMETHEUS_VERSION=0.316.0
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}/promtool-v$PROMETHEUS_VERSION

fail() { echo "promtool.sh: $*" >&2; exit 1; }

if [ ! -x "$CACHE/promtool" ]; then
  command -v go >/dev/null 2>&1 || fail "needs Go (1.24 or newer) on PATH"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  mkdir -p "$(dirname "$CACHE")"
  work=$(mktemp -d "$(dirname "$CACHE")/.promtool-build-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  started=$(date +%s)
  echo "promtool.sh: building promtool v$PROMETHEUS_VERSION into $CACHE" >&2
  GOBIN="$work/out" go install -trimpath -ldflags="-s -w" "github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS_VERSION" >&2 \
    || fail "go install of github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS_VERSION failed"
  mv -T "$work/out" "$CACHE" 2>/dev/null || [ -x "$CACHE/promtool" ]
  echo "promtool.sh: built in $(( $(date +%s) - started )) s" >&2
fi
"$CACHE/promtool" --version >/dev/null || fail "$CACHE/promtool does not run"
echo "$CACHE/promtool"
