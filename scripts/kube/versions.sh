# The versions of the local cluster, in one place (sourced by scripts/kube/*).
# Kubernetes 1.34: the newest minor whose kubelet still runs on cgroup v1 (1.35
# refuses it by default); etcd is the version Kubernetes' own go.mod pins.
K8S_VERSION=1.34.4
METRICS_SERVER_VERSION=0.9.0
# kwok's simulated nodes (scripts/kube/kwok.sh): the newest the module proxy serves; it needs Go 1.26.
KWOK_VERSION=0.8.0
KUBE_CACHE=${BOT_AGENT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/bot-agent}/kube
