#!/usr/bin/env bash
# The kubectl plugin's release files (docs/release.md), in $GK_DIST (default dist/):
#   kubectl-gluster-VERSION-linux-ARCH.tar.gz   the binary and the license, one per platform
#   gluster.yaml                                the krew manifest naming each archive under
#                                               the release's download URL, with its SHA-256
#
#   tools/release-plugin.sh          cargo build --release for this machine's platform, package
#
# Environment:
#   GK_PLUGIN_BINARIES   "ARCH=PATH ..." (amd64, arm64): package these binaries instead of
#                        building (a cross build, or the test's debug binary)
#   GK_PLUGIN_URL_BASE   where the archives are downloaded from (default, krewgen's: the
#                        project's GitHub release of tag vVERSION)
#   GK_KREWGEN           the krewgen binary (default: cargo build -p gk-testenv --bin krewgen)
#   GK_DIST              output directory (default dist)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
dist=${GK_DIST:-dist}
url_base=()
[ -z "${GK_PLUGIN_URL_BASE:-}" ] || url_base=(--url-base "$GK_PLUGIN_URL_BASE")
license=/usr/share/common-licenses/Apache-2.0
[ -r "$license" ] || { echo "release-plugin: $license (Apache-2.0, the workspace's license) is missing: apt-get install base-files" >&2; exit 1; }

target_dir=${CARGO_TARGET_DIR:-target}
binaries=${GK_PLUGIN_BINARIES:-}
if [ -z "$binaries" ]; then
  case $(uname -m) in
    x86_64) arch=amd64 ;;
    aarch64) arch=arm64 ;;
    *) echo "release-plugin: no release build for $(uname -m)" >&2; exit 1 ;;
  esac
  cargo build -q --release -p kubectl-gluster
  binaries="$arch=$target_dir/release/kubectl-gluster"
fi
krewgen=${GK_KREWGEN:-}
if [ -z "$krewgen" ]; then
  cargo build -q -p gk-testenv --bin krewgen
  krewgen="$target_dir/debug/krewgen"
fi

mkdir -p "$dist"
archives=()
for entry in $binaries; do
  arch=${entry%%=*} bin=${entry#*=}
  case $arch in amd64|arm64) ;; *) echo "release-plugin: architecture $arch is not amd64 or arm64" >&2; exit 1 ;; esac
  [ -x "$bin" ] || { echo "release-plugin: $bin is not an executable" >&2; exit 1; }
  stage=$(mktemp -d)
  install -m 0755 "$bin" "$stage/kubectl-gluster"
  install -m 0644 "$license" "$stage/LICENSE"
  archive="$dist/kubectl-gluster-$version-linux-$arch.tar.gz"
  # Fixed owner and times, so the same binary gives the same archive and checksum.
  tar -C "$stage" --owner=0 --group=0 --numeric-owner --mtime=@0 --sort=name \
    -czf "$archive" kubectl-gluster LICENSE
  rm -rf "$stage"
  archives+=("$archive")
done
"$krewgen" "${url_base[@]}" "${archives[@]}" > "$dist/gluster.yaml"
echo "wrote ${archives[*]} and $dist/gluster.yaml" >&2
