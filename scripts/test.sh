#!/usr/bin/env bash
# Every test: type-check, a real Docker Engine and its test image, a real Kubernetes, a real PostgreSQL, then ava.
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
# A real single-node Kubernetes (built once from Go modules, then cached; up in about 30 s).
BOT_AGENT_KUBECONFIG=$(bash scripts/kube/up.sh | tail -n 1)
export BOT_AGENT_KUBECONFIG
# Debian's PostgreSQL, a cluster of its own (after the cluster: it also listens on the pods' bridge).
BOT_AGENT_DATABASE_URL=$(bash scripts/postgres.sh | tail -n 1)
export BOT_AGENT_DATABASE_URL
npx ava "$@"
