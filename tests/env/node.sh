#!/usr/bin/env bash
# Real Kubernetes nodes for the local control plane (tests/env/k8s.sh), all on this machine:
# per node a containerd (Debian's, with runc) and a kubelet (built from k8s.io/kubernetes like
# the control plane); shared by the nodes a bridge pod network (Debian's CNI plugins),
# kube-proxy in iptables mode for ClusterIP Services, and CoreDNS for cluster DNS.
#
#   node.sh start    start everything (and the control plane), wait until the nodes are Ready
#   node.sh stop     stop kubelets, pods, containerd and the node services; keep images
#   node.sh clean    stop, then remove all node state (images, pod data, brick directories)
#   node.sh status   print what is running
#   node.sh ctr N ARGS...   run ctr against node N's containerd (namespace k8s.io)
#
# Why three nodes: the operator places the bricks of a replica set on distinct nodes (that is
# what makes them survive a node loss), so a 3-brick replica volume needs three nodes. They
# are three kubelets with their own containerd, cgroup root, root directory and node address.
# Every node carries the taint glusterkube.dev/local-node:NoSchedule, so only pods that opt in
# run here: the control plane is shared with other tests, whose pods expect no kubelet. Nodes
# 2.. also carry glusterkube.dev/storage-only:NoSchedule, so that only brick pods, which
# tolerate it, run there: the CSI node plugin's DaemonSet mounts the standard kubelet
# directory /var/lib/kubelet, which is node 1's, and listens on the host network. `stop`
# deletes the Node objects, leaving the control plane as it was without nodes.
#
# Network: a bridge gk0 with 10.214.0.1/16 on the host. Node N's address is 10.214.0.1N (the
# kubelet listens there) and its pods get 10.214.N.2-254. Services are 10.96.0.0/16, as the
# apiserver's --service-cluster-ip-range; that range is routed into gk0 so that nothing for it
# leaves the machine, and forwarding is enabled on gk0 only, with anything forwarded between
# gk0 and another interface dropped. Pods reach the apiserver through the `kubernetes`
# Service, whose endpoint is a TCP relay on 10.214.0.1:16443 to the apiserver on 127.0.0.1
# (the apiserver keeps listening on loopback only, unchanged for every other test).
# CoreDNS answers on 10.214.0.1:53 for cluster.local only; it forwards nothing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

ver=$GK_K8S_VERSION
bindir="$GK_CACHE/k8s/$ver/bin"
k8s_state="$GK_RUN/k8s"
pki="$k8s_state/pki"
api_port=${GK_APISERVER_PORT:-16443}
nodes=${GK_NODES:-3}
run="$GK_RUN/node"
state="$run"
logs="$run/logs"
# Node state (pod volumes, logs, brick directories) lives on disk, not under /run.
data=${GK_NODE_DATA:-/var/lib/glusterkube-node}
# containerd's images and container layers live in memory: three nodes on one machine would
# hold three copies of every image, and this machine's disk is shared and nearly full.
# `images.sh import` puts them back after a reboot in seconds.
images_fs="$data/containerd"
# Each node's brick directories sit on an XFS of its own (a sparse loop file), as on a host
# whose storage directory is on a real disk: reflink copies (snapshots, clones) and the
# filesystem's own checks work as there, not as on this machine's ext4 root.
bricks_fs_size=${GK_NODE_BRICKS_SIZE:-40g}
images_fs_size=${GK_NODE_IMAGES_SIZE:-4g}
bridge=gk0
gateway=10.214.0.1
pod_cidr=10.214.0.0/16
service_cidr=10.96.0.0/16
cluster_dns=$gateway
coredns_version=${GK_COREDNS_VERSION:-v1.14.7}
storage_taint=glusterkube.dev/storage-only
node_taint=glusterkube.dev/local-node
export PATH="$bindir:$GK_CACHE/bin:$PATH"
kc() { kubectl --kubeconfig "$k8s_state/admin.kubeconfig" "$@"; }

