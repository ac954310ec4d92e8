#!/usr/bin/env bash
# Container images built on this machine without a daemon or a registry, written as one OCI
# image layout (hand-made: sha256 blobs, manifests, an index) and imported into the local
# nodes' containerd (tests/env/node.sh).
#
#   images.sh build        build whatever is missing (cached by content under $GK_CACHE/images)
#   images.sh import       build, then import into every node's containerd (skipped when the
#                          node already has each image at the same digest)
#   images.sh name IMAGE   print the reference of IMAGE (brick, csi, operator, pause, ...)
#   images.sh list         print every IMAGE=reference
#
# Images:
#   brick     Debian bookworm with glusterfs-server + gk-agent; the root Dockerfile builds
#             the same content with Docker, brick-image/entrypoint.sh is its entrypoint
#   csi       the same Debian layer (glusterfs-client, util-linux) + gk-csi
#   operator  the same Debian layer + gk-operator
#   workload  the Debian layer alone, for the demo's and the e2e test's pods
#   pause     kubernetes' pause.c from the k8s.io/kubernetes module, linked statically
#   csi-provisioner, csi-resizer   built from their Go modules (kubernetes-csi)
#   csi-node-registrar, csi-liveness   our own (tools/csi-node-registrar in Go, gk-csi-liveness)
#             in place of node-driver-registrar and livenessprobe, whose Go modules the module
#             proxy refuses ("403 Forbidden: This module version is not available" for every
#             version and for the version list); they take the same flags
#
# The Debian layer is debootstrap's minbase plus the packages below, keyed by that list; each
# image's top layer holds only our binaries, keyed by their content; nothing is rebuilt when
# its inputs did not change.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
. "$here/common.sh"

