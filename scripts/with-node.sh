#!/usr/bin/env bash
# Runs a command on the project's Node, for npm scripts: bash scripts/with-node.sh CMD ARGS...
set -euo pipefail
source "$(dirname "$0")/node-env.sh"
exec "$@"
