#!/usr/bin/env bash
# Every test: type-check, a real Docker Engine and its test image, then ava.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh

[ -d node_modules ] || npm ci --no-audit --no-fund
npx tsc --noEmit
bash scripts/docker-engine.sh --test-image >/dev/null
npx ava "$@"
