#!/usr/bin/env bash
# Installs the real tools the tests need: Debian's gluster (with our patched write-behind,
# gluster-patches/), etcd, xfsprogs, protoc, and for the
# local node (tests/env/node.sh) containerd, runc, the CNI plugins, iptables, socat and
# debootstrap; tshark for the TLS test's packet capture; python3 for the agent test's stand-in
# hung brick process; e2fsprogs for e2e's foreign (ext4) disk; csi-sanity, helm, promtool and krew built from Go modules at pinned versions. Idempotent: a second run only checks.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

apt_packages=(glusterfs-server glusterfs-client xfsprogs attr protobuf-compiler libprotobuf-dev
  etcd-server iproute2 openssl curl psmisc procps util-linux
  containerd runc containernetworking-plugins iptables conntrack socat debootstrap
  tshark fio python3 e2fsprogs
  linux-perf) # the data-path bench's --cpu-profile and --fuse-calls run perf

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  gk_log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Debian's etcd and glusterd packages try to start their services; ours are started by the
  # test environment on private ports, so keep the package scripts from starting anything.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

# The gluster CLI starts geo-replication's gsyncd (Python) at every run only to learn whether
# geo-replication is installed: about 80 % of a CLI run's CPU. We do not offer geo-replication
# and the brick image leaves gsyncd out; the host's copy is set aside the same way (a dpkg
# diversion, so package upgrades keep it aside), so that tests and benches running the host's
# gluster CLI measure the CLI the product runs.
gsyncd=$(dpkg -L glusterfs-common | grep '/glusterfs/gsyncd$' || true)
[ -n "$gsyncd" ] || gk_die "glusterfs-common lists no gsyncd; cannot set it aside"
if [ -z "$(dpkg-divert --list "$gsyncd")" ]; then
  gk_log "setting geo-replication's gsyncd aside (dpkg-divert)"
  dpkg-divert --local --rename --divert "$gsyncd.geo-replication-off" --add "$gsyncd" >/dev/null
fi
[ ! -e "$gsyncd" ] || gk_die "$gsyncd is still in place after its diversion"

# Gluster's write-behind with our fix (gluster-patches/README.md) in place of the package's (a
# dpkg diversion keeps Debian's copy beside it), so that the tests' and benches' own clients run
# the translator the images ship.
wb=$(dpkg -L glusterfs-common | grep '/xlator/performance/write-behind\.so$') \
  || gk_die "glusterfs-common lists no write-behind.so"
fixed="$(gk_gluster_fix)$wb"
if [ -z "$(dpkg-divert --list "$wb")" ]; then
  gk_log "setting Debian's write-behind aside (dpkg-divert) for the patched one"
  dpkg-divert --local --rename --divert "$wb.debian" --add "$wb" >/dev/null
fi
cmp -s "$fixed" "$wb" || install -m 0644 "$fixed" "$wb"

bin="$GK_CACHE/bin"
mkdir -p "$bin"

# go_tool NAME VERSION PACKAGE [LDFLAGS [TAG]]: build PACKAGE@VERSION once into
# $bin/NAME-VERSION (-TAG: a build with other flags is another binary).
go_tool() {
  local name=$1 version=$2 pkg=$3 ldflags=${4:-} tag=${5:-}
  local out="$bin/$name-$version${tag:+-$tag}"
  if [ ! -x "$out" ]; then
    gk_log "building $name $version from the Go module proxy"
    local tmp
    tmp=$(mktemp -d)
    GOBIN="$tmp" go install -ldflags "$ldflags" "$pkg@$version"
    mv "$tmp/$name" "$out"
    rm -rf "$tmp"
  fi
  ln -sfn "$out" "$bin/$name"
}

go_tool csi-sanity "$GK_CSI_SANITY_VERSION" github.com/kubernetes-csi/csi-test/v5/cmd/csi-sanity \
  "-X main.VERSION=$GK_CSI_SANITY_VERSION"
# As helm's own Makefile builds it: the Kubernetes version it assumes offline (`helm template`,
# `helm lint`) is that of the client-go it is built with (1.34 for v3.19), not the source's
# placeholder 1.20, which the chart's kubeVersion refuses.
helm_k8s_minor=34
go_tool helm "$GK_HELM_VERSION" helm.sh/helm/v3/cmd/helm \
  "-X helm.sh/helm/v3/internal/version.version=$GK_HELM_VERSION \
   -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$helm_k8s_minor \
   -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$helm_k8s_minor" \
  "k8s1.$helm_k8s_minor"
# promtool (Prometheus's rule checker) runs the unit tests of the chart's alerts.
go_tool promtool "$GK_PROMTOOL_VERSION" github.com/prometheus/prometheus/cmd/promtool
# krew installs the kubectl plugin from its release manifest in the deploy test (offline:
# --manifest and --archive, and no upgrade check).
go_tool krew "$GK_KREW_VERSION" sigs.k8s.io/krew/cmd/krew

"$bin/csi-sanity" -h >/dev/null 2>&1 || gk_die "csi-sanity does not run"
"$bin/promtool" --version >/dev/null 2>&1 || gk_die "promtool does not run"
krew_root=$(mktemp -d)
KREW_NO_UPGRADE_CHECK=1 KREW_ROOT="$krew_root" "$bin/krew" version >/dev/null 2>&1 || gk_die "krew does not run"
rm -rf "$krew_root"
"$bin/helm" version --short | grep "$GK_HELM_VERSION" >/dev/null || gk_die "helm does not report $GK_HELM_VERSION"
for t in gluster glusterd glusterfs mkfs.xfs mkfs.ext4 losetup blkid python3 protoc etcd setfattr containerd runc ctr iptables socat debootstrap fio; do
  command -v "$t" >/dev/null || gk_die "$t is missing after install"
done
gk_log "tools ready in $bin"
