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

source scripts/go-install.sh
go_install_cached promtool.sh "$CACHE" promtool "github.com/prometheus/prometheus/cmd/promtool@v$PROMETHEUS_VERSION" || exit 1

"$CACHE/promtool" --version >/dev/null || fail "$CACHE/promtool does not run"
echo "$CACHE/promtool"