node_name() { echo "gk-node-$1"; }
node_ip() { echo "10.214.0.1$1"; }
kubelet_dir() { if [ "$1" = 1 ]; then echo /var/lib/kubelet; else echo "$data/$(node_name "$1")/kubelet"; fi; }
ctr_sock() { echo "$run/$(node_name "$1")/containerd.sock"; }

pidfile() { echo "$run/$1.pid"; }
running() { local f; f=$(pidfile "$1"); [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }
launch() {
  local name=$1; shift
  running "$name" && return 0
  # A session of its own: a signal to the caller's process group (Ctrl-C in the demo, a
  # `timeout` around it) must not take the node down with it.
  setsid "$@" >"$logs/$name.log" 2>&1 </dev/null &
  echo $! > "$(pidfile "$name")"
}
stop_one() {
  local name=$1 f pid
  f=$(pidfile "$name")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}
wait_for() {
  local what=$1 tries=$2; shift 2
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  gk_die "$what did not become ready; see $logs"
}

# write_if_changed FILE: stdin into FILE, leaving FILE untouched when the content is the same.
write_if_changed() {
  local f=$1 tmp; tmp=$(mktemp "$f.XXXXXX")
  cat > "$tmp"
  if cmp -s "$tmp" "$f"; then rm -f "$tmp"; else mv "$tmp" "$f"; fi
}

coredns_bin() { echo "$GK_CACHE/bin/coredns-$coredns_version"; }
build_coredns() {
  local out; out=$(coredns_bin)
  [ -x "$out" ] && return 0
  gk_log "building CoreDNS $coredns_version from the Go module proxy (first time only)"
  local tmp; tmp=$(mktemp -d)
  GOBIN="$tmp" go install -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
  mv "$tmp/coredns" "$out"
  rm -rf "$tmp"
}

network_up() {
  if ! ip link show "$bridge" >/dev/null 2>&1; then
    ip link add "$bridge" type bridge
  fi
  ip addr replace "$gateway/16" dev "$bridge"
  for n in $(seq "$nodes"); do ip addr replace "$(node_ip "$n")/16" dev "$bridge"; done
  ip link set "$bridge" up
  # Service IPs without a kube-proxy rule must not follow the default route off the machine.
  ip route replace "$service_cidr" dev "$bridge"
  echo 1 > "/proc/sys/net/ipv4/conf/$bridge/forwarding"
  # Pod-to-Service traffic between pods on one bridge must pass iptables for kube-proxy's NAT.
  echo 1 > /proc/sys/net/bridge/bridge-nf-call-iptables
  iptables -C FORWARD -i "$bridge" ! -o "$bridge" -j DROP 2>/dev/null || iptables -I FORWARD 1 -i "$bridge" ! -o "$bridge" -j DROP
  iptables -C FORWARD -o "$bridge" ! -i "$bridge" -j DROP 2>/dev/null || iptables -I FORWARD 1 -o "$bridge" ! -i "$bridge" -j DROP
}

network_down() {
  iptables -D FORWARD -i "$bridge" ! -o "$bridge" -j DROP 2>/dev/null || true
  iptables -D FORWARD -o "$bridge" ! -i "$bridge" -j DROP 2>/dev/null || true
  ip route del "$service_cidr" dev "$bridge" 2>/dev/null || true
  ip link del "$bridge" 2>/dev/null || true
  # kube-proxy's chains, so a later start begins clean.
  if [ -x "$bindir/kube-proxy" ]; then "$bindir/kube-proxy" --cleanup >/dev/null 2>&1 || true; fi
  # The kubelets' own: KUBE-FIREWALL (drops non-loopback packets to 127.0.0.0/8) and canaries.
  local ipt table
  for ipt in iptables ip6tables; do
    while $ipt -D INPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    while $ipt -D OUTPUT -j KUBE-FIREWALL 2>/dev/null; do :; done
    $ipt -F KUBE-FIREWALL 2>/dev/null || true
    $ipt -X KUBE-FIREWALL 2>/dev/null || true
    for table in filter nat mangle; do $ipt -t "$table" -X KUBE-KUBELET-CANARY 2>/dev/null || true; done
    $ipt -t mangle -X KUBE-IPTABLES-HINT 2>/dev/null || true
  done
}

pki_setup() {
  [ -f "$pki/ca.key" ] || gk_die "no control-plane CA in $pki; run tests/env/k8s.sh start first"
  local n
  for n in $(seq "$nodes"); do
    cert "kubelet-$(node_name "$n")" "system:node:$(node_name "$n")" system:nodes
    kubeconfig "kubelet-$(node_name "$n")"
  done
  cert kube-proxy system:kube-proxy ""
  kubeconfig kube-proxy
  cert coredns glusterkube:coredns ""
  kubeconfig coredns
}

# Cluster objects the node services need: CoreDNS's read access, the `kubernetes` Service's
# endpoint (the apiserver's endpoint reconciler is off, since it would publish 127.0.0.1).
cluster_objects() {
  kc apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: "glusterkube:coredns"}
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "glusterkube:coredns"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "glusterkube:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: "glusterkube:coredns"}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kubernetes-gk-node
  namespace: default
  labels:
    kubernetes.io/service-name: kubernetes
    endpointslice.kubernetes.io/managed-by: glusterkube.dev-node-sh
addressType: IPv4
endpoints:
- addresses: ["$gateway"]
  conditions: {ready: true}
ports:
- {name: https, port: $api_port, protocol: TCP}
YAML
}

