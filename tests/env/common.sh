# Shared settings for the test-environment scripts. Sourced, not run.
# Everything expensive (Go builds, module downloads) lives in GK_CACHE, outside the repository,
# keyed by version, so a second run reuses it.
GK_CACHE=${GK_CACHE:-/var/cache/glusterkube}
GK_RUN=${GK_RUN:-/run/glusterkube}
GK_K8S_VERSION=${GK_K8S_VERSION:-v1.36.3}
GK_CSI_SANITY_VERSION=${GK_CSI_SANITY_VERSION:-v5.6.0}
GK_HELM_VERSION=${GK_HELM_VERSION:-v3.19.0}
# Prometheus's Go module versions are v0.3MM.P for Prometheus 3.MM.P.
GK_PROMTOOL_VERSION=${GK_PROMTOOL_VERSION:-v0.316.0}
# krew, the kubectl plugin manager: the deploy test installs the plugin's release with it.
GK_KREW_VERSION=${GK_KREW_VERSION:-v0.4.3}

export GOMODCACHE=${GOMODCACHE_OVERRIDE:-$GK_CACHE/go/mod}
export GOCACHE=${GOCACHE_OVERRIDE:-$GK_CACHE/go/build}
export GOFLAGS=-buildvcs=false
export CGO_ENABLED=0

gk_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
gk_die() { gk_log "error: $*"; exit 1; }

# gk_gluster_fix: the directory holding gluster's translators with our patches
# (gluster-patches/README.md) at the paths Debian's package uses, built once per content of the
# patches and their build script; prints it.
gk_gluster_fix() {
  local patches; patches=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../gluster-patches" && pwd)
  local key; key=$(cat "$patches/build.sh" "$patches/"*.patch | sha256sum | cut -c1-16)
  local dir="$GK_CACHE/gluster-fix/$key"
  if [ ! -d "$dir" ]; then
    rm -rf "$dir.tmp"
    bash "$patches/build.sh" "$dir.tmp" >&2 || gk_die "building gluster's patched translators failed"
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

# The PKI helpers below read the caller's $pki (CA and output directory), $state (where
# kubeconfigs go) and $api_port.

# cert NAME CN O [SANs]: a key and a certificate signed by the CA in $pki.
cert() {
  local name=$1 cn=$2 org=$3 sans=${4:-}
  [ -f "$pki/$name.crt" ] && return 0
  openssl genrsa -out "$pki/$name.key" 2048 2>/dev/null
  local subj="/CN=$cn"; [ -n "$org" ] && subj="/O=$org$subj"
  openssl req -new -key "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  local ext="$pki/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [ -n "$sans" ]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$sans"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$ext"
}

# kubeconfig NAME: $state/NAME.kubeconfig for the certificate NAME, against the local apiserver.
kubeconfig() {
  local name=$1
  cat > "$state/$name.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $pki/$name.crt
    client-key: $pki/$name.key
contexts:
- name: local
  context: {cluster: local, user: $name}
current-context: local
KC
}


# external-snapshotter: csi-snapshotter (an image, tests/env/images.sh), snapshot-controller
# and the VolumeSnapshot CRDs (tests/env/k8s.sh, as part of the cluster).
GK_SNAPSHOTTER_VERSION=${GK_SNAPSHOTTER_VERSION:-v8.7.0}
GK_SNAPSHOTTER_MODULE=github.com/kubernetes-csi/external-snapshotter

# gk_module_dir MODULE VERSION: where the module proxy's copy of a module is unpacked.
gk_module_dir() {
  local dir
  dir=$(go mod download -json "$1@$2" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [ -d "$dir" ] || gk_die "could not download $1@$2"
  echo "$dir"
}

# gk_go_binary NAME VERSION MODULE PACKAGE [SUBDIR=MODULE]...: builds a command of a module
# at an exact version (cached). `go install mod@version` wants the module's version list for
# its deprecation check, which the proxy does not serve for every module; building inside
# the downloaded module needs only the exact version. A SUBDIR=MODULE pair supplies a nested
# module that the main one replaces with its local directory (and so leaves out of its zip).
gk_go_binary() {
  local name=$1 version=$2 module=$3 pkg=$4; shift 4
  local bin="$GK_CACHE/bin/$name-$version"
  if [ ! -x "$bin" ]; then
    gk_log "building $name $version from the Go module proxy (first time only)"
    local dir; dir=$(gk_module_dir "$module" "$version")
    if [ $# -gt 0 ]; then
      local work; work=$(mktemp -d "${TMPDIR:-/tmp}/gk-go.XXXXXX")
      cp -r "$dir/." "$work/" && chmod -R u+w "$work"
      local pair
      for pair in "$@"; do
        ln -s "$(gk_module_dir "${pair#*=}" "$version")" "$work/${pair%%=*}"
      done
      dir=$work
    fi
    (cd "$dir" && GOFLAGS="-buildvcs=false -mod=mod" go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$bin.tmp" "./$pkg")
    mv "$bin.tmp" "$bin"
    [ $# -eq 0 ] || rm -rf "$dir"
  fi
  echo "$bin"
}

# gk_snapshotter_binary csi-snapshotter|snapshot-controller
gk_snapshotter_binary() {
  gk_go_binary "$1" "$GK_SNAPSHOTTER_VERSION" "$GK_SNAPSHOTTER_MODULE/v8" "cmd/$1" \
    "client=$GK_SNAPSHOTTER_MODULE/client/v8"
}

# gk_snapshot_crds: the VolumeSnapshot CRD files of the client module.
gk_snapshot_crds() {
  local d; d=$(gk_module_dir "$GK_SNAPSHOTTER_MODULE/client/v8" "$GK_SNAPSHOTTER_VERSION")/config/crd
  ls "$d"/snapshot.storage.k8s.io_*.yaml
}
