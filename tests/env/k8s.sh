#!/usr/bin/env bash
# A real local Kubernetes control plane on 127.0.0.1 only: etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, built from the Go module proxy, and the
# snapshot-controller with the VolumeSnapshot CRDs (external-snapshotter's modules).
#
#   k8s.sh build     build (or reuse) the binaries for $GK_K8S_VERSION
#   k8s.sh build-node  the same for kubelet and kube-proxy (tests/env/node.sh)
#   k8s.sh start     build if needed, generate PKI, start everything, wait for /readyz
#   k8s.sh stop      stop the processes (apiserver before etcd)
#   k8s.sh clean     stop and remove the state directory (etcd data, PKI, logs)
#   k8s.sh status    print what is running
#   k8s.sh env       print the KUBECONFIG export line
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

ver=$GK_K8S_VERSION
bindir="$GK_CACHE/k8s/$ver/bin"
state="$GK_RUN/k8s"
pki="$state/pki"
logs="$state/logs"
etcd_client_port=${GK_ETCD_PORT:-12379}
etcd_peer_port=${GK_ETCD_PEER_PORT:-12380}
api_port=${GK_APISERVER_PORT:-16443}
kcm_port=${GK_KCM_PORT:-10257}
sched_port=${GK_SCHED_PORT:-10259}
snapctl_port=${GK_SNAPSHOT_CONTROLLER_PORT:-10270}
components=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The node's components (tests/env/node.sh), built from the same module on demand only.
node_components=(kubelet kube-proxy)

# build [COMPONENT...]: the control plane's components unless others are named.
build() {
  local want=("$@")
  [ ${#want[@]} -gt 0 ] || want=("${components[@]}")
  local missing=0
  for c in "${want[@]}"; do [ -x "$bindir/$c" ] || missing=1; done
  [ $missing = 1 ] || return 0

  # A Go newer than the one a release pins breaks it (kube-openapi then emits an OpenAPI
  # document the apiserver itself rejects), so insist on the pinned minor.
  local want_go=${GK_K8S_GO:-go1.26}
  go version | grep " $want_go[. ]" >/dev/null || gk_die "Kubernetes $ver needs $want_go.x; found: $(go version)"
  local mod="$GK_CACHE/k8s/$ver/module"
  mkdir -p "$mod" "$bindir"
  gk_log "building Kubernetes $ver (first time only; several minutes)"
  # k8s.io/kubernetes lists its staging modules (k8s.io/api, client-go, ...) at v0.0.0 and
  # replaces them with local paths, which a dependent module cannot see. Pin each one to the
  # matching v0.x release, reading the list from that release's own go.mod.
  local gomod
  gomod=$(cd "$mod" && go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$gomod" ] || gk_die "could not download k8s.io/kubernetes@$ver go.mod"
  local staging_ver="v0.${ver#v1.}"
  {
    echo "module glusterkube.dev/k8sbuild"
    echo
    echo "go $(sed -n 's/^go \([0-9.]*\)$/\1/p' "$gomod")"
    echo
    echo "require k8s.io/kubernetes $ver"
    echo
    echo "replace ("
    awk '/^\t+k8s\.io\/[^ ]+ v0\.0\.0$/ { print "\t" $1 " => " $1 " '"$staging_ver"'" }' "$gomod" | sort -u
    echo ")"
  } > "$mod/go.mod"
  grep -q 'k8s.io/client-go => k8s.io/client-go' "$mod/go.mod" || gk_die "replace list generation found no staging modules in $gomod"

  local pkgs=() c
  for c in "${want[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c@$ver"); done
  (cd "$mod" && go get "${pkgs[@]}")

  local minor=${ver#v1.}; minor=${minor%%.*}
  local ldflags=""
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for c in "${want[@]}"; do
    if [ ! -x "$bindir/$c" ]; then
      gk_log "go build $c"
      (cd "$mod" && go build -trimpath -ldflags "-s -w $ldflags" -o "$bindir/$c.tmp" "k8s.io/kubernetes/cmd/$c")
      mv "$bindir/$c.tmp" "$bindir/$c"
    fi
  done
  for c in "${want[@]}"; do
    case $c in
      kubectl) "$bindir/kubectl" version --client | grep "$ver" >/dev/null || gk_die "kubectl does not report $ver" ;;
      kubelet|kube-proxy) "$bindir/$c" --version | grep "$ver" >/dev/null || gk_die "$c does not report $ver" ;;
    esac
  done
}

pki_setup() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    openssl genrsa -out "$pki/ca.key" 2048 2>/dev/null
    openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=glusterkube-test-ca" -days 3650 -sha256 \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -out "$pki/ca.crt" 2>/dev/null
  fi
  cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin admin system:masters
  cert controller-manager system:kube-controller-manager ""
  cert scheduler system:kube-scheduler ""
  # The apiserver's client certificate towards kubelets (logs, exec, port-forward).
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  [ -f "$pki/sa.key" ] || { openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null; openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null; }
  kubeconfig admin
  kubeconfig controller-manager
  kubeconfig scheduler
}

