#!/usr/bin/env bash
# npm run kube:kwok: simulated nodes and pods beside the local cluster's real API server (scripts/kube/up.sh),
# idempotently, for tests and benches of the agent at scale (docs/performance.md). kwok (sigs.k8s.io/kwok) is
# built from Go modules once per version into the cluster's cache (cold: about 1 to 4 minutes on 2 cores; warm:
# nothing). It manages only nodes annotated kwok.x-k8s.io/node=fake, and makes one, bot-agent-kwok-0 (label
# type=kwok), tainted so that no pod lands there without the toleration: the real node's pods are never its.
# On that node a pod runs 0 s after it is scheduled, a pod labelled bot-agent.test/kwok-crash=true crash-loops
# (scripts/kube/kwok-stages.yaml), and every pod's logs are a few lines of a file of its own (no process runs,
# no probe, no metrics; kwok makes no Kubernetes events). Its server, where the API server reads those logs, is
# on loopback with a certificate of the cluster's CA. Stopped by npm run kube:down.
# Its last line of output is the simulated node's name.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/kube/versions.sh
source scripts/kube/layout.sh
source scripts/kube/prologue.sh

bin="$KUBE_CACHE/kwok-v$KWOK_VERSION"
if [ ! -x "$bin/kwok" ] || [ ! -f "$bin/stages.yaml" ]; then
  command -v go >/dev/null 2>&1 || fail "needs Go (1.26 or newer) on PATH"
  export GOTOOLCHAIN=local GOFLAGS=-mod=mod CGO_ENABLED=0
  mkdir -p "$KUBE_CACHE"
  work=$(mktemp -d "$KUBE_CACHE/.kwok-build-XXXXXX")
  trap 'rm -rf "$work"' EXIT
  started=$(date +%s)
  log "building kwok v$KWOK_VERSION into $bin"
  (cd "$work" && GOBIN="$work/out" go install -trimpath -ldflags="-s -w" "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION")
  # kwok's stock stages, from its own module: with a --config, every stage kwok runs must be in it.
  module=$(cd "$work" && go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  for stage in node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-delete; do
    cat "$module/kustomize/stage/$stage.yaml"
    echo '---'
  done >"$work/out/stages.yaml"
  mv -T "$work/out" "$bin" 2>/dev/null || [ -x "$bin/kwok" ]
  log "built in $(( $(date +%s) - started )) s"
fi

[ -f "$PKI/ca.key" ] || fail "no cluster: run scripts/kube/up.sh first"
mkdir -p "$STATE/kwok" "$RUN" "$LOGS"
if [ ! -f "$PKI/kwok.crt" ]; then
  # The API server reads a simulated pod's logs from kwok's server as from a kubelet: a serving certificate of
  # the cluster's CA for the simulated node's address.
  openssl req -newkey rsa:2048 -nodes -subj /CN=kwok -keyout "$PKI/kwok.key" -out "$PKI/kwok.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n' >"$PKI/kwok.ext"
  openssl x509 -req -in "$PKI/kwok.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 3650 -extfile "$PKI/kwok.ext" -out "$PKI/kwok.crt" 2>/dev/null
  rm -f "$PKI/kwok.csr" "$PKI/kwok.ext"
fi
# Lines in the CRI's log format, as a kubelet keeps them: the run's and the previous run's.
printf '%s stdout F hello from a simulated bot\n%s stdout F tick\n' 2026-01-01T00:00:00.000000000Z 2026-01-01T00:00:01.000000000Z >"$STATE/kwok/run.log"
printf '%s stderr F the previous run failed\n' 2026-01-01T00:00:00.000000000Z >"$STATE/kwok/previous.log"
{
  cat "$bin/stages.yaml" scripts/kube/kwok-stages.yaml
  cat <<YAML
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: bot-agent-simulated-logs
spec:
  logs:
  - logsFile: $STATE/kwok/run.log
    previousLogsFile: $STATE/kwok/previous.log
YAML
} >"$STATE/kwok/config.yaml"

answers() { curl -sf --cacert "$PKI/ca.crt" "https://127.0.0.1:$KWOK_PORT/healthz" >/dev/null 2>&1; }
if ! { daemon_pid kwok >/dev/null && answers; }; then
  [ -n "$(daemon_pid kwok)" ] && kill "$(daemon_pid kwok)" 2>/dev/null && sleep 1
  setsid nohup "$bin/kwok" --kubeconfig="$PKI/admin.kubeconfig" --config="$STATE/kwok/config.yaml" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --node-ip=127.0.0.1 --node-port="$KWOK_PORT" --server-address="127.0.0.1:$KWOK_PORT" \
    --tls-cert-file="$PKI/kwok.crt" --tls-private-key-file="$PKI/kwok.key" \
    --cidr=10.89.0.0/16 >"$LOGS/kwok.log" 2>&1 </dev/null &
  echo $! >"$RUN/kwok.pid"
  for _ in $(seq 1 120); do answers && break; sleep 0.25; done
  answers || fail "kwok did not come up within 30 s; see $LOGS/kwok.log"
fi

KUBECTL=1 bash scripts/helm.sh --kubeconfig "$PKI/admin.kubeconfig" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Node
metadata:
  name: $KWOK_NODE
  labels: { type: kwok, kubernetes.io/hostname: $KWOK_NODE }
  annotations: { kwok.x-k8s.io/node: fake }
spec:
  taints:
  - { key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule }
YAML
ready() { KUBECTL=1 bash scripts/helm.sh --kubeconfig "$PKI/admin.kubeconfig" get node "$KWOK_NODE" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -q True; }
for _ in $(seq 1 120); do ready && break; sleep 0.25; done
ready || fail "the simulated node $KWOK_NODE is not Ready within 30 s; see $LOGS/kwok.log"
echo "$KWOK_NODE"