containerd_config() {
  local n=$1 name; name=$(node_name "$n")
  local dir="$run/$name" root="$images_fs/$name"
  mkdir -p "$dir/cni/net.d" "$dir/cni/ipam" "$root"
  cat > "$dir/cni/net.d/10-gk.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "gk-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$bridge",
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$dir/cni/ipam",
        "ranges": [[{"subnet": "$pod_cidr", "rangeStart": "10.214.$n.2", "rangeEnd": "10.214.$n.254", "gateway": "$gateway"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
JSON
  cat > "$dir/containerd.toml" <<TOML
version = 2
root = "$root"
state = "$dir/state"
[grpc]
  address = "$dir/containerd.sock"
[ttrpc]
  address = "$dir/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$dir/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(pause_image)"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  # This machine's bounding set lacks CAP_SYS_RESOURCE, so no process may lower an OOM score
  # below its own: the kubelet's -998 for sandboxes fails in runc with "failed to update
  # /proc/self/oom_score_adj: Permission denied". Clamp scores to containerd's own instead.
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$dir/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$dir/cni/net.d"
    max_conf_num = 1
TOML
}

pause_image() { bash "$here/images.sh" name pause; }

kubelet_config() {
  local n=$1 name; name=$(node_name "$n")
  local dir="$run/$name"
  : > "$dir/resolv.conf"
  local taints="{key: $node_taint, value: \"true\", effect: NoSchedule}"
  [ "$n" = 1 ] || taints+=", {key: $storage_taint, value: \"true\", effect: NoSchedule}"
  cat > "$dir/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine runs cgroup v1; kubelet 1.36 refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
# Each kubelet owns its own cgroup tree; a shared /kubepods would have them kill each other's pods.
cgroupRoot: /$name
address: $(node_ip "$n")
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((10340 + n))
containerRuntimeEndpoint: unix://$(ctr_sock "$n")
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: Webhook}
clusterDomain: cluster.local
clusterDNS: [$cluster_dns]
resolvConf: $dir/resolv.conf
podLogsDir: $data/$name/pod-logs
failSwapOn: false
maxPods: 60
serializeImagePulls: false
# Images are imported, never pulled; keep them even when the disk is fuller than 85 %.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 200Mi, nodefs.available: 100Mi, nodefs.inodesFree: 1%, imagefs.available: 100Mi}
registerWithTaints: [$taints]
YAML
}

cgroup_root() {
  local name=$1 c
  for c in /sys/fs/cgroup/*/; do
    c=${c%/}
    case $(basename "$c") in unified) continue ;; esac
    mkdir -p "$c/$name"
    if [ -f "$c/cpuset.cpus" ] && [ -z "$(cat "$c/$name/cpuset.cpus")" ]; then
      cat "$c/cpuset.cpus" > "$c/$name/cpuset.cpus"
      cat "$c/cpuset.mems" > "$c/$name/cpuset.mems"
    fi
  done
}

# Mount propagation (the CSI plugin's Bidirectional mounts) needs the kubelet directory on a
# shared mount; / is private here, so the directory is bind-mounted onto itself, shared.
shared_dir() {
  local d=$1
  mkdir -p "$d"
  mountpoint -q "$d" || mount --bind "$d" "$d"
  mount --make-rshared "$d"
}

start() {
  command -v containerd >/dev/null || gk_die "containerd is missing; run tests/env/install-tools.sh"
  bash "$here/k8s.sh" build-node
  build_coredns
  bash "$here/k8s.sh" start
  mkdir -p "$run" "$logs" "$data" "$images_fs"
  mountpoint -q "$images_fs" || mount -t tmpfs -o "size=$images_fs_size,mode=0700" gk-node-images "$images_fs"
  local n bricks img
  for n in $(seq "$nodes"); do
    bricks="$data/$(node_name "$n")/bricks" img="$data/$(node_name "$n")/bricks.xfs"
    mkdir -p "$bricks"
    mountpoint -q "$bricks" && continue
    if [ ! -f "$img" ]; then
      truncate -s "$bricks_fs_size" "$img"
      mkfs.xfs -q -f -i size=512 -m reflink=1 "$img"
    fi
    mount -o loop,noatime "$img" "$bricks"
  done
  pki_setup
  network_up
  cluster_objects

  launch apiserver-relay socat "TCP-LISTEN:$api_port,bind=$gateway,fork,reuseaddr" "TCP:127.0.0.1:$api_port"
  cat > "$run/Corefile" <<CORE
cluster.local:53 in-addr.arpa:53 {
  bind $gateway
  errors
  kubernetes cluster.local in-addr.arpa {
    kubeconfig $state/coredns.kubeconfig local
    pods verified
    ttl 5
  }
}
.:53 {
  bind $gateway
  errors
}
CORE
  launch coredns "$(coredns_bin)" -conf "$run/Corefile"

  local n name
  for n in $(seq "$nodes"); do
    name=$(node_name "$n")
    containerd_config "$n"
    launch "containerd-$name" containerd --config "$run/$name/containerd.toml"
  done
  for n in $(seq "$nodes"); do
    wait_for "containerd of $(node_name "$n")" 120 ctr --address "$(ctr_sock "$n")" version
  done
  if [ -n "${GK_NODE_IMAGES:-}" ]; then bash "$here/images.sh" import; fi

  for n in $(seq "$nodes"); do
    name=$(node_name "$n")
    kubelet_config "$n"
    cgroup_root "$name"
    shared_dir "$(kubelet_dir "$n")"
    mkdir -p "$data/$name/pod-logs"
    launch "kubelet-$name" kubelet --config "$run/$name/kubelet.yaml" \
      --kubeconfig "$state/kubelet-$name.kubeconfig" --hostname-override "$name" \
      --node-ip "$(node_ip "$n")" --root-dir "$(kubelet_dir "$n")" --cert-dir "$run/$name/kubelet-pki" -v=1
    # One at a time: every kubelet clears and binds /var/lib/kubelet/device-plugins/kubelet.sock
    # whatever its --root-dir, and two starting together fail "address already in use".
    wait_for "kubelet of $name" 240 curl -sf "http://127.0.0.1:$((10340 + n))/healthz"
  done

  # kube-proxy exits when its configuration file changes, so a running one keeps its file.
  write_if_changed "$run/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $state/kube-proxy.kubeconfig}
hostnameOverride: $(node_name 1)
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clusterCIDR: $pod_cidr
nodePortAddresses: [$pod_cidr]
conntrack: {maxPerCore: 0}
YAML
  launch kube-proxy kube-proxy --config "$run/kube-proxy.yaml"

  for n in $(seq "$nodes"); do
    name=$(node_name "$n")
    wait_for "node $name" 240 kc wait --for=condition=Ready "node/$name" --timeout=1s
  done
  wait_for kube-proxy 120 curl -sf http://127.0.0.1:10256/healthz
  gk_log "nodes ready: $(kc get nodes --no-headers | awk '{print $1 "=" $2}' | tr '\n' ' ')"
}

# Every container of node N's containerd, killed and removed, with its network namespaces.
reap_containers() {
  local n=$1 sock; sock=$(ctr_sock "$n")
  [ -S "$sock" ] || return 0
  local c
  for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io tasks kill -s KILL "$c" >/dev/null 2>&1 || true
  done
  for _ in $(seq 50); do
    [ -z "$(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null | head -1)" ] && break
    for c in $(ctr --address "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr --address "$sock" -n k8s.io tasks delete -f "$c" >/dev/null 2>&1 || true
    done
    sleep 0.2
  done
  for c in $(ctr --address "$sock" -n k8s.io containers ls -q 2>/dev/null); do
    ctr --address "$sock" -n k8s.io containers rm "$c" >/dev/null 2>&1 || true
  done
}

unmount_under() {
  local d=$1 m
  [ -d "$d" ] || return 0
  # Deepest first; lazily, since a dead FUSE client leaves mounts that cannot be stat'ed.
  for m in $(awk -v d="$d" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/mounts | sort -r); do
    umount -l "$m" 2>/dev/null || true
  done
}

stop() {
  local n name
  stop_one kube-proxy
  for n in $(seq "$nodes"); do stop_one "kubelet-$(node_name "$n")"; done
  for n in $(seq "$nodes"); do reap_containers "$n"; done
  for n in $(seq "$nodes"); do
    name=$(node_name "$n")
    stop_one "containerd-$name"
    # Shims outlive containerd; any left belong to containers reaped above or already gone.
    local pid
    for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $run/$name/containerd.sock" || true); do
      kill -9 "$pid" 2>/dev/null || true
    done
    unmount_under "$(kubelet_dir "$n")/pods"
    unmount_under "$(kubelet_dir "$n")/plugins"
    unmount_under "$run/$name/state"
    rm -rf "$run/$name/cni/ipam"
  done
  stop_one coredns
  stop_one apiserver-relay
  network_down
  kc delete node $(for n in $(seq "$nodes"); do node_name "$n"; done) --ignore-not-found >/dev/null 2>&1 || true
}

clean() {
  stop
  local n
  for n in $(seq "$nodes"); do
    unmount_under "$(kubelet_dir "$n")"
    umount "$(kubelet_dir "$n")" 2>/dev/null || true
    unmount_under "$data/$(node_name "$n")"
    # The node's cgroup tree, deepest first (the kubelet leaves its QoS cgroups behind).
    find /sys/fs/cgroup/*/"$(node_name "$n")" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  unmount_under "$images_fs"
  rm -rf "$run" "$data" /var/lib/kubelet
}

status() {
  local p
  for p in apiserver-relay coredns kube-proxy $(for n in $(seq "$nodes"); do echo "containerd-$(node_name "$n") kubelet-$(node_name "$n")"; done); do
    if running "$p"; then echo "$p running (pid $(cat "$(pidfile "$p")"))"; else echo "$p stopped"; fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  clean) clean ;;
  status) status ;;
  ctr) n=$2; shift 2; ctr --address "$(ctr_sock "$n")" -n k8s.io "$@" ;;
  *) echo "usage: $0 start|stop|clean|status|ctr N ARGS..." >&2; exit 2 ;;
esac
