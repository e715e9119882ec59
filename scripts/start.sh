#!/usr/bin/env bash
# Runs the agent: installs and builds when needed, and against the default
# local Docker socket starts the engine when it does not answer.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/node-env.sh

[ -d node_modules ] || npm ci --no-audit --no-fund
if [ ! -f dist/main.js ] || [ -n "$(find src package.json tsconfig.json tsconfig.build.json -newer dist/main.js -print -quit)" ]; then
  npm run --silent build
fi
if [ "${AGENT_RUNTIME:-docker}" = docker ] && [ "${DOCKER_HOST:-unix:///var/run/docker.sock}" = unix:///var/run/docker.sock ]; then
  bash scripts/docker-engine.sh >/dev/null
fi
# V8 and malloc tuned for memory, as in the image (see the Dockerfile).
export MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2}
exec node --max-semi-space-size=2 --heap-growing-percent=30 --no-allocation-site-pretenuring --expose-gc dist/main.js
