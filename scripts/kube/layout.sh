# Where the local cluster lives and how its network is laid out (sourced by scripts/kube/*).
STATE=/var/lib/bot-agent-kube
RUN=/run/bot-agent-kube
LOGS=$STATE/logs
PKI=$STATE/pki
CNI_CONF=$STATE/cni
NODE=bot-agent-node
BRIDGE=bak0
# The bridge's own MAC (locally administered), set so that it never changes: see up.sh.
BRIDGE_MAC=02:62:61:6b:30:01
ADDRESS=10.88.0.1
POD_CIDR=10.88.0.0/16
SERVICE_CIDR=10.96.0.0/16
# The daemons, in the order they start; kube:down stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy kwok)
# kwok's simulated node and its server's port on loopback (scripts/kube/kwok.sh).
KWOK_NODE=bot-agent-kwok-0
KWOK_PORT=10247

# The pid of daemon $1 when it still runs: a pid file outlives a daemon that died, and its pid may
# since belong to another process (seen here: to one of a thousand bench containers).
daemon_pid() {
  local pid program
  pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
  program=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | head -n 1) || return 1
  [ "$(basename -- "$program")" = "$1" ] && echo "$pid"
}
