#!/usr/bin/env bash
# Builds the binaries of a single-node Kubernetes from Go modules, once per
# version, into a cache keyed by the versions: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy (one `go build`,
# so that shared packages compile once) and metrics-server (its own module).
# Kubernetes' own module cannot be `go install`ed (its go.mod replaces every
# staging module with a folder); a wrapper module requires it and points each
# staging module at its published v0.N.P instead.
# Cold: about 15 to 20 minutes on 2 cores; warm: nothing to do.
# Usage: bash scripts/kube/build.sh          (prints the folder of the binaries)
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/kube/versions.sh

bin="$KUBE_CACHE/bin-k8s$K8S_VERSION-ms$METRICS_SERVER_VERSION"
want=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy metrics-server)
have_all() { for b in "${want[@]}"; do [ -x "$bin/$b" ] || return 1; done; }
if have_all; then echo "$bin"; exit 0; fi

command -v go >/dev/null 2>&1 || { echo "kube/build.sh: needs Go (1.24 or newer) on PATH" >&2; exit 1; }
export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
mkdir -p "$KUBE_CACHE"
work=$(mktemp -d "$KUBE_CACHE/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
started=$(date +%s)
echo "kube/build.sh: building Kubernetes $K8S_VERSION, etcd (as Kubernetes pins it) and metrics-server $METRICS_SERVER_VERSION into $bin" >&2

# The wrapper module: Kubernetes, its staging modules at their published versions.
gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/^\t"GoMod": "\(.*\)",$/\1/p')
staging_version="v0.${K8S_VERSION#1.}"
mkdir -p "$work/k8s"
{
  echo 'module bot-agent.local/kube'
  echo
  sed -n 's/^go \(.*\)$/go \1/p' "$gomod"
  echo
  echo "require k8s.io/kubernetes v$K8S_VERSION"
  echo
  echo 'replace ('
  sed -n 's/^\t\(k8s\.io\/[a-z0-9-]*\) => \.\/staging\/src\/.*$/\t\1 => \1 '"$staging_version"'/p' "$gomod"
  echo ')'
} >"$work/k8s/go.mod"
(
  cd "$work/k8s"
  go build -trimpath -ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION" -o "$work/out/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubelet \
    k8s.io/kubernetes/cmd/kube-proxy \
    go.etcd.io/etcd/server/v3
)
# Go names the binary of a /v3 module path after the element before the suffix.
mv "$work/out/server" "$work/out/etcd"

# metrics-server: its own wrapper, with its own Kubernetes libraries.
mkdir -p "$work/ms"
(
  cd "$work/ms"
  printf 'module bot-agent.local/metrics\n\ngo 1.24.0\n\nrequire sigs.k8s.io/metrics-server v%s\n' "$METRICS_SERVER_VERSION" >go.mod
  go build -trimpath -ldflags="-s -w" -o "$work/out/" sigs.k8s.io/metrics-server/cmd/metrics-server
)

mkdir -p "$(dirname "$bin")"
mv -T "$work/out" "$bin" 2>/dev/null || have_all
echo "kube/build.sh: built in $(( $(date +%s) - started )) s" >&2
echo "$bin"
