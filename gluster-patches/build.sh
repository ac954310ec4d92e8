#!/usr/bin/env bash
# Builds gluster's translators that we ship patched (README.md here says which and why) from
# Debian's own source of the glusterfs installed on this machine, with Debian's configuration,
# and writes them under OUT at the paths the installed package uses, so that a layer or a copy
# of OUT over / replaces the package's files.
#
#   build.sh OUT
#
# Refuses a glusterfs other than the one the patches were written and tested for, and a build
# whose imports differ from the packaged translator's (a sign that its configuration differs).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}

deb_version=10.3-5
upstream=10.3
orig_sha256=35ff536d5329eebfdb55d92df65a59b5ba36e68c68f084cad38dcf7df0677c8e
mirror=${GK_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What Debian's configure found on its build machines, and the compiler tools: enough for
# configure to write the same config.h (the translators' structures depend on it).
build_deps=(gcc make patch curl ca-certificates flex bison pkg-config python3 libaio-dev
  libacl1-dev libtirpc-dev liburcu-dev uuid-dev libssl-dev libxml2-dev zlib1g-dev)

log() { printf '[%s] gluster-patches: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

installed=$(dpkg-query -W -f='${Version}' glusterfs-common 2>/dev/null || true)
[ "$installed" = "$deb_version" ] \
  || die "glusterfs-common is '${installed:-not installed}', the patches are for $deb_version"
packaged=$(dpkg -L glusterfs-common | grep '/xlator/performance/write-behind\.so$') \
  || die "glusterfs-common lists no write-behind.so"
# A diverted copy (tests/env/install-tools.sh puts the patched one in its place) is the package's.
original=$packaged
[ -z "$(dpkg-divert --list "$packaged")" ] || original=$(dpkg-divert --truename "$packaged")

missing=()
for p in "${build_deps[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing build dependencies: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$work/glusterfs_$upstream.orig.tar.gz
log "fetching Debian's glusterfs $upstream source"
curl -fsS -o "$tarball" "$mirror/pool/main/g/glusterfs/glusterfs_$upstream.orig.tar.gz" \
  || die "cannot download $mirror/pool/main/g/glusterfs/glusterfs_$upstream.orig.tar.gz"
echo "$orig_sha256  $tarball" | sha256sum -c --quiet - || die "the source tarball's checksum differs"
tar -xzf "$tarball" -C "$work"
src=$work/glusterfs-$upstream
for p in "$here"/*.patch; do
  patch -d "$src" -p1 --quiet --forward < "$p" || die "$(basename "$p") does not apply"
done

log "configuring as Debian does (client side only)"
(cd "$src" && ./configure --prefix=/usr --libdir="${packaged%%/glusterfs/*}" \
  --localstatedir=/var --sysconfdir=/etc --without-server --disable-georeplication \
  --disable-events --disable-linux-io_uring --without-tcmalloc >"$work/configure.log" 2>&1) \
  || { tail -20 "$work/configure.log" >&2; die "configure failed"; }
grep -q '^/\* #undef GF_DISABLE_MEMPOOL \*/' "$src/config.h" \
  || die "configure disabled gluster's memory pools; Debian's libglusterfs has them"

built=$work/write-behind.so
wb=$src/xlators/performance/write-behind/src
# Debian's flags (hardening included), gluster's own defines, and the packaged libglusterfs.
gcc -O2 -g -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC -shared \
  -DHAVE_CONFIG_H -D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -DGF_LINUX_HOST_OS \
  -include "$src/config.h" -include "$src/site.h" -I"$src/libglusterfs/src" \
  -I/usr/include/uuid -I/usr/include/tirpc -Wall -Werror=format-security \
  -Werror=implicit-function-declaration -o "$built" "$wb/write-behind.c" \
  "$(ldconfig -p | awk '/libglusterfs\.so\.0 /{print $NF; exit}')" -luuid \
  || die "compiling write-behind failed"

imports() { nm -D --undefined-only "$1" | awk '{print $2}' | sort; }
if ! diff <(imports "$original") <(imports "$built") >"$work/imports.diff"; then
  cat "$work/imports.diff" >&2
  die "the patched write-behind imports other symbols than Debian's; its configuration differs"
fi
mkdir -p "$out$(dirname "$packaged")"
install -m 0644 "$built" "$out$packaged"
log "built $out$packaged"
