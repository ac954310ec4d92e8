#!/usr/bin/env bash
# The one-command demo: on this machine, a real Kubernetes (tests/env/k8s.sh control plane,
# tests/env/node.sh nodes: kubelet + containerd), locally built images, the glusterkube Helm
# chart, a 3-node GlusterCluster on node-local directories, a replica-3 pool GlusterVolume, a
# subdirectory StorageClass, an RWX PVC, and two pods that read each other's files.
#
#   ./demo.sh          run it (needs root; the first run builds for a while, later runs reuse)
#   ./demo.sh down     remove what the demo created (release, namespace), keep the nodes
#   ./demo.sh clean    down, then stop and remove the nodes (the control plane keeps running)
#
# GK_DEMO_HELM_ARGS adds arguments to `helm upgrade --install` (tests/tests/e2e.rs shortens the
# operator's refresh with it).
set -euo pipefail
cd "$(dirname "$0")"
. tests/env/common.sh
[ "$(id -u)" = 0 ] || gk_die "run as root: the nodes need network namespaces, cgroups and mounts"

ns=${GK_DEMO_NAMESPACE:-gk-demo}
release=glusterkube
release_ns=glusterkube-system
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$GK_CACHE/cargo-target}
eval "$(bash tests/env/k8s.sh env)"
export PATH="$GK_CACHE/bin:$PATH"
node_data=${GK_NODE_DATA:-/var/lib/glusterkube-node}
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)

t0=$(date +%s)
stage_start=$t0
stage() {
  local now; now=$(date +%s)
  [ -z "${stage_name:-}" ] || printf '    done in %ss\n' "$((now - stage_start))"
  stage_name=$1; stage_start=$now
  printf '\n==> [%4ss] %s\n' "$((now - t0))" "$stage_name"
}

down() {
  # Workloads and claims first, then the volumes and the cluster while the brick pods still
  # run (the operator needs their agents to delete gluster volumes), then the namespace.
  if kubectl get namespace "$ns" >/dev/null 2>&1; then
    kubectl -n "$ns" delete pods --all --ignore-not-found --wait=true --timeout=120s || true
    kubectl -n "$ns" delete pvc --all --wait=true --timeout=180s || true
    # Retained PVs of the demo's claims would keep the pool (and its data) alive.
    local pv
    for pv in $(kubectl get pv -o jsonpath="{range .items[?(@.spec.claimRef.namespace=='$ns')]}{.metadata.name}{'\n'}{end}"); do
      kubectl delete pv "$pv" --wait=true --timeout=60s || true
    done
    kubectl -n "$ns" delete glustervolumes --all --wait=true --timeout=180s || true
    kubectl -n "$ns" delete glusterclusters --all --wait=true --timeout=180s || true
    # What the operator could not finish in time (say, brick pods that cannot start) would
    # keep the namespace terminating for ever once the operator is uninstalled. The demo's
    # bricks are removed below anyway, so its finalizers go.
    local o
    for o in $(kubectl -n "$ns" get glustervolumes,glusterclusters -o name 2>/dev/null); do
      echo "demo: $o did not finish deleting; removing its finalizer" >&2
      kubectl -n "$ns" patch "$o" --type=merge -p '{"metadata":{"finalizers":null}}' || true
    done
    for pv in $(kubectl get pv -o jsonpath="{range .items[?(@.spec.claimRef.namespace=='$ns')]}{.metadata.name}{'\n'}{end}"); do
      echo "demo: PersistentVolume $pv did not finish deleting; removing its finalizers" >&2
      kubectl patch pv "$pv" --type=merge -p '{"metadata":{"finalizers":null}}' || true
    done
  fi
  kubectl delete namespace "$ns" --ignore-not-found --wait=true --timeout=180s || true
  kubectl delete storageclass glusterkube-demo --ignore-not-found || true
  helm uninstall "$release" -n "$release_ns" --wait --timeout 120s 2>/dev/null || true
  kubectl delete namespace "$release_ns" --ignore-not-found --timeout=120s || true
  # The demo's bricks and glusterd state (the pool) on the nodes; each node's bricks
  # directory is a filesystem of its own (tests/env/node.sh), emptied, not removed.
  local b
  for b in "$node_data"/gk-node-*/bricks; do
    if [ -d "$b" ]; then find "$b" -mindepth 1 -maxdepth 1 -exec rm -rf {} +; fi
  done
}

case "${1:-up}" in
  down) down; exit 0 ;;
  clean) down; bash tests/env/node.sh clean; exit 0 ;;
  up) ;;
  *) echo "usage: $0 [up|down|clean]" >&2; exit 2 ;;
esac

stage "installing tools (Debian packages; helm, csi-sanity from Go modules)"
bash tests/env/install-tools.sh

stage "control plane (etcd, kube-apiserver, controller-manager, scheduler on 127.0.0.1)"
bash tests/env/k8s.sh start

stage "images (Debian rootfs + our binaries, sidecars, pause; cached by content)"
bash tests/env/images.sh build

stage "nodes (3 x kubelet + containerd, bridge CNI, kube-proxy, CoreDNS)"
# Images go in before the kubelets start, so pods never run an older build of the same tag.
GK_NODE_IMAGES=1 bash tests/env/node.sh start
kubectl get nodes -o wide

