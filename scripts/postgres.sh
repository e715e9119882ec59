#!/usr/bin/env bash
# A real PostgreSQL server for several agents' shared history (AGENT_DATABASE_URL), idempotently:
#   - installs Debian's postgresql when its server binaries are missing
#   - makes a cluster of its own in its own folder, run by a user of its own
#     (the server refuses to run as root), on its own port (below the kernel's
#     range of ports for outgoing connections, 32768 to 60999, so that no client's
#     connection can hold it as the server starts)
#   - starts it, and makes the role and database `botagent`
# It listens on loopback and, when the local cluster's bridge is up, on its
# address (10.88.0.1), so that pods reach it; password logins only.
# Its last line of output is the database's URL.
# Usage: bash scripts/postgres.sh   (run as root)   Stop: bash scripts/postgres.sh --stop
set -euo pipefail

DATA=${BOT_AGENT_PG_DATA:-/var/lib/bot-agent-postgres}
PORT=${BOT_AGENT_PG_PORT:-25432}
OWNER=bot-agent-pg
DATABASE=botagent
PASSWORD=botagent-local-only
BRIDGE_ADDRESS=10.88.0.1
LOG=$DATA/server.log
export DEBIAN_FRONTEND=noninteractive

fail() { echo "postgres.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root"

bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/postgres" ]; then
  echo "postgres.sh: installing postgresql from Debian's packages" >&2
  apt-get install -y -qq --no-install-recommends postgresql >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends postgresql >/dev/null; } \
    || fail "could not install postgresql"
  bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
fi
# Debian's package starts a cluster of its own on 5432; this one is apart from it.
as_owner() { runuser -u "$OWNER" -- "$@"; }

id "$OWNER" >/dev/null 2>&1 || useradd --system --no-create-home --home-dir "$DATA" --shell /usr/sbin/nologin "$OWNER"
mkdir -p "$DATA"
chown "$OWNER:" "$DATA"
chmod 0700 "$DATA"

if [ "${1:-}" = --stop ]; then
  [ -f "$DATA/cluster/postmaster.pid" ] && as_owner "$bindir/pg_ctl" -D "$DATA/cluster" -m fast -w stop >/dev/null
  exit 0
fi

if [ ! -f "$DATA/cluster/PG_VERSION" ]; then
  rm -rf "$DATA/cluster"
  printf '%s\n' "$PASSWORD" >"$DATA/.password"
  chown "$OWNER:" "$DATA/.password"
  as_owner "$bindir/initdb" -D "$DATA/cluster" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    --pwfile="$DATA/.password" --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  cat >>"$DATA/cluster/pg_hba.conf" <<EOF
# Pods of the local cluster (scripts/kube/up.sh) reach the server at the bridge's address.
host all all 10.88.0.0/16 scram-sha-256
EOF
fi

listen=127.0.0.1
# Not `ip ... | grep -q`: under pipefail, grep's early exit kills ip with SIGPIPE once many interfaces are listed.
[ -n "$(ip -o -4 addr show to "$BRIDGE_ADDRESS" 2>/dev/null)" ] && listen="127.0.0.1,$BRIDGE_ADDRESS"
running_on=$(cat "$DATA/listen" 2>/dev/null || true)
if as_owner "$bindir/pg_ctl" -D "$DATA/cluster" status >/dev/null 2>&1 && [ "$running_on" != "$listen port $PORT" ]; then
  # Started before the bridge existed, or on another port: again, on both addresses and this port.
  as_owner "$bindir/pg_ctl" -D "$DATA/cluster" -m fast -w stop >/dev/null
fi
if ! as_owner "$bindir/pg_ctl" -D "$DATA/cluster" status >/dev/null 2>&1; then
  rm -f "$DATA/cluster/postmaster.pid"
  # Sockets in the data folder: /run/postgresql belongs to Debian's own cluster.
  as_owner "$bindir/pg_ctl" -D "$DATA/cluster" -l "$LOG" -w -t 60 start \
    -o "-c listen_addresses='$listen' -c port=$PORT -c unix_socket_directories='$DATA' -c max_connections=200 -c fsync=on" \
    >/dev/null || { tail -20 "$LOG" >&2; fail "the server did not start; see $LOG"; }
  printf '%s\n' "$listen port $PORT" >"$DATA/listen"
fi
# The server starts when any one of its addresses is free: a port taken on loopback would leave it unreachable there.
"$bindir/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 10 || { tail -20 "$LOG" >&2; fail "the server does not answer on 127.0.0.1:$PORT; see $LOG"; }

psql_() { as_owner "$bindir/psql" -h "$DATA" -p "$PORT" -U postgres -v ON_ERROR_STOP=1 -qAt "$@"; }
if [ "$(psql_ -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname = '$DATABASE'")" != 1 ]; then
  # CREATEDB: the tests make a database of their own for each store they open.
  psql_ -d postgres -c "CREATE ROLE $DATABASE LOGIN CREATEDB PASSWORD '$PASSWORD'"
fi
if [ "$(psql_ -d postgres -c "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" != 1 ]; then
  psql_ -d postgres -c "CREATE DATABASE $DATABASE OWNER $DATABASE"
fi
echo "postgres://$DATABASE:$PASSWORD@127.0.0.1:$PORT/$DATABASE"
