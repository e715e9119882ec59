#!/usr/bin/env bash
# Every test: type-check, a real Docker Engine and its test image, a real Kubernetes with kwok's simulated node
# beside it, a real PostgreSQL, a real image registry, then ava.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh

[ -d node_modules ] || npm ci --no-audit --no-fund
npx tsc --noEmit
npx tsc -p console
# The console's page and assets, which the agent under test serves (dist/console), and a browser to open them.
npm run --silent build:console
BOT_AGENT_CHROMIUM=$(bash scripts/chromium.sh | tail -n 1)
export BOT_AGENT_CHROMIUM
bash scripts/docker-engine.sh --test-image >/dev/null
# Networks an earlier run left (one interrupted, or a bench's): the engine has about 30 address pools, and a test
# file that cannot make its network fails. Only those no container uses go; nothing of this run exists yet.
docker network ls -q --filter name=bot-agent-test- --filter name=bot-agent-bench- | xargs -r docker network rm >/dev/null 2>&1 || true
# A real single-node Kubernetes (built once from Go modules, then cached; up in about 30 s).
BOT_AGENT_KUBECONFIG=$(bash scripts/kube/up.sh | tail -n 1)
export BOT_AGENT_KUBECONFIG
# kwok's simulated node beside it, for the agent at scale (built once from Go modules, about 1 to 4 minutes, then cached).
BOT_AGENT_KWOK_NODE=$(bash scripts/kube/kwok.sh | tail -n 1)
export BOT_AGENT_KWOK_NODE
# Debian's PostgreSQL, a cluster of its own (after the cluster: it also listens on the pods' bridge).
BOT_AGENT_DATABASE_URL=$(bash scripts/postgres.sh | tail -n 1)
export BOT_AGENT_DATABASE_URL
# A real image registry on loopback, with htpasswd logins (built once from Go modules, about 1 to 2 minutes, then cached).
BOT_AGENT_REGISTRY=$(bash scripts/registry.sh | tail -n 1)
export BOT_AGENT_REGISTRY
# A real S3-compatible server on loopback, for backups' stores (versitygw, built once from Go modules, about 2 to 6 minutes, then cached).
BOT_AGENT_S3=$(bash scripts/s3.sh | tail -n 1)
export BOT_AGENT_S3
# A real log database on loopback, for the log history's shipping (VictoriaLogs, built once from Go modules, about 1 to 5 minutes, then cached).
BOT_AGENT_VICTORIALOGS=$(bash scripts/victorialogs.sh | tail -n 1)
export BOT_AGENT_VICTORIALOGS
# Prometheus' own checker of /metrics (built once from Go modules, about 8 minutes cold, then cached).
BOT_AGENT_PROMTOOL=$(bash scripts/promtool.sh | tail -n 1)
export BOT_AGENT_PROMTOOL
# A bound on the whole suite (about 20 minutes; CI allows 90 with the cold build): a run that hangs ends here,
# with ava's own list of what was still pending, rather than by CI's limit with nothing said.
timeout --signal=INT --kill-after=60s "${BOT_AGENT_TEST_TIMEOUT:-60m}" npx ava "$@"
