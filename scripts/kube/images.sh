#!/usr/bin/env bash
# Puts images into the local cluster's containerd (namespace k8s.io), from the
# local Docker engine: no registry is ever asked. With no arguments, the
# sandbox image: Kubernetes' own pause.c (from its Go module), compiled statically.
# Usage: bash scripts/kube/images.sh [DOCKER_IMAGE...]
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/kube/versions.sh
SOCK=/run/bot-agent-kube/containerd.sock
PAUSE=registry.k8s.io/pause:3.10
DOCKER=/usr/bin/docker

# Two imports of one image at once (test files in parallel): the one that finds it there has not failed.
import() {
  local err
  if ! err=$("$DOCKER" save "$@" | ctr --address "$SOCK" -n k8s.io images import --all-platforms - 2>&1 >/dev/null); then
    [[ "$err" == *"already exists"* ]] || { echo "$err" >&2; return 1; }
  fi
}

if [ $# -eq 0 ]; then
  if [[ "$(ctr --address "$SOCK" -n k8s.io images check "name==$PAUSE" 2>/dev/null)" != *"$PAUSE"* ]]; then
    if ! "$DOCKER" image inspect "$PAUSE" >/dev/null 2>&1; then
      src=$(GOTOOLCHAIN=local GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
      root=$(mktemp -d)
      trap 'rm -rf "$root"' EXIT
      gcc -static -Os -DVERSION="bot-agent-local" -o "$root/pause" "$src/build/pause/linux/pause.c"
      tar -C "$root" -c pause | "$DOCKER" import -c 'ENTRYPOINT ["/pause"]' - "$PAUSE" >/dev/null
    fi
    import "$PAUSE"
  fi
  exit 0
fi
import "$@"
