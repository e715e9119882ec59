#!/usr/bin/env bash
# A real log database on loopback for tests and benches, idempotently: VictoriaLogs (Apache-2.0), built from Go
# modules once per version into a cache (cold: about 2 to 5 minutes on 2 cores, 22 MB; warm: nothing), keeping
# its data in a local folder for a day.
# Its last line of output is the server's URL, http://127.0.0.1:PORT.
# Usage: bash scripts/victorialogs.sh          Stop: bash scripts/victorialogs.sh --stop
set -euo pipefail
cd "$(dirname "$0")/.."

VICTORIALOGS_VERSION=1.52.2
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}/victorialogs-v$VICTORIALOGS_VERSION
DATA=${BOT_AGENT_VICTORIALOGS_DATA:-/var/lib/bot-agent-victorialogs}
PORT=${BOT_AGENT_VICTORIALOGS_PORT:-25700}

fail() { echo "victorialogs.sh: $*" >&2; exit 1; }

if [ "${1:-}" = --stop ]; then
  source scripts/stop-pid.sh
  stop_pid_file "$DATA/pid"
  exit 0
fi

source scripts/go-install.sh
go_install_cached victorialogs.sh "$CACHE" victoria-logs "github.com/VictoriaMetrics/VictoriaLogs/app/victoria-logs@v$VICTORIALOGS_VERSION" || exit 1

answers() { curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" 2>/dev/null; }
if [ -f "$DATA/pid" ] && kill -0 "$(cat "$DATA/pid")" 2>/dev/null && answers; then
  echo "http://127.0.0.1:$PORT"
  exit 0
fi

mkdir -p "$DATA/storage"
# Detached from this shell's session, so that it outlives the caller (as dockerd does).
setsid "$CACHE/victoria-logs" -httpListenAddr="127.0.0.1:$PORT" -storageDataPath="$DATA/storage" -retentionPeriod=1d \
  >"$DATA/victoria-logs.log" 2>&1 < /dev/null &
echo $! >"$DATA/pid"
for _ in $(seq 1 100); do
  answers && { echo "http://127.0.0.1:$PORT"; exit 0; }
  kill -0 "$(cat "$DATA/pid")" 2>/dev/null || break
  sleep 0.1
done
tail -n 20 "$DATA/victoria-logs.log" >&2
fail "VictoriaLogs did not answer on 127.0.0.1:$PORT"
