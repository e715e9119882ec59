#!/usr/bin/env bash
# A real S3-compatible server on loopback for tests and benches, idempotently: versitygw, built from Go modules
# once per version into a cache (cold: about 3 to 6 minutes on 2 cores; warm: nothing), serving a local folder
# (its posix back end) with one root access key.
# Its last line of output is the server's URL, http://127.0.0.1:PORT.
# Usage: bash scripts/s3.sh          Stop: bash scripts/s3.sh --stop
# Keys: $BOT_AGENT_S3_ACCESS_KEY / $BOT_AGENT_S3_SECRET_KEY (defaults below).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSITYGW_VERSION=1.8.0
CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}/versitygw-v$VERSITYGW_VERSION
DATA=${BOT_AGENT_S3_DATA:-/var/lib/bot-agent-s3}
PORT=${BOT_AGENT_S3_PORT:-25600}
ACCESS_KEY=${BOT_AGENT_S3_ACCESS_KEY:-botagent}
SECRET_KEY=${BOT_AGENT_S3_SECRET_KEY:-s3-local-only-secret}

fail() { echo "s3.sh: $*" >&2; exit 1; }

if [ "${1:-}" = --stop ]; then
  source scripts/stop-pid.sh
  stop_pid_file "$DATA/pid"
  exit 0
fi

source scripts/go-install.sh
go_install_cached s3.sh "$CACHE" versitygw "github.com/versity/versitygw/cmd/versitygw@v$VERSITYGW_VERSION" || exit 1

# Any answer over HTTP (an unsigned request is refused with 403): the server is up.
answers() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/" 2>/dev/null | grep -q '^[1-5]'; }
if [ -f "$DATA/pid" ] && kill -0 "$(cat "$DATA/pid")" 2>/dev/null && answers; then
  echo "http://127.0.0.1:$PORT"
  exit 0
fi

mkdir -p "$DATA/buckets"
# Detached from this shell's session, so that it outlives the caller (as dockerd does).
setsid "$CACHE/versitygw" --port "127.0.0.1:$PORT" --access "$ACCESS_KEY" --secret "$SECRET_KEY" posix "$DATA/buckets" >"$DATA/versitygw.log" 2>&1 < /dev/null &
echo $! >"$DATA/pid"
for _ in $(seq 1 100); do
  answers && { echo "http://127.0.0.1:$PORT"; exit 0; }
  kill -0 "$(cat "$DATA/pid")" 2>/dev/null || break
  sleep 0.1
done
tail -n 20 "$DATA/versitygw.log" >&2
fail "versitygw did not answer on 127.0.0.1:$PORT"
