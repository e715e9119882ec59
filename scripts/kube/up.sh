#!/usr/bin/env bash
# npm run kube:up: a real single-node Kubernetes on this machine, idempotently.
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and
# kube-proxy built from Go modules (scripts/kube/build.sh, cached by version),
# a default StorageClass of folders on the node (scripts/kube/volumes.sh),
# Debian's containerd as an instance of its own (CRI on, cgroupfs), Debian's CNI
# plugins on a bridge of its own (bak0, 10.88.0.0/16, no masquerading), and
# metrics-server in the cluster. Pods reach the API server at 10.88.0.1, an
# address on that bridge; nothing leaves the machine.
# Its last line of output is the path of an admin kubeconfig.
# Undo with: npm run kube:down.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/kube/versions.sh
source scripts/kube/layout.sh
source scripts/kube/prologue.sh
# Writes stdin to a file only when it differs: kube-proxy exits when its configuration file is written.
write_if_changed() {
  local file=$1 new
  new=$(cat)
  [ -f "$file" ] && [ "$(cat "$file")" = "$new" ] && return 0
  printf '%s\n' "$new" >"$file"
}

# Packages: the engine (for images) brings containerd and runc; CNI plugins and conntrack besides.
bash scripts/docker-engine.sh >/dev/null
need=()
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 \
    || { apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; }
fi

BIN=$(bash scripts/kube/build.sh)
mkdir -p "$STATE" "$RUN" "$LOGS" "$CNI_CONF"
bash scripts/kube/certs.sh "$PKI" "$ADDRESS" "$NODE"

# The pods' bridge, made here so that the API server can listen on it before any pod exists.
if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
  ip link add "$BRIDGE" type bridge
  ip addr add "$ADDRESS/16" dev "$BRIDGE"
fi
# A bridge whose MAC was not set takes the lowest of its ports' and changes as pods come and go, under the
# pods' ARP entries for their gateway: a pod's packets to the host then went to a MAC nobody had, and its
# connections to an agent on the host timed out for up to a minute (seen in cold runs of the cluster tests).
if [ "$(cat "/sys/class/net/$BRIDGE/address")" != "$BRIDGE_MAC" ]; then
  ip link set "$BRIDGE" address "$BRIDGE_MAC"
fi
ip link set "$BRIDGE" up
# Docker sets the FORWARD policy to DROP; traffic on the pods' bridge is let through.
for direction in -i -o; do
  iptables -C FORWARD "$direction" "$BRIDGE" -m comment --comment bot-agent-kube -j ACCEPT 2>/dev/null \
    || iptables -I FORWARD "$direction" "$BRIDGE" -m comment --comment bot-agent-kube -j ACCEPT
done
write_if_changed "$CNI_CONF/10-bot-agent.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "bot-agent",
  "plugins": [
    {
      "type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_CIDR", "gateway": "$ADDRESS", "rangeStart": "10.88.1.1" }]],
                "routes": [{ "dst": "0.0.0.0/0" }], "dataDir": "$STATE/cni-ipam" }
    }
  ]
}
EOF