out="$GK_CACHE/images"
layout="$out/oci"
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")
suite=bookworm
mirror=${GK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
debian_packages=(glusterfs-server glusterfs-client xfsprogs attr util-linux procps)
provisioner_version=${GK_CSI_PROVISIONER_VERSION:-v5.3.0}
resizer_version=${GK_CSI_RESIZER_VERSION:-v1.14.0}
snapshotter_version=$GK_SNAPSHOTTER_VERSION
pause_version=3.10
profile=${GK_IMAGE_PROFILE:-debug}

# Names as the Helm chart (charts/glusterkube/values.yaml) expects them.
declare -A ref=(
  [brick]="ghcr.io/glusterkube/brick:$version"
  [csi]="ghcr.io/glusterkube/csi:$version"
  [operator]="ghcr.io/glusterkube/operator:$version"
  [pause]="registry.k8s.io/pause:$pause_version"
  [csi-provisioner]="registry.k8s.io/sig-storage/csi-provisioner:$provisioner_version"
  [csi-resizer]="registry.k8s.io/sig-storage/csi-resizer:$resizer_version"
  [csi-snapshotter]="registry.k8s.io/sig-storage/csi-snapshotter:$snapshotter_version"
  [csi-node-registrar]="ghcr.io/glusterkube/csi-node-registrar:$version"
  [csi-liveness]="ghcr.io/glusterkube/csi-liveness:$version"
  [workload]="localhost/glusterkube/workload:$version"
)
images=(brick csi operator pause csi-provisioner csi-resizer csi-snapshotter csi-node-registrar csi-liveness workload)

sha() { sha256sum "$1" | cut -d' ' -f1; }

# blob FILE: moves FILE into the layout as a blob; prints "digest size".
blob() {
  local f=$1 d s
  d=$(sha "$f"); s=$(stat -c %s "$f")
  mkdir -p "$layout/blobs/sha256"
  if [ -f "$layout/blobs/sha256/$d" ]; then rm -f "$f"; else mv "$f" "$layout/blobs/sha256/$d"; fi
  echo "$d $s"
}

# layer_from_dir DIR: a gzip'd tar layer of DIR's content (numeric owners, fixed mtimes);
# prints "digest size diff_id". Compressed, each node's content store holds half as much.
layer_from_dir() {
  local dir=$1 tmp diff_id; tmp=$(mktemp "$out/tmp/layer.XXXXXX")
  tar --numeric-owner --sort=name --mtime=@0 --xattrs --xattrs-include='*' -C "$dir" -cf "$tmp" .
  diff_id=$(sha "$tmp")
  gzip -n -1 "$tmp"
  echo "$(blob "$tmp.gz") $diff_id"
}

# The Debian layer: debootstrap minbase + packages, cached under a key of what goes into it.
debian_layer() {
  local key; key=$(printf '%s\n' "$suite" "$mirror" "${debian_packages[@]}" v2 | sha256sum | cut -c1-16)
  local rec="$out/debian-$key.layer"
  if [ -f "$rec" ] && [ -f "$layout/blobs/sha256/$(cut -d' ' -f1 "$rec")" ]; then cat "$rec"; return; fi
  command -v debootstrap >/dev/null || gk_die "debootstrap is missing; run tests/env/install-tools.sh"
  local root="$out/tmp/rootfs-$key"
  rm -rf "$root"
  gk_log "debootstrap $suite (minbase) + ${debian_packages[*]} (first time only)"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$out/tmp/debootstrap.log" 2>&1 \
    || gk_die "debootstrap failed; see $out/tmp/debootstrap.log"
  # Package scripts must not start services in the chroot.
  printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${debian_packages[@]}" >"$out/tmp/apt.log" 2>&1 || gk_die "apt-get install in the rootfs failed; see $out/tmp/apt.log"
  chroot "$root" apt-get clean
  rm -rf "$root/usr/sbin/policy-rc.d" "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin \
    "$root/var/log/"*.log "$root/dev/"* "$root/run/"* "$root/tmp/"*
  layer_from_dir "$root" > "$rec"
  rm -rf "$root"
  cat "$rec"
}

# Gluster's translators we ship patched (gluster-patches/README.md), as a layer over the Debian
# one: files at the paths of Debian's own, so the layer replaces them.
gluster_fix_layer() {
  local dir; dir=$(gk_gluster_fix)
  local rec="$out/gluster-fix-$(basename "$dir").layer"
  if [ -f "$rec" ] && [ -f "$layout/blobs/sha256/$(cut -d' ' -f1 "$rec")" ]; then cat "$rec"; return; fi
  layer_from_dir "$dir" > "$rec"
  cat "$rec"
}

cargo_bins() {
  local target=${CARGO_TARGET_DIR:-$GK_CACHE/cargo-target}
  local flag=""; [ "$profile" = release ] && flag=--release
  (cd "$repo" && CARGO_TARGET_DIR="$target" cargo build $flag -q --bin gk-agent --bin gk-csi --bin gk-operator \
    --bin gk-csi-liveness) >&2
  bins="$target/$profile"
}

# top_layer NAME FILE:DEST...: a layer holding the given files (executables), stripped.
top_layer() {
  local name=$1; shift
  local dir; dir=$(mktemp -d "$out/tmp/$name.XXXXXX")
  local spec src dest
  for spec in "$@"; do
    src=${spec%%:*}; dest=${spec#*:}
    mkdir -p "$dir/$(dirname "$dest")"
    cp "$src" "$dir/$dest"
    chmod 755 "$dir/$dest"
    case $(head -c 4 "$dir/$dest" | od -An -c | tr -d ' ') in
      177ELF) strip --strip-debug "$dir/$dest" 2>/dev/null || true ;;
    esac
  done
  layer_from_dir "$dir"
  rm -rf "$dir"
}

# image NAME "ENTRYPOINT JSON" LAYER...: config and manifest; records "digest size" in $out/NAME.manifest.
image() {
  local name=$1 entry=$2; shift 2
  local diff_ids="" layers="" l d s id
  for l in "$@"; do
    read -r d s id <<<"$l"
    diff_ids+="${diff_ids:+,}\"sha256:$id\""
    layers+="${layers:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"sha256:$d\",\"size\":$s}"
  done
  local tmp; tmp=$(mktemp "$out/tmp/config.XXXXXX")
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":%s,"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/","Labels":{"org.opencontainers.image.source":"glusterkube","org.opencontainers.image.version":"%s"}},"rootfs":{"type":"layers","diff_ids":[%s]}}' \
    "$entry" "$version" "$diff_ids" > "$tmp"
  read -r d s < <(blob "$tmp")
  tmp=$(mktemp "$out/tmp/manifest.XXXXXX")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
    "$d" "$s" "$layers" > "$tmp"
  blob "$tmp" > "$out/$name.manifest"
}

pause_binary() {
  local src="$GOMODCACHE/k8s.io/kubernetes@$GK_K8S_VERSION/build/pause/linux/pause.c"
  [ -f "$src" ] || (cd "$out/tmp" && go mod download "k8s.io/kubernetes@$GK_K8S_VERSION" >/dev/null)
  [ -f "$src" ] || gk_die "pause.c not found at $src"
  local bin="$GK_CACHE/bin/pause-$pause_version"
  if [ ! -x "$bin" ]; then
    cc -Os -Wall -Werror -static -DVERSION="v$pause_version-glusterkube" -o "$bin.tmp" "$src"
    strip "$bin.tmp"
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

# With GK_IMAGES_BUILT=1 nothing is built, only checked: tests/run.sh builds the images before
# `cargo test`, since cargo inside a running `cargo test` would wait for its lock forever.
check_built() {
  local n
  for n in "${images[@]}"; do
    [ -f "$out/$n.manifest" ] && [ -f "$layout/blobs/sha256/$(cut -d' ' -f1 "$out/$n.manifest")" ] \
      || gk_die "image $n is not built; run tests/env/images.sh build first"
  done
}

build() {
  if [ "${GK_IMAGES_BUILT:-}" = 1 ]; then check_built; return; fi
  mkdir -p "$out/tmp" "$layout/blobs/sha256"
  local base fix; base=$(debian_layer); fix=$(gluster_fix_layer)
  cargo_bins
  # The whiteout removes geo-replication's gsyncd (Python), which the gluster CLI otherwise
  # starts on every run to learn whether geo-replication is installed; we do not offer it.
  image brick '["/usr/local/bin/gk-brick-entrypoint"]' "$base" "$fix" \
    "$(top_layer brick "$bins/gk-agent:usr/local/bin/gk-agent" "$repo/brick-image/entrypoint.sh:usr/local/bin/gk-brick-entrypoint" "/dev/null:usr/lib/x86_64-linux-gnu/glusterfs/.wh.gsyncd")"
  image csi '["/usr/local/bin/gk-csi"]' "$base" "$fix" "$(top_layer csi "$bins/gk-csi:usr/local/bin/gk-csi")"
  image operator '["/usr/local/bin/gk-operator"]' "$base" "$fix" "$(top_layer operator "$bins/gk-operator:usr/local/bin/gk-operator")"
  local reg="$out/tmp/csi-node-registrar"
  (cd "$repo/tools/csi-node-registrar" && GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath -ldflags "-s -w" -o "$reg" .)
  image csi-node-registrar '["/csi-node-registrar"]' "$(top_layer csi-node-registrar "$reg:csi-node-registrar")"
  rm -f "$reg"
  image csi-liveness '["/usr/local/bin/gk-csi-liveness"]' "$base" "$fix" \
    "$(top_layer csi-liveness "$bins/gk-csi-liveness:usr/local/bin/gk-csi-liveness")"
  image workload '["/bin/sh"]' "$base" "$fix"
  image pause '["/pause"]' "$(top_layer pause "$(pause_binary):pause")"
  local b
  b=$(gk_go_binary csi-provisioner "$provisioner_version" github.com/kubernetes-csi/external-provisioner/v5 cmd/csi-provisioner)
  image csi-provisioner '["/csi-provisioner"]' "$(top_layer csi-provisioner "$b:csi-provisioner")"
  b=$(gk_go_binary csi-resizer "$resizer_version" github.com/kubernetes-csi/external-resizer cmd/csi-resizer)
  image csi-resizer '["/csi-resizer"]' "$(top_layer csi-resizer "$b:csi-resizer")"
  b=$(gk_snapshotter_binary csi-snapshotter)
  image csi-snapshotter '["/csi-snapshotter"]' "$(top_layer csi-snapshotter "$b:csi-snapshotter")"

  local manifests="" n d s
  for n in "${images[@]}"; do
    read -r d s < "$out/$n.manifest"
    manifests+="${manifests:+,}{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$d\",\"size\":$s,\"annotations\":{\"io.containerd.image.name\":\"${ref[$n]}\",\"org.opencontainers.image.ref.name\":\"${ref[$n]}\"}}"
  done
  printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
  printf '{"schemaVersion":2,"manifests":[%s]}' "$manifests" > "$layout/index.json.new"
  mv "$layout/index.json.new" "$layout/index.json"
  # Blobs no current manifest refers to (older builds) are dropped.
  for n in "$layout/blobs/sha256/"*; do
    referenced "$(basename "$n")" || rm -f "$n"
  done
  gk_log "images built: $(for n in "${images[@]}"; do printf '%s ' "${ref[$n]}"; done)"
}

# referenced DIGEST: whether a current manifest or config names the blob.
referenced() {
  local d=$1 m md
  for m in "$out/"*.manifest; do
    md=$(cut -d' ' -f1 "$m")
    [ "$md" = "$d" ] && return 0
    grep -q "$d" "$layout/blobs/sha256/$md" && return 0
  done
  return 1
}

# blobs_of IMAGE: the digests of its manifest, config and layers.
blobs_of() {
  local m; m=$(cut -d' ' -f1 "$out/$1.manifest")
  echo "$m"
  grep -o '[0-9a-f]\{64\}' "$layout/blobs/sha256/$m"
}

# import_into SOCKET IMAGE...: an OCI archive of just those images, streamed into ctr.
import_into() {
  local sock=$1; shift
  local dir; dir=$(mktemp -d "$out/tmp/import.XXXXXX")
  local manifests="" n d s
  mkdir -p "$dir/blobs/sha256"
  for n in "$@"; do
    read -r d s < "$out/$n.manifest"
    manifests+="${manifests:+,}{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:$d\",\"size\":$s,\"annotations\":{\"io.containerd.image.name\":\"${ref[$n]}\",\"org.opencontainers.image.ref.name\":\"${ref[$n]}\"}}"
    for d in $(blobs_of "$n"); do ln -f "$layout/blobs/sha256/$d" "$dir/blobs/sha256/$d"; done
  done
  printf '{"imageLayoutVersion":"1.0.0"}' > "$dir/oci-layout"
  printf '{"schemaVersion":2,"manifests":[%s]}' "$manifests" > "$dir/index.json"
  tar -C "$dir" -cf - oci-layout index.json blobs | ctr --address "$sock" -n k8s.io images import - >/dev/null
  rm -rf "$dir"
}

# Node 1 runs everything; the storage-only nodes (tests/env/node.sh) run brick pods only, and
# their disk is this machine's, so they get just the brick and pause images.
import() {
  build
  local nodes=${GK_NODES:-3} n sock name d want
  for n in $(seq "$nodes"); do
    sock="$GK_RUN/node/gk-node-$n/containerd.sock"
    [ -S "$sock" ] || gk_die "node gk-node-$n's containerd is not running (tests/env/node.sh start)"
    if [ "$n" = 1 ]; then want=("${images[@]}"); else want=(brick pause); fi
    local missing=()
    for name in "${want[@]}"; do
      d=$(cut -d' ' -f1 "$out/$name.manifest")
      ctr --address "$sock" -n k8s.io images ls "name==${ref[$name]}" 2>/dev/null | grep "sha256:$d" >/dev/null || missing+=("$name")
    done
    [ ${#missing[@]} -gt 0 ] || continue
    gk_log "importing into gk-node-$n: ${missing[*]}"
    import_into "$sock" "${missing[@]}"
  done
}

case "${1:-}" in
  build) build ;;
  import) import ;;
  name) echo "${ref[$2]:?unknown image $2}" ;;
  list) for n in "${images[@]}"; do echo "$n=${ref[$n]}"; done ;;
  *) echo "usage: $0 build|import|name IMAGE|list" >&2; exit 2 ;;
esac