pidfile() { echo "$state/$1.pid"; }
running() { local f; f=$(pidfile "$1"); [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

launch() {
  local name=$1; shift
  running "$name" && return 0
  "$@" >"$logs/$name.log" 2>&1 &
  echo $! > "$(pidfile "$name")"
}

wait_for() {
  local what=$1 tries=$2; shift 2
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  gk_die "$what did not become ready; see $logs"
}

start() {
  build
  mkdir -p "$state" "$logs" "$state/etcd"
  pki_setup
  launch etcd etcd --name local --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_client_port" --advertise-client-urls "http://127.0.0.1:$etcd_client_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "local=http://127.0.0.1:$etcd_peer_port"
  wait_for etcd 60 curl -sf "http://127.0.0.1:$etcd_client_port/health"

  # The endpoint reconciler is off: it would publish the loopback advertise address as the
  # kubernetes Service endpoint, which the API rejects. Nothing here needs that Service.
  launch kube-apiserver "$bindir/kube-apiserver" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --etcd-servers="http://127.0.0.1:$etcd_client_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 --endpoint-reconciler-type=none \
    --authorization-mode=Node,RBAC --allow-privileged=true \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP,Hostname
  wait_for kube-apiserver 240 "$bindir/kubectl" --kubeconfig "$state/admin.kubeconfig" get --raw=/readyz

  launch kube-controller-manager "$bindir/kube-controller-manager" \
    --bind-address=127.0.0.1 --secure-port="$kcm_port" \
    --kubeconfig="$state/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$state/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$state/controller-manager.kubeconfig" \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --use-service-account-credentials=true --leader-elect=false
  launch kube-scheduler "$bindir/kube-scheduler" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" \
    --kubeconfig="$state/scheduler.kubeconfig" \
    --authentication-kubeconfig="$state/scheduler.kubeconfig" \
    --authorization-kubeconfig="$state/scheduler.kubeconfig" --leader-elect=false
  wait_for kube-controller-manager 120 curl -skf "https://127.0.0.1:$kcm_port/healthz"
  wait_for kube-scheduler 120 curl -skf "https://127.0.0.1:$sched_port/healthz"

  # Snapshot support as distributions ship it: the VolumeSnapshot CRDs and the
  # snapshot-controller, from external-snapshotter's modules.
  local snapctl crds=()
  snapctl=$(gk_snapshotter_binary snapshot-controller)
  mapfile -t crds < <(gk_snapshot_crds)
  "$bindir/kubectl" --kubeconfig "$state/admin.kubeconfig" apply --server-side --force-conflicts \
    $(printf -- '-f %s ' "${crds[@]}") >/dev/null
  "$bindir/kubectl" --kubeconfig "$state/admin.kubeconfig" wait --for=condition=Established \
    --timeout=60s crd/volumesnapshots.snapshot.storage.k8s.io crd/volumesnapshotcontents.snapshot.storage.k8s.io \
    crd/volumesnapshotclasses.snapshot.storage.k8s.io >/dev/null
  launch snapshot-controller "$snapctl" --kubeconfig="$state/admin.kubeconfig" \
    --leader-election=false --http-endpoint=127.0.0.1:"$snapctl_port"
  wait_for snapshot-controller 120 curl -sf "http://127.0.0.1:$snapctl_port/metrics"
  gk_log "control plane ready: export KUBECONFIG=$state/admin.kubeconfig"
}

stop_one() {
  local name=$1 f
  f=$(pidfile "$name")
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop() {
  # The apiserver goes before etcd, or its shutdown stalls waiting for etcd.
  for c in snapshot-controller kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_one "$c"; done
}

status() {
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler snapshot-controller; do
    if running "$c"; then echo "$c running (pid $(cat "$(pidfile "$c")"))"; else echo "$c stopped"; fi
  done
}

case "${1:-}" in
  build) build ;;
  build-node) build "${node_components[@]}" ;;
  start) start ;;
  stop) stop ;;
  clean) stop; rm -rf "$state" ;;
  status) status ;;
  env) echo "export KUBECONFIG=$state/admin.kubeconfig PATH=$bindir:\$PATH" ;;
  paths) printf "KUBECONFIG=%s\nBIN=%s\n" "$state/admin.kubeconfig" "$bindir" ;;
  *) echo "usage: $0 build|build-node|start|stop|clean|status|env|paths" >&2; exit 2 ;;
esac