running() { daemon_pid "$1" >/dev/null; }
start() { # name command...
  local name=$1
  shift
  running "$name" && return 0
  setsid nohup "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
  echo $! >"$RUN/$name.pid"
}
await() { # what seconds check...
  local what=$1 seconds=$2
  shift 2
  for _ in $(seq 1 $((seconds * 4))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.25
  done
  fail "$what did not come up within $seconds s; see $LOGS"
}
api() { curl -sf --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://$ADDRESS:6443$1"; }
kubectl() { KUBECTL=1 bash scripts/helm.sh --kubeconfig "$PKI/admin.kubeconfig" "$@"; }

start etcd "$BIN/etcd" --name node --data-dir "$STATE/etcd" \
  --listen-client-urls http://127.0.0.1:23790 --advertise-client-urls http://127.0.0.1:23790 \
  --listen-peer-urls http://127.0.0.1:23800 --initial-advertise-peer-urls http://127.0.0.1:23800 \
  --initial-cluster node=http://127.0.0.1:23800 --listen-metrics-urls http://127.0.0.1:23810
await etcd 30 curl -sf http://127.0.0.1:23790/health

start kube-apiserver "$BIN/kube-apiserver" \
  --etcd-servers=http://127.0.0.1:23790 \
  --bind-address="$ADDRESS" --advertise-address="$ADDRESS" --secure-port=6443 \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
  --client-ca-file="$PKI/ca.crt" \
  --service-cluster-ip-range="$SERVICE_CIDR" \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --authorization-mode=Node,RBAC --allow-privileged=true \
  --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority="$PKI/ca.crt" --kubelet-preferred-address-types=InternalIP \
  --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
  --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
  --requestheader-extra-headers-prefix=X-Remote-Extra- \
  --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
  --enable-aggregator-routing=true
await kube-apiserver 60 api /readyz

# Its API calls at 100 a second, not the default 20: at that rate 200 of kwok's simulated bots (scripts/kube/kwok.sh)
# took 40 s to get their ReplicaSets and pods, and the bench's 5,000 would take a quarter of an hour.
start kube-controller-manager "$BIN/kube-controller-manager" \
  --kubeconfig="$PKI/controller-manager.kubeconfig" \
  --authentication-kubeconfig="$PKI/controller-manager.kubeconfig" --authorization-kubeconfig="$PKI/controller-manager.kubeconfig" \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
  --use-service-account-credentials=true --leader-elect=false --bind-address=127.0.0.1 \
  --kube-api-qps=100 --kube-api-burst=200
start kube-scheduler "$BIN/kube-scheduler" \
  --kubeconfig="$PKI/scheduler.kubeconfig" \
  --authentication-kubeconfig="$PKI/scheduler.kubeconfig" --authorization-kubeconfig="$PKI/scheduler.kubeconfig" \
  --leader-elect=false --bind-address=127.0.0.1

write_if_changed "$STATE/containerd.toml" <<EOF
version = 2
root = "$STATE/containerd"
state = "$RUN/containerd"
[grpc]
  address = "$RUN/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
  # Root here may not lower a process's OOM score (the kubelet asks -998 for sandboxes).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CNI_CONF"
  # Registries by host (hosts.toml): the test registry on loopback speaks plain HTTP (scripts/registry.sh).
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$STATE/certs.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd-opt"
EOF
mkdir -p "$STATE/certs.d/127.0.0.1:25500"
write_if_changed "$STATE/certs.d/127.0.0.1:25500/hosts.toml" <<EOF
server = "http://127.0.0.1:25500"
[host."http://127.0.0.1:25500"]
  capabilities = ["pull", "resolve"]
EOF
start containerd containerd --config "$STATE/containerd.toml"
await containerd 30 ctr --address "$RUN/containerd.sock" version
bash scripts/kube/images.sh

write_if_changed "$STATE/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ADDRESS
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: Webhook }
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$RUN/containerd.sock
podLogsDir: $STATE/pod-logs
clusterDomain: cluster.local
serializeImagePulls: false
evictionHard: { memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1% }
# No image can be pulled here: one the kubelet's image collection removed (the pause image first, seen on a
# disk 85% full) would be gone for good, and no pod could start again. Collection off.
imageGCHighThresholdPercent: 100
EOF
start kubelet "$BIN/kubelet" --config="$STATE/kubelet.yaml" --kubeconfig="$PKI/kubelet.kubeconfig" \
  --hostname-override="$NODE" --node-ip="$ADDRESS" --root-dir="$STATE/kubelet"

write_if_changed "$STATE/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: $PKI/kube-proxy.kubeconfig }
mode: iptables
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [ $ADDRESS/32 ]
conntrack: { maxPerCore: 0, min: 0 }
iptables: { localhostNodePorts: false }
EOF
start kube-proxy "$BIN/kube-proxy" --config="$STATE/kube-proxy.yaml"

# The kubelet and kube-proxy only warn about a field of their configuration they do not know.
for daemon in kubelet kube-proxy; do
  if grep -q 'strict decoding error' "$LOGS/$daemon.log" 2>/dev/null; then
    fail "$daemon ignored part of its configuration: $(grep -o 'strict decoding error.*' "$LOGS/$daemon.log" | head -n 1)"
  fi
done
# The whole answer first: `| grep -q` under pipefail fails when grep's early exit cuts the writer off.
node_ready() { [[ "$(api "/api/v1/nodes/$NODE" | tr -d ' \n')" == *'"type":"Ready","status":"True"'* ]]; }
await "the node" 120 node_ready
source scripts/kube/volumes.sh

# metrics-server, in the cluster, from an image made of its static binary.
METRICS_IMAGE="bot-agent-metrics-server:$METRICS_SERVER_VERSION"
if ! /usr/bin/docker image inspect "$METRICS_IMAGE" >/dev/null 2>&1; then
  root=$(mktemp -d)
  mkdir -p "$root/tmp" && chmod 1777 "$root/tmp" && cp "$BIN/metrics-server" "$root/metrics-server"
  tar -C "$root" -c . | /usr/bin/docker import -c 'ENTRYPOINT ["/metrics-server"]' - "$METRICS_IMAGE" >/dev/null
  rm -rf "$root"
fi
bash scripts/kube/images.sh "$METRICS_IMAGE"
sed "s|@IMAGE@|$METRICS_IMAGE|" scripts/kube/metrics-server.yaml | kubectl apply -f - >/dev/null
await metrics.k8s.io 180 api "/apis/metrics.k8s.io/v1beta1/nodes/$NODE"

log "up: Kubernetes $K8S_VERSION at https://$ADDRESS:6443 (logs: $LOGS)"
echo "$PKI/admin.kubeconfig"
