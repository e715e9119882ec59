#!/usr/bin/env bash
# npm run kube:down: stops the local cluster and leaves nothing behind: no
# process, mount, network namespace, bridge or iptables rule of its own. The
# cached binaries, and with KEEP_STATE=1 the cluster's data, are kept.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/kube/versions.sh
source scripts/kube/layout.sh
source scripts/kube/prologue.sh

# Pods first, while containerd still answers: their tasks, then the daemons in reverse order.
if [ -S "$RUN/containerd.sock" ]; then
  for task in $(ctr --address "$RUN/containerd.sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$RUN/containerd.sock" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1
  done
fi
for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do
  pidfile="$RUN/${DAEMONS[$i]}.pid"
  [ -f "$pidfile" ] || continue
  # A stale file's pid is not ours to kill.
  if pid=$(daemon_pid "${DAEMONS[$i]}"); then
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
done
# The shims of the cluster's containerd outlive it: end them (and the containers they hold).
pkill -9 -f "containerd-shim-runc-v2 .*-address $RUN/containerd.sock" 2>/dev/null
# Containers whose containerd was gone before their tasks could be killed: every process in the
# kubelet's pod cgroups (cgroupfs driver; cgroup v1's pids controller, or v2's unified tree).
for pods in /sys/fs/cgroup/pids/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$pods" ] && find "$pods" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -9 2>/dev/null
done

# Mounts under the cluster's folders (pod volumes, overlay snapshots, shm), deepest first.
for dir in "$STATE" "$RUN"; do
  awk -v d="$dir" '$2 ~ "^"d {print $2}' /proc/mounts | sort -r | while read -r mount; do umount -l "$mount" 2>/dev/null; done
done
# Network namespaces the CRI made for pods.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$ns" 2>/dev/null; done
# kube-proxy's and the kubelet's chains (KUBE-*, IPv4 and IPv6), then our own rules and the bridge.
bin="$KUBE_CACHE/bin-k8s$K8S_VERSION-ms$METRICS_SERVER_VERSION"
[ -x "$bin/kube-proxy" ] && "$bin/kube-proxy" --cleanup >/dev/null 2>&1
for ipt in iptables ip6tables; do
  for table in filter nat mangle; do
    "$ipt" -t "$table" -S 2>/dev/null | grep -E '^-A [A-Z]+ .*-j KUBE-' | grep -vE '^-A KUBE-' | sed 's/^-A /-D /' |
      while read -r rule; do eval "$ipt -t $table $rule" 2>/dev/null; done
    chains=$("$ipt" -t "$table" -S 2>/dev/null | awk '/^-N KUBE-/{print $2}')
    for chain in $chains; do "$ipt" -t "$table" -F "$chain" 2>/dev/null; done
    for chain in $chains; do "$ipt" -t "$table" -X "$chain" 2>/dev/null; done
  done
done
for direction in -i -o; do
  while iptables -D FORWARD "$direction" "$BRIDGE" -m comment --comment bot-agent-kube -j ACCEPT 2>/dev/null; do :; done
done
ip link show "$BRIDGE" >/dev/null 2>&1 && ip link delete "$BRIDGE"
rm -rf "$RUN"
[ "${KEEP_STATE:-}" = 1 ] || rm -rf "$STATE"
echo "kube/down.sh: down" >&2