stage "Helm chart charts/glusterkube"
# The local nodes take only pods that tolerate glusterkube.dev/local-node (the control plane
# is shared with tests that expect no kubelet). The three nodes share one host: its
# /var/lib/kubelet (node 1's) and its network, so the CSI node plugin, which mounts the
# kubelet directory and listens on the host network, runs on node 1 only (nodes 2 and 3 are
# also tainted storage-only); workloads run there too. node-driver-registrar and
# livenessprobe cannot be built here (the Go module proxy refuses them), so their drop-ins
# from this repository run in their place.
local_node='[{"key":"glusterkube.dev/local-node","operator":"Exists","effect":"NoSchedule"}]'
helm upgrade --install "$release" charts/glusterkube -n "$release_ns" --create-namespace \
  --set-json "operator.tolerations=$local_node" \
  --set-json "csi.controller.tolerations=$local_node" \
  --set-json "csi.node.tolerations=$local_node" \
  --set sidecars.nodeDriverRegistrar.repository=ghcr.io/glusterkube/csi-node-registrar \
  --set sidecars.nodeDriverRegistrar.tag="$version" \
  --set sidecars.livenessProbe.repository=ghcr.io/glusterkube/csi-liveness \
  --set sidecars.livenessProbe.tag="$version" \
  ${GK_DEMO_HELM_ARGS:-} --wait --timeout 300s
kubectl -n "$release_ns" get pods -o wide

stage "GlusterCluster $ns/demo: 3 nodes, bricks in node-local directories"
kubectl create namespace "$ns" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -f - <<YAML
apiVersion: glusterkube.dev/v1alpha1
kind: GlusterCluster
metadata: {name: demo, namespace: $ns}
spec:
  tolerations:
    - {key: glusterkube.dev/local-node, operator: Exists, effect: NoSchedule}
    - {key: glusterkube.dev/storage-only, operator: Exists, effect: NoSchedule}
  nodes:
    - {name: gk-node-1, storage: {directory: $node_data/gk-node-1/bricks}}
    - {name: gk-node-2, storage: {directory: $node_data/gk-node-2/bricks}}
    - {name: gk-node-3, storage: {directory: $node_data/gk-node-3/bricks}}
YAML
kubectl -n "$ns" wait glustercluster/demo --for=condition=Ready --timeout=600s

stage "GlusterVolume $ns/pool: replica 3"
kubectl apply -f - <<YAML
apiVersion: glusterkube.dev/v1alpha1
kind: GlusterVolume
metadata: {name: pool, namespace: $ns}
spec:
  cluster: demo
  type: Replicate
  replica: 3
  brickCount: 3
  size: 10Gi
YAML
kubectl -n "$ns" wait glustervolume/pool --for=condition=Ready --timeout=300s

stage "StorageClass (subdirectory of the pool), RWX PVC"
kubectl apply -f - <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: glusterkube-demo}
provisioner: gluster.glusterkube.dev
parameters: {pool: $ns/pool}
reclaimPolicy: Delete
allowVolumeExpansion: true
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: shared, namespace: $ns}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: glusterkube-demo
  resources: {requests: {storage: 1Gi}}
YAML
kubectl -n "$ns" wait pvc/shared --for=jsonpath='{.status.phase}'=Bound --timeout=180s

stage "two pods writing and reading each other's files"
workload=$(bash tests/env/images.sh name workload)
for pair in "alice bob" "bob alice"; do
  set -- $pair
  kubectl apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: $ns, labels: {app: gk-demo}}
spec:
  nodeSelector: {kubernetes.io/hostname: gk-node-1}
  tolerations: [{key: glusterkube.dev/local-node, operator: Exists, effect: NoSchedule}]
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: $workload
      command: ["/bin/sh", "-c"]
      args:
        - |
          echo "hello from $1 at \$(date -u +%T)" > /data/$1.txt
          until [ -s /data/$2.txt ]; do sleep 1; done
          echo "$1 read: \$(cat /data/$2.txt)"
          touch /tmp/read-the-other
          exec sleep infinity
      readinessProbe:
        exec: {command: [test, -f, /tmp/read-the-other]}
        periodSeconds: 2
      volumeMounts: [{name: data, mountPath: /data}]
  volumes:
    - {name: data, persistentVolumeClaim: {claimName: shared}}
YAML
done
kubectl -n "$ns" wait pod -l app=gk-demo --for=condition=Ready --timeout=180s
kubectl -n "$ns" logs alice
kubectl -n "$ns" logs bob

stage "kubectl gluster (the kubectl plugin) in /usr/local/bin"
# Built with the images' binaries (cached); kubectl finds plugins on PATH. Under the test
# command (GK_IMAGES_BUILT=1) tests/run.sh built it: cargo inside a running `cargo test` would
# wait for its lock forever.
[ "${GK_IMAGES_BUILT:-}" = 1 ] || cargo build -q -p kubectl-gluster
[ -x "$CARGO_TARGET_DIR/debug/kubectl-gluster" ] || gk_die "no kubectl-gluster in $CARGO_TARGET_DIR/debug: cargo build -p kubectl-gluster"
install -m 0755 "$CARGO_TARGET_DIR/debug/kubectl-gluster" /usr/local/bin/kubectl-gluster
kubectl gluster status -n "$ns"

stage "result"
kubectl -n "$ns" get glusterclusters,glustervolumes,pvc,pods -o wide
now=$(date +%s)
printf '\ndemo complete in %ss. Remove it with: ./demo.sh down (or ./demo.sh clean to stop the nodes)\n' "$((now - t0))"
