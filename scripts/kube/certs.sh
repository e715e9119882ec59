#!/usr/bin/env bash
# Makes the local cluster's certificates and kubeconfigs with openssl, once:
# a cluster CA (serving and client certificates), a front-proxy CA (the API
# server's requests to the metrics API), and the service-account key pair.
# Usage: bash scripts/kube/certs.sh DIR API_ADDRESS NODE_NAME
set -euo pipefail
dir=$1 address=$2 node=$3
[ -f "$dir/admin.kubeconfig" ] && exit 0
mkdir -p "$dir"
cd "$dir"

ca() { # name subject
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=$2" -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
cert() { # name ca subject [subjectAltNames] [extendedKeyUsage]
  local name=$1 ca=$2 subject=$3 san=${4:-} usage=${5:-clientAuth}
  openssl req -newkey rsa:2048 -nodes -subj "$subject" -keyout "$name.key" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -days 3650 -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}
kubeconfig() { # name user-cert
  local cert=$2
  cat >"$1.kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: bot-agent-local
  cluster:
    server: https://$address:6443
    certificate-authority-data: $(base64 -w0 ca.crt)
users:
- name: $cert
  user:
    client-certificate-data: $(base64 -w0 "$cert.crt")
    client-key-data: $(base64 -w0 "$cert.key")
contexts:
- name: bot-agent-local
  context: {cluster: bot-agent-local, user: $cert}
current-context: bot-agent-local
KUBECONFIG
}

ca ca bot-agent-local-ca
ca front-proxy-ca bot-agent-local-front-proxy-ca
cert apiserver ca /CN=kube-apiserver \
  "IP:$address,IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" serverAuth
cert apiserver-kubelet-client ca "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert front-proxy-client front-proxy-ca /CN=front-proxy-client
cert kubelet ca "/O=system:nodes/CN=system:node:$node" "IP:$address,DNS:$node" serverAuth,clientAuth
cert admin ca "/O=system:masters/CN=bot-agent-admin"
cert controller-manager ca /CN=system:kube-controller-manager
cert scheduler ca /CN=system:kube-scheduler
cert kube-proxy ca /CN=system:kube-proxy
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
for user in kubelet controller-manager scheduler kube-proxy admin; do kubeconfig "$user" "$user"; done
chmod 600 ./*.key ./*.kubeconfig
