# Where the local cluster lives and how its network is laid out (sourced by scripts/kube/*).
STATE=/var/lib/bot-agent-kube
RUN=/run/bot-agent-kube
LOGS=$STATE/logs
PKI=$STATE/pki
CNI_CONF=$STATE/cni
NODE=bot-agent-node
BRIDGE=bak0
ADDRESS=10.88.0.1
POD_CIDR=10.88.0.0/16
SERVICE_CIDR=10.96.0.0/16
# The daemons, in the order they start; kube:down stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)
