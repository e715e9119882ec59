#!/usr/bin/env bash
# Storage for the local cluster (sourced by kube/up.sh, after the node is ready):
# a default StorageClass `node-folders` and a pool of folders on this node as
# PersistentVolumes, so that a PersistentVolumeClaim (the chart's, by default)
# binds as it would on any cluster with a default class.
#
# Why not kube-controller-manager's host-path provisioner: it makes each folder
# root's, mode 0750, and the agent does not run as root. These folders are
# writable by any user. A volume released by its claim keeps its data until the
# next kube:up empties it and offers it again.
VOLUMES=$STATE/volumes
VOLUME_COUNT=16

kubectl apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: node-folders
  annotations: { storageclass.kubernetes.io/is-default-class: "true" }
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF

for i in $(seq 1 "$VOLUME_COUNT"); do
  name=node-folder-$i
  phase=$(kubectl get pv "$name" -o 'jsonpath={.status.phase}' 2>/dev/null || true)
  case "$phase" in
    Available | Bound | Pending) continue ;;
    Released | Failed) kubectl delete pv "$name" --wait=true >/dev/null ;;
  esac
  rm -rf "${VOLUMES:?}/$name"
  mkdir -p "$VOLUMES/$name"
  chmod 0777 "$VOLUMES/$name"
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $name
  labels: { bot-agent-kube/volume: "true" }
spec:
  storageClassName: node-folders
  capacity: { storage: 10Gi }
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: { path: $VOLUMES/$name, type: Directory }
EOF
done
