#!/usr/bin/env bash
# Tests XFS project quotas, alone and under gluster bricks, in a QEMU VM running Debian
# bookworm's own kernel (6.1, CONFIG_XFS_QUOTA=y): kernels without XFS quota support (such as
# this machine's) refuse `mount -o prjquota`. The VM runs under TCG (software emulation, no
# KVM needed), has no network device at all, and reports through a raw "io" disk that holds a
# tar of its results directory.
#
#   tests/env/quota-vm.sh                    build what is missing (cached), boot, test, print results
#   GK_VM_MODE=bench tests/env/quota-vm.sh   the same VM, benchmarking instead of testing
#
# Environment:
#   GK_CACHE              cache root (default /var/cache/glusterkube); this script uses $GK_CACHE/vm
#   GK_VM_MODE            test (default): the checks; bench: a subdirectory PV's small-file and
#                         write speed through FUSE on three replica-3 volumes side by side: no
#                         quota, gluster's quota, the agent's XFS project quota (results/bench.json)
#   GK_VM_TIMEOUT         seconds before the VM is killed (default 900; 1800 in bench mode)
#   GK_VM_BRICK_DISKS     3 (default): each gluster brick on its own XFS disk, as on three nodes;
#                         1: all three bricks on the one XFS disk of the plain-XFS checks (test
#                         mode only)
#   GK_VM_BENCH_FILES     bench mode: files per create/stat/unlink row (default 200; 300 with
#                         3 reps made a bench run take 15.6 min under TCG)
#   GK_VM_BENCH_REPS      bench mode: repetitions of the three cases, interleaved (default 3)
#   GK_VM_SMP, GK_VM_MEM  vCPUs (default 2) and memory in MiB (default 2048)
#   GK_DEBIAN_MIRROR      debootstrap mirror (default: the first URIs: of the apt sources)
#
# What is cached, each keyed by its inputs, so a second run only boots the VM:
#   vm/dl/                         the downloaded .debs (kernel, busybox-static)
#   vm/kernel-<pkg>_<ver>/         vmlinuz and initramfs-<key>.cpio.gz: busybox, the modules
#                                  (virtio_pci, virtio_blk, ext4, xfs, fuse, dummy) and an /init
#                                  that loads them, mounts the root disk and switch_roots into
#                                  /run-test.sh (appended per run as a second cpio archive)
#   vm/rootfs-<key>.img            ext4 image: debootstrap minbase + xfsprogs, attr, gluster,
#                                  booted with snapshot=on so it stays pristine
#   vm/runs/last/                  the last run's console log and results
#
# Exit status: 0 when every check in the VM passed, 1 otherwise (or on a timeout); in bench
# mode also 1 when bench.json is missing or short of 3 cases x 5 rows x GK_VM_BENCH_REPS samples.
#
# Note: XFS answers a write past a *project* quota's hard limit with ENOSPC ("No space left on
# device"), not EDQUOT: xfs_trans_dqresv() returns -ENOSPC for XFS_DQTYPE_PROJ, so that a
# project directory behaves like a full filesystem. The checks expect that. EDQUOT comes from
# user and group quotas; a user quota check shows whether gluster passes EDQUOT through.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"

vm="$GK_CACHE/vm"
mode=${GK_VM_MODE:-test}
case $mode in test|bench) ;; *) gk_die "GK_VM_MODE must be test or bench" ;; esac
if [ "$mode" = bench ]; then timeout_s=${GK_VM_TIMEOUT:-1800}; else timeout_s=${GK_VM_TIMEOUT:-900}; fi
brick_disks=${GK_VM_BRICK_DISKS:-3}
bench_files=${GK_VM_BENCH_FILES:-200}
bench_reps=${GK_VM_BENCH_REPS:-3}
smp=${GK_VM_SMP:-2}
mem=${GK_VM_MEM:-2048}
suite=bookworm
vm_packages=(xfsprogs attr glusterfs-server glusterfs-client util-linux procps iproute2 python3
  coreutils)
vm_modules=(virtio_pci virtio_blk ext4 xfs fuse dummy crc32c_generic)
host_packages=(qemu-system-x86 debootstrap kmod cpio e2fsprogs xfsprogs)
case $brick_disks in 1|3) ;; *) gk_die "GK_VM_BRICK_DISKS must be 1 or 3" ;; esac
[ "$mode" = test ] || [ "$brick_disks" = 3 ] || gk_die "bench mode puts one brick on each of three disks: GK_VM_BRICK_DISKS=1 is for test mode"
[[ $bench_files =~ ^[1-9][0-9]*$ ]] || gk_die "GK_VM_BENCH_FILES must be a positive integer"
[[ $bench_reps =~ ^[1-9][0-9]*$ ]] || gk_die "GK_VM_BENCH_REPS must be a positive integer"
# The brick agent whose quota path (gk-agent projects) the VM runs on its bricks.
agent=${GK_VM_AGENT:-${CARGO_TARGET_DIR:-$GK_CACHE/cargo-target}/debug/gk-agent}
[ -x "$agent" ] || gk_die "no brick agent at $agent: run cargo build -p gk-agent first (or set GK_VM_AGENT)"
# The client that drives the serving agent's RPCs in the VM (tests/src/bin/vm-agent-rpcs.rs).
rpcs=${GK_VM_RPCS:-${CARGO_TARGET_DIR:-$GK_CACHE/cargo-target}/debug/vm-agent-rpcs}
[ -x "$rpcs" ] || gk_die "no RPC client at $rpcs: run cargo build -p gk-testenv --bin vm-agent-rpcs first (or set GK_VM_RPCS)"

mirror=${GK_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1 || true)
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi

mkdir -p "$vm/dl" "$vm/runs"
apt_updated=false
apt_update() {
  $apt_updated && return 0
  gk_log "apt-get update"
  apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
  apt_updated=true
}

# --- host tools -------------------------------------------------------------------------
missing=()
for p in "${host_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt_update
  gk_log "installing Debian packages: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
    --no-install-recommends "${missing[@]}" >/dev/null
fi

# fetch_deb PACKAGE: the path of PACKAGE's candidate .deb in $vm/dl (downloaded once).
fetch_deb() {
  local pkg=$1 ver
  ver=$(apt-cache show --no-all-versions "$pkg" 2>/dev/null | sed -n 's/^Version: //p' | head -1)
  if [ -z "$ver" ]; then apt_update; ver=$(apt-cache show --no-all-versions "$pkg" | sed -n 's/^Version: //p' | head -1); fi
  [ -n "$ver" ] || gk_die "apt knows no package $pkg"
  local file="$vm/dl/${pkg}_${ver//:/%3a}_amd64.deb"
  if [ ! -s "$file" ]; then
    gk_log "downloading $pkg $ver"
    # (stdout is this function's answer: apt's progress goes to stderr)
    (cd "$vm/dl" && apt-get -qq -o APT::Sandbox::User=root download "$pkg=$ver" >&2) || {
      apt_update; (cd "$vm/dl" && apt-get -qq -o APT::Sandbox::User=root download "$pkg=$ver" >&2); }
  fi
  [ -s "$file" ] || gk_die "download of $pkg $ver did not give $file"
  echo "$file"
}

# --- kernel and initramfs ----------------------------------------------------------------
# linux-image-amd64 is the metapackage; its dependency names the concrete kernel package.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1 || true)
if [ -z "$kpkg" ]; then
  apt_update
  kpkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
fi
[ -n "$kpkg" ] || gk_die "cannot resolve linux-image-amd64 to a kernel package"
kver=${kpkg#linux-image-}
kdeb=$(fetch_deb "$kpkg")
bbdeb=$(fetch_deb busybox-static)
kdir="$vm/kernel-$(basename "$kdeb" .deb)"

# The initramfs's /init. $1..: nothing; everything it needs is in the archive.
initramfs_init() {
  cat <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "gk-initramfs: $(cut -d' ' -f1 /proc/uptime)s: loading modules"
while read -r m args; do
  insmod "/lib/modules/$m" $args || echo "gk-initramfs: insmod $m failed"
done < /modules.list
# The root disk is the virtio disk whose serial is gkroot.
root=""
for i in $(seq 1 100); do
  for s in /sys/block/vd*/serial; do
    [ -f "$s" ] && [ "$(cat "$s")" = gkroot ] && root=$(basename "$(dirname "$s")")
  done
  [ -n "$root" ] && break
  sleep 0.1
done
[ -n "$root" ] || { echo "gk-initramfs: no root disk"; ls /sys/block; exec sh; }
mount -t ext4 "/dev/$root" /newroot || { echo "gk-initramfs: cannot mount /dev/$root"; exec sh; }
cp /run-test.sh /newroot/run-test.sh && chmod 755 /newroot/run-test.sh
# The brick agent under test and its RPC client, when the run brought them.
for f in gk-agent vm-agent-rpcs; do
  [ ! -f /$f ] || { cp /$f /newroot/usr/local/bin/$f && chmod 755 /newroot/usr/local/bin/$f; }
done
mount --move /dev /newroot/dev
mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
exec switch_root /newroot /run-test.sh
INIT
}

initrd_key=$( { printf '%s\n' "${vm_modules[@]}" "$(basename "$bbdeb")"; initramfs_init; } | sha256sum | cut -c1-12)
initrd="$kdir/initramfs-$initrd_key.cpio.gz"
if [ ! -s "$kdir/vmlinuz" ] || [ ! -s "$initrd" ]; then
  gk_log "preparing kernel $kpkg and its initramfs (first time only)"
  rm -rf "$vm"/tmp-kernel.*
  work=$(mktemp -d "$vm/tmp-kernel.XXXXXX")
  dpkg-deb -x "$kdeb" "$work/k"
  dpkg-deb -x "$bbdeb" "$work/bb"
  depmod -b "$work/k" "$kver"
  mkdir -p "$kdir" "$work/ir/bin" "$work/ir/lib/modules"
  cp "$work/k/boot/vmlinuz-$kver" "$kdir/vmlinuz.tmp" && mv "$kdir/vmlinuz.tmp" "$kdir/vmlinuz"
  cp "$work/bb/bin/busybox" "$work/ir/bin/busybox"
  # modprobe resolves dependencies and soft dependencies (ext4 and libcrc32c want a crc32c).
  modprobe -d "$work/k" -S "$kver" --show-depends -a "${vm_modules[@]}" |
    sed -n 's/^insmod //p' | awk '!seen[$1]++' > "$work/deps"
  : > "$work/ir/modules.list"
  while read -r path args; do
    rel=${path#"$work/k/lib/modules/$kver/"}
    mkdir -p "$work/ir/lib/modules/$(dirname "$rel")"
    cp "$path" "$work/ir/lib/modules/$rel"
    echo "$rel $args" >> "$work/ir/modules.list"
  done < "$work/deps"
  initramfs_init > "$work/ir/init"
  chmod 755 "$work/ir/init"
  (cd "$work/ir" && find . | cpio -o -H newc -R 0:0 --quiet) | gzip -6 > "$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$work"
fi

# --- root filesystem ----------------------------------------------------------------------
rootfs_key=$(printf '%s\n' "$suite" "$mirror" "${vm_packages[@]}" v1 | sha256sum | cut -c1-12)
rootimg="$vm/rootfs-$rootfs_key.img"
if [ ! -s "$rootimg" ]; then
  root="$vm/tmp-rootfs-$rootfs_key"
  rm -rf "$root"
  gk_log "debootstrap $suite (minbase) from $mirror + ${vm_packages[*]} (first time only, minutes)"
  debootstrap --variant=minbase "$suite" "$root" "$mirror" > "$vm/debootstrap.log" 2>&1 \
    || gk_die "debootstrap failed; see $vm/debootstrap.log"
  printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
  chmod +x "$root/usr/sbin/policy-rc.d"
  chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${vm_packages[@]}" > "$vm/rootfs-apt.log" 2>&1 || gk_die "apt-get install in the rootfs failed; see $vm/rootfs-apt.log"
  # As on the host (tests/env/install-tools.sh): the gluster CLI would start geo-replication's
  # gsyncd (Python) at every run only to ask whether it is installed; under emulation that
  # costs seconds per command.
  gsyncd=$(chroot "$root" dpkg -L glusterfs-common | grep '/glusterfs/gsyncd$' || true)
  [ -z "$gsyncd" ] || chroot "$root" dpkg-divert --local --rename --divert "$gsyncd.geo-replication-off" --add "$gsyncd" >/dev/null
  chroot "$root" apt-get clean
  rm -rf "$root/usr/sbin/policy-rc.d" "$root/var/lib/apt/lists/"* "$root/var/cache/apt/"*.bin \
    "$root/dev/"* "$root/run/"* "$root/tmp/"*
  echo gkvm > "$root/etc/hostname"
  printf '127.0.0.1 localhost\n127.0.1.1 gkvm\n' > "$root/etc/hosts"
  ln -sfn /proc/self/mounts "$root/etc/mtab"
  size_mb=$(( $(du -sm "$root" | cut -f1) + 768 ))
  rm -f "$rootimg.tmp"
  truncate -s "${size_mb}M" "$rootimg.tmp"
  mkfs.ext4 -q -L gkroot -d "$root" "$rootimg.tmp"
  mv "$rootimg.tmp" "$rootimg"
  rm -rf "$root"
fi

# --- the test that runs in the VM (as its init, PID 1) ----------------------------------------
run_test() {
  cat <<'RUN'
#!/bin/bash
# Runs as PID 1 in the VM. Every check appends "PASS|FAIL name: detail" to
# /results/results.txt; the results directory is written as a tar onto the io disk after each
# section and at the end, then the VM powers off.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts
hostname gkvm
ip link set lo up
R=/results; mkdir -p $R
BRICK_DISKS=__BRICK_DISKS__
MODE=__MODE__
BENCH_FILES=__BENCH_FILES__
BENCH_REPS=__BENCH_REPS__

disk() { local s; for s in /sys/block/vd*/serial; do [ "$(cat "$s")" = "$1" ] && { echo "/dev/$(basename "$(dirname "$s")")"; return; }; done; return 1; }
io=$(disk gkio)
now() { cut -d' ' -f1 /proc/uptime; }
log() { echo "[$(now)] $*" | tee -a $R/log.txt; }
pass() { echo "PASS $1: $2" >> $R/results.txt; log "PASS $1: $2"; }
fail() { echo "FAIL $1: $2" >> $R/results.txt; log "FAIL $1: $2"; }
info() { echo "INFO $1: $2" >> $R/results.txt; log "INFO $1: $2"; }
flush() { sync; tar -cf "$io" -C $R . 2>/dev/null; sync; }
finish() { log "finished"; flush; echo o > /proc/sysrq-trigger; sleep 60; }
trap finish EXIT
# run NAME CMD...: runs a command with its output in the log; returns its status.
run() { local name=$1; shift; log "+ $*"; timeout 120 "$@" >> $R/log.txt 2>&1; local rc=$?; [ $rc -eq 0 ] || log "  ($name: exit $rc)"; return $rc; }

info boot "run-test.sh started $(now)s after kernel start; kernel $(uname -r)"
info kernel-config "$(grep -c . /proc/filesystems) filesystems; xfs: $(grep -w xfs /proc/filesystems | tr -s '\t ' ' ')"

# setproj DIR ID: FS_IOC_FSSETXATTR with the project id and FS_XFLAG_PROJINHERIT, as the
# product would do it (no xfs_quota, no /etc/projects).
setproj() {
  python3 - "$1" "$2" <<'PY'
import fcntl, os, struct, sys
FS_IOC_FSGETXATTR, FS_IOC_FSSETXATTR, PROJINHERIT = 0x801c581f, 0x401c5820, 0x200
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
buf = bytearray(fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28)))
xflags, extsize, nextents, projid, cowextsize = struct.unpack_from("=5I", buf)
struct.pack_into("=5I", buf, 0, xflags | PROJINHERIT, extsize, nextents, int(sys.argv[2]), cowextsize)
fcntl.ioctl(fd, FS_IOC_FSSETXATTR, bytes(buf))
xflags, _, _, projid, _ = struct.unpack_from("=5I", fcntl.ioctl(fd, FS_IOC_FSGETXATTR, bytes(28)))
print(f"projid={projid} xflags={xflags:#x}")
PY
}
# projof DIR: "projid=N xflags=0x..." read back with FS_IOC_FSGETXATTR.
projof() {
  python3 - "$1" <<'PY'
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
xflags, _, _, projid, _ = struct.unpack_from("=5I", fcntl.ioctl(fd, 0x801c581f, bytes(28)))
print(f"projid={projid} xflags={xflags:#x}")
PY
}
# write20 FILE ERRNO: writes 20 MiB in 1 MiB writes, then fsync and close; prints where it
# failed and the errno; exit 0 only when it failed with ERRNO (ENOSPC, EDQUOT).
write20() {
  python3 - "$1" "$2" <<'PY'
import errno, os, sys
n, step, want = 0, "open", getattr(errno, sys.argv[2])
try:
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step = "write"
    for _ in range(20):
        os.write(fd, b"\xab" * (1 << 20)); n += 1
    step = "fsync"; os.fsync(fd)
    step = "close"; os.close(fd)
except OSError as e:
    print(f"{errno.errorcode.get(e.errno, e.errno)} ({e.strerror}) at {step} after {n} MiB written")
    sys.exit(0 if e.errno == want else 3)
print(f"no error: all 20 MiB written, fsynced and closed")
sys.exit(2)
PY
}
dfk() { df -k --output=size,used,avail "$1" | tail -1 | tr -s ' ' | sed 's/^ //'; }   # "size used avail" in KiB

# --- bench mode (GK_VM_MODE=bench): instead of the checks below ----------------------------------
# A subdirectory PV's small-file and write speed through FUSE, side by side on three replica-3
# volumes (one brick per XFS disk): vnone (no quota), vgluster (gluster's quota as the product
# would ship it: soft-timeout 1, hard-timeout 0, deem-statfs, a 1 GB limit on /pv) and vproject
# (the PV's size in trusted.glusterkube.pv-size, the agent's XFS project quota on each brick).
# The cases are interleaved, rotated per repetition; every sample carries the VM's load1.
# Writes /results/bench.json; results.txt keeps PASS/FAIL for the setup steps.
if [ "$MODE" = bench ]; then
  tb=$(now)
  host=gkvm
  for i in 1 2 3; do
    m=/data; [ $i = 1 ] || m=/data$i
    mkdir -p $m
    run mount$i mount -o prjquota "$(disk gkdata$i)" $m && pass bench-mount-$i "mount -o prjquota gkdata$i on $m" \
      || { fail bench-mount-$i "see log; dmesg: $(dmesg | grep -i xfs | tail -2 | tr '\n' ' ')"; exit 1; }
  done
  mkdir -p /var/log/glusterfs /var/lib/glusterd
  glusterd --log-file=/var/log/glusterfs/glusterd.log
  ok=false
  for i in $(seq 1 120); do gluster --mode=script pool list >/dev/null 2>&1 && { ok=true; break; }; sleep 1; done
  $ok && pass glusterd-start "glusterd answers after $(awk "BEGIN{print $(now)-$tb}")s" || { fail glusterd-start "glusterd did not answer"; cp -r /var/log/glusterfs $R/; exit 1; }
  gv=$(glusterfs --version | head -1)
  info gluster-version "$gv"
  cases=(none gluster project)
  declare -A prefix=([none]=bn [gluster]=bg [project]=bp)
  for c in "${cases[@]}"; do
    v=v$c; p=${prefix[$c]}; tv=$(now)
    if run create-$v gluster --mode=script volume create $v replica 3 $host:/data/${p}1 $host:/data2/${p}2 $host:/data3/${p}3 force \
      && run start-$v gluster --mode=script volume start $v \
      && mkdir -p /mnt/$v && run mount-$v mount -t glusterfs $host:/$v /mnt/$v && mkdir /mnt/$v/pv; then
      pass bench-volume-$c "$v (replica 3: /data/${p}1 /data2/${p}2 /data3/${p}3) created, started, mounted on /mnt/$v, /pv made in $(awk "BEGIN{print $(now)-$tv}")s"
    else fail bench-volume-$c "$v: see log"; cp -r /var/log/glusterfs $R/; exit 1; fi
  done
  # gluster's quota on vgluster
  g=vgluster
  run quota-enable gluster --mode=script volume quota $g enable && pass bench-gluster-quota-enable "volume quota $g enable" \
    || fail bench-gluster-quota-enable "see log"
  for o in "features.soft-timeout 1" "features.hard-timeout 0" "features.quota-deem-statfs on"; do
    run quota-option gluster --mode=script volume set $g $o && pass bench-gluster-option "volume set $g $o" || fail bench-gluster-option "volume set $g $o: see log"
  done
  # Which spelling of the soft limit 10.3's CLI takes: both are tried, the last accepted stays.
  soft=""
  for s in 80 80%; do
    if run limit-usage gluster --mode=script volume quota $g limit-usage /pv 1GB $s; then
      soft="$soft $s"; info bench-gluster-soft-limit "limit-usage /pv 1GB $s: accepted"
    else info bench-gluster-soft-limit "limit-usage /pv 1GB $s: refused: $(tail -2 $R/log.txt | head -1)"; fi
  done
  l=$(gluster --mode=script volume quota $g list /pv 2>&1 | grep '^/pv' | tr -s ' ')
  [ -n "$soft" ] && echo "$l" | grep -q '1.0GB 80%' && pass bench-gluster-limit "limit-usage /pv 1GB (soft limit accepted as:$soft); quota list: $l" \
    || fail bench-gluster-limit "soft limit accepted as:${soft:- none}; quota list: $l"
  # the agent's project quota on vproject
  if setfattr -n trusted.glusterkube.pv-size -v 1073741824 /mnt/vproject/pv; then
    okp=true; sum=""
    for b in /data/bp1 /data2/bp2 /data3/bp3; do
      log "+ gk-agent projects reconcile --layout replicate $b"
      o=$(timeout 120 gk-agent projects reconcile --layout replicate $b 2>&1); rc=$?
      echo "$o" >> $R/log.txt
      { [ $rc = 0 ] && echo "$o" | grep -q "pv .*assigned: true"; } || okp=false
      sum="$sum $b/pv: $(echo "$o" | grep -o 'id: [0-9]*, limit: [0-9]*, assigned: [a-z]*' | head -1) [$(xfs_io -r -c lsproj $b/pv 2>&1)];"
    done
    $okp && pass bench-project-reconcile "reconcile --layout replicate assigned on each brick:$sum" || fail bench-project-reconcile "exit $rc;$sum"
  else fail bench-project-reconcile "setfattr trusted.glusterkube.pv-size on /mnt/vproject/pv failed"; fi
  # the same performance.* options everywhere (all defaults)
  for c in "${cases[@]}"; do gluster --mode=script volume get v$c all 2>/dev/null | awk '$1 ~ /^performance\./' > $R/options-performance-v$c.txt; done
  if [ -s $R/options-performance-vnone.txt ] && cmp -s $R/options-performance-vnone.txt $R/options-performance-vgluster.txt \
    && cmp -s $R/options-performance-vnone.txt $R/options-performance-vproject.txt; then
    pass bench-options-identical "the $(wc -l < $R/options-performance-vnone.txt) performance.* options are the same on the three volumes"
  else fail bench-options-identical "performance.* options differ: $(diff $R/options-performance-vnone.txt $R/options-performance-vgluster.txt; diff $R/options-performance-vnone.txt $R/options-performance-vproject.txt | tr '\n' ' ')"; fi
  for c in "${cases[@]}"; do info bench-df-$c "df /mnt/v$c/pv (KiB size used avail): $(dfk /mnt/v$c/pv)"; done
  info bench-setup-timing "setup took $(awk "BEGIN{print $(now)-$tb}")s"
  flush
  # bench.py DIR CASE REP N: the five rows in DIR, one JSON sample a line on stdout.
  cat > /tmp/bench.py <<'PY'
import json, os, sys, time
d, case, rep, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
buf4k, buf1m = b"\x5a" * 4096, b"\xa5" * (1 << 20)
def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])
def emit(row, value, unit):
    print(json.dumps({"rep": rep, "case": case, "row": row, "value": round(float(value), 3), "unit": unit, "load1": load1()}), flush=True)
def writeall(fd, b):
    v = memoryview(b)
    while v:
        v = v[os.write(fd, v):]
names = [os.path.join(d, f"f{i:05d}") for i in range(n)]
try:
    t = time.monotonic()
    for p in names:
        fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o644)
        writeall(fd, buf4k)
        os.close(fd)
    emit("create", n / (time.monotonic() - t), "ops/s")
    t = time.monotonic()
    for p in names:
        os.stat(p)
    emit("stat", n / (time.monotonic() - t), "ops/s")
    t = time.monotonic()
    for p in names:
        os.unlink(p)
    emit("unlink", n / (time.monotonic() - t), "ops/s")
    for row, b, count in (("write4k", buf4k, 512), ("write1m", buf1m, 32)):
        p = os.path.join(d, row)
        t = time.monotonic()
        fd = os.open(p, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        for _ in range(count):
            writeall(fd, b)
            os.fsync(fd)
        os.close(fd)
        emit(row, len(b) * count / 1e6 / (time.monotonic() - t), "MB/s")
        os.unlink(p)
finally:
    for p in os.listdir(d):  # what an error left behind
        os.unlink(os.path.join(d, p))
PY
  : > /tmp/samples.jsonl
  for rep in $(seq 0 $((BENCH_REPS - 1))); do
    for k in 0 1 2; do
      c=${cases[$(( (rep + k) % 3 ))]}
      tc=$(now)
      if python3 /tmp/bench.py /mnt/v$c/pv $c $rep $BENCH_FILES >> /tmp/samples.jsonl 2>> $R/log.txt; then
        log "bench rep $rep $c: $(awk "BEGIN{print $(now)-$tc}")s: $(tail -5 /tmp/samples.jsonl | sed 's/.*"row": "\([a-z0-9]*\)", "value": \([0-9.]*\).*/\1 \2/' | tr '\n' ' ')"
      else fail bench-run "rep $rep, $c: $(tail -1 $R/log.txt)"; fi
    done
    cp /tmp/samples.jsonl $R/samples.jsonl; flush
  done
  # bench.json, and the medians per case and row as INFO lines
  python3 - /tmp/samples.jsonl $R/bench.json "$BENCH_FILES" "$BENCH_REPS" "$gv" "$(nproc)" > /tmp/medians.txt <<'PY'
import json, os, statistics, sys
src, dst, n, reps, gv, cpus = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6])
samples = [json.loads(l) for l in open(src) if l.strip()]
doc = {"files": n, "reps": reps, "kernel": os.uname().release, "glusterfs": gv, "vm_cpus": cpus, "samples": samples}
with open(dst, "w") as f:
    json.dump(doc, f, indent=1)
for row in ("create", "stat", "unlink", "write4k", "write1m"):
    cells = []
    for case in ("none", "gluster", "project"):
        v = [s["value"] for s in samples if s["case"] == case and s["row"] == row]
        cells.append(f"{case} {statistics.median(v):.2f}" if v else f"{case} -")
    unit = "MB/s" if row.startswith("write") else "ops/s"
    print(f"bench-median-{row} {', '.join(cells)} {unit} (median of {reps})")
PY
  while read -r name rest; do info "$name" "$rest"; done < /tmp/medians.txt
  ns=$(grep -c . /tmp/samples.jsonl)
  [ -s $R/bench.json ] && [ "$ns" = $((15 * BENCH_REPS)) ] && pass bench-samples "$ns samples (3 cases x 5 rows x $BENCH_REPS reps) in bench.json" \
    || fail bench-samples "$ns samples, wanted $((15 * BENCH_REPS)); bench.json: $(ls -l $R/bench.json 2>&1)"
  info bench-timing "the bench took $(awk "BEGIN{print $(now)-$tb}")s after setup began"
  for c in "${cases[@]}"; do umount /mnt/v$c 2>/dev/null; done
  mkdir -p $R/glusterfs-logs && cp -r /var/log/glusterfs/. $R/glusterfs-logs/ 2>/dev/null
  info total "in-VM run ended at $(now)s after kernel start"
  exit 0
fi

# --- 1. plain XFS ----------------------------------------------------------------------------
t0=$(now)
d1=$(disk gkdata1)
mkdir -p /data
if run mount-prjquota mount -o prjquota,uquota "$d1" /data; then
  pass xfs-mount-prjquota "mount -o prjquota,uquota $d1 /data ($(grep " /data " /proc/mounts | cut -d' ' -f4))"
else
  fail xfs-mount-prjquota "see log; dmesg: $(dmesg | grep -i xfs | tail -2 | tr '\n' ' ')"
  exit 1
fi
run xfs-info xfs_info /data
head -c 1048576 /dev/urandom > /data/ref-src
if run reflink cp --reflink=always /data/ref-src /data/ref-dst && cmp -s /data/ref-src /data/ref-dst; then
  pass xfs-reflink "cp --reflink=always works on the prjquota mount"
else fail xfs-reflink "cp --reflink=always failed"; fi

# 1a. xfs_quota's project -s
mkdir /data/pq1
if run project-s xfs_quota -x -c 'project -s -p /data/pq1 42' /data; then
  pass xfs-quota-project-s "xfs_quota project -s -p /data/pq1 42: $(projof /data/pq1)"
else fail xfs-quota-project-s "xfs_quota project -s failed"; fi
run limit42 xfs_quota -x -c 'limit -p bhard=10m 42' /data || fail xfs-limit "limit -p bhard=10m 42 failed"
s=$(dfk /data/pq1)
[ "${s%% *}" = 10240 ] && pass xfs-df-limit "df /data/pq1 (KiB size used avail): $s" || fail xfs-df-limit "df /data/pq1 (KiB size used avail): $s, wanted size 10240"
out=$(dd if=/dev/zero of=/data/pq1/big bs=1M count=20 conv=fsync 2>&1); rc=$?
echo "$out" >> $R/log.txt
sz=$(du -k /data/pq1/big | cut -f1)
if [ $rc -ne 0 ] && echo "$out" | grep -q 'No space left on device' && [ "$sz" -le 10240 ]; then
  pass xfs-dd-prjquota "dd 20 MiB into /data/pq1 (disk has 380 MiB free): $(echo "$out" | grep -m1 'dd:'); file is $sz KiB"
else fail xfs-dd-prjquota "dd exit $rc, file $sz KiB: $(echo "$out" | head -1)"; fi
rm -f /data/pq1/big
r=$(write20 /data/pq1/big ENOSPC) && pass xfs-write-prjquota "python write loop: $r" || fail xfs-write-prjquota "$r"
rm -f /data/pq1/big

# 1b. the ioctl (what the product would call): FS_IOC_FSSETXATTR, projid + PROJINHERIT
mkdir /data/pq2
if r=$(setproj /data/pq2 43 2>&1); then pass xfs-ioctl-setproj "FS_IOC_FSSETXATTR on /data/pq2: $r"; else fail xfs-ioctl-setproj "$r"; fi
run limit43 xfs_quota -x -c 'limit -p bhard=10m 43' /data
mkdir -p /data/pq2/sub/deeper
info xfs-ioctl-inherit "a new subdirectory inherits: $(projof /data/pq2/sub/deeper)"
s=$(dfk /data/pq2)
[ "${s%% *}" = 10240 ] && pass xfs-ioctl-df-limit "df /data/pq2: $s" || fail xfs-ioctl-df-limit "df /data/pq2: $s, wanted size 10240"
s=$(dfk /data/pq2/sub/deeper)
info xfs-ioctl-df-subdir "df /data/pq2/sub/deeper: $s"
r=$(write20 /data/pq2/sub/deeper/big ENOSPC) && pass xfs-ioctl-write-prjquota "$r" || fail xfs-ioctl-write-prjquota "$r"
rm -f /data/pq2/sub/deeper/big
# raising the limit is seen at once by df (what a volume expansion would do)
run limit43-20 xfs_quota -x -c 'limit -p bhard=20m 43' /data
s=$(dfk /data/pq2); [ "${s%% *}" = 20480 ] && pass xfs-raise-limit "after bhard=20m, df /data/pq2: $s" || fail xfs-raise-limit "df /data/pq2: $s"
run report xfs_quota -x -c 'report -p -b -h' /data
# 1c. a user quota (uid 1000, 5 MiB): EDQUOT
mkdir -m 1777 /data/u
run ulimit xfs_quota -x -c 'limit -u bhard=5m 1000' /data
r=$(setpriv --reuid=1000 --regid=1000 --clear-groups bash -c "$(declare -f write20); write20 /data/u/big EDQUOT") \
  && pass xfs-user-quota-edquot "uid 1000 over its 5 MiB user quota: $r" || fail xfs-user-quota-edquot "$r"
rm -f /data/u/big
info xfs-timing "plain-XFS section took $(awk "BEGIN{print $(now)-$t0}")s"
flush

# --- 2. gluster ------------------------------------------------------------------------------
t1=$(now)
host=gkvm
if [ "$BRICK_DISKS" = 3 ]; then
  for i in 2 3; do mkdir -p /data$i; run mount$i mount -o prjquota,uquota "$(disk gkdata$i)" /data$i || fail gluster-bricks "mount of disk $i failed"; done
  bricks=(/data/b1 /data2/b2 /data3/b3); mounts=(/data /data2 /data3)
else
  bricks=(/data/b1 /data/b2 /data/b3); mounts=(/data /data /data)
fi
info gluster-layout "$BRICK_DISKS XFS disk(s) for the 3 bricks: ${bricks[*]}"
mkdir -p /var/log/glusterfs /var/lib/glusterd
glusterd --log-file=/var/log/glusterfs/glusterd.log
ok=false
for i in $(seq 1 120); do gluster --mode=script pool list >/dev/null 2>&1 && { ok=true; break; }; sleep 1; done
$ok && pass glusterd-start "glusterd answers after $(awk "BEGIN{print $(now)-$t1}")s" || { fail glusterd-start "glusterd did not answer"; cp -r /var/log/glusterfs $R/; exit 1; }
info gluster-version "$(glusterfs --version | head -1)"
tv=$(now)
create() { run volume-create gluster --mode=script volume create v replica 3 "$1:${bricks[0]}" "$1:${bricks[1]}" "$1:${bricks[2]}" force; }
if create $host; then
  pass gluster-volume-create "replica 3 on $host (127.0.1.1, loopback) in $(awk "BEGIN{print $(now)-$tv}")s"
else
  info gluster-volume-create-loopback "refused with $host (127.0.1.1): $(tail -2 $R/log.txt | tr '\n' ' ')"
  # A dummy interface exists only inside this VM, which has no network device at all.
  ip link add d0 type dummy && ip addr add 10.99.0.1/32 dev d0 && ip link set d0 up
  host=10.99.0.1
  create $host && pass gluster-volume-create "replica 3 on $host (dummy interface)" || { fail gluster-volume-create "see log"; cp -r /var/log/glusterfs $R/; exit 1; }
fi
tv=$(now)
run volume-start gluster --mode=script volume start v && pass gluster-volume-start "in $(awk "BEGIN{print $(now)-$tv}")s" || { fail gluster-volume-start "see log"; cp -r /var/log/glusterfs $R/; exit 1; }
grep -h shared-brick-count /var/lib/glusterd/vols/v/*.vol 2>/dev/null | sort | uniq -c | sed 's/^/  /' >> $R/log.txt
# posix divides statfs by shared-brick-count: the number of this volume's bricks on this node
# that share one filesystem (3 when GK_VM_BRICK_DISKS=1). df through gluster is then
# (limit in 4 KiB blocks / count) blocks.
sbc=$(grep -h 'option shared-brick-count' /var/lib/glusterd/vols/v/*.vol 2>/dev/null | awk '{print $3}' | sort -n | tail -1)
sbc=${sbc:-1}
want10=$(( 10240 / 4 / sbc * 4 )); want20=$(( 20480 / 4 / sbc * 4 ))
info gluster-shared-brick-count "$sbc: df through gluster should show $want10 KiB for a 10 MiB project limit"
mkdir -p /mnt/v /mnt/pv
tv=$(now)
run mount-v mount -t glusterfs $host:/v /mnt/v && pass gluster-fuse-mount "$host:/v on /mnt/v in $(awk "BEGIN{print $(now)-$tv}")s" || { fail gluster-fuse-mount "see log"; cp -r /var/log/glusterfs $R/; exit 1; }
info gluster-df-volume "df /mnt/v (KiB size used avail): $(dfk /mnt/v)"
mkdir /mnt/v/pv1 && pass gluster-mkdir "mkdir /mnt/v/pv1" || fail gluster-mkdir "mkdir failed"
for i in 0 1 2; do
  id=$((101 + i))
  [ "$BRICK_DISKS" = 3 ] && id=100
  if r=$(setproj "${bricks[$i]}/pv1" $id 2>&1); then :; else fail gluster-brick-setproj "${bricks[$i]}/pv1: $r"; fi
  run limit xfs_quota -x -c "limit -p bhard=10m $id" "${mounts[$i]}" || fail gluster-brick-limit "limit $id on ${mounts[$i]}"
  info gluster-brick-$((i+1)) "${bricks[$i]}/pv1: $(projof "${bricks[$i]}/pv1"); df $(dfk "${bricks[$i]}/pv1")"
done
sleep 2
s=$(dfk /mnt/v/pv1)
info gluster-df-volume-subdir "df /mnt/v/pv1 (path inside the whole-volume mount): $s"
tv=$(now)
if run mount-pv mount -t glusterfs $host:/v/pv1 /mnt/pv; then
  pass gluster-subdir-mount "$host:/v/pv1 on /mnt/pv in $(awk "BEGIN{print $(now)-$tv}")s"
  s=$(dfk /mnt/pv)
  [ "${s%% *}" = $want10 ] && pass gluster-subdir-df "df of the subdir mount reports the brick's project limit: $s" \
    || fail gluster-subdir-df "df /mnt/pv (KiB size used avail): $s; wanted size $want10"
  run df-all df -k /mnt/pv /mnt/v /mnt/v/pv1 "${bricks[@]/%//pv1}"
else fail gluster-subdir-mount "see log"; fi
tv=$(now)
r=$(write20 /mnt/v/pv1/big ENOSPC); rc=$?
[ $rc = 0 ] && pass gluster-write-prjquota "through /mnt/v: $r ($(awk "BEGIN{print $(now)-$tv}")s)" || fail gluster-write-prjquota "through /mnt/v: $r"
for b in "${bricks[@]}"; do info gluster-brick-file "$b/pv1/big: $(du -k "$b/pv1/big" 2>/dev/null | cut -f1) KiB"; done
rm -f /mnt/v/pv1/big
sleep 1
if mountpoint -q /mnt/pv; then
  out=$(dd if=/dev/zero of=/mnt/pv/big bs=1M count=20 conv=fsync 2>&1); rc=$?
  echo "$out" >> $R/log.txt
  if [ $rc -ne 0 ] && echo "$out" | grep -q 'No space left on device'; then
    pass gluster-subdir-dd-prjquota "dd 20 MiB into the subdir mount: $(echo "$out" | grep 'dd:' | tr '\n' ' ')"
  else fail gluster-subdir-dd-prjquota "dd exit $rc: $(echo "$out" | head -2 | tr '\n' ' ')"; fi
  info gluster-subdir-df-after "df /mnt/pv after the failed write (left in place): $(dfk /mnt/pv)"
  rm -f /mnt/pv/big
  # growing the limit on the bricks (a volume expansion) is seen by the client's df
  for i in 0 1 2; do id=$((101 + i)); [ "$BRICK_DISKS" = 3 ] && id=100; run grow xfs_quota -x -c "limit -p bhard=20m $id" "${mounts[$i]}"; done
  sleep 2
  s=$(dfk /mnt/pv)
  [ "${s%% *}" = $want20 ] && pass gluster-subdir-df-grow "after bhard=20m on the bricks, df /mnt/pv: $s" || fail gluster-subdir-df-grow "df /mnt/pv: $s; wanted size $want20"
fi
# a user quota on every brick (uid 1000, 5 MiB): does the client get EDQUOT?
mkdir -m 1777 /mnt/v/u
for m in $(printf '%s\n' "${mounts[@]}" | sort -u); do run ulimit xfs_quota -x -c 'limit -u bhard=5m 1000' "$m"; done
r=$(setpriv --reuid=1000 --regid=1000 --clear-groups bash -c "$(declare -f write20); write20 /mnt/v/u/big EDQUOT") \
  && pass gluster-user-quota-edquot "uid 1000 over its 5 MiB user quota on the bricks, through FUSE: $r" \
  || fail gluster-user-quota-edquot "uid 1000 through FUSE: $r"
for b in "${bricks[@]}"; do info gluster-brick-file "$b/u/big: owner $(stat -c %u "$b/u/big" 2>/dev/null), $(du -k "$b/u/big" 2>/dev/null | cut -f1) KiB"; done
rm -f /mnt/v/u/big
info gluster-timing "gluster section took $(awk "BEGIN{print $(now)-$t1}")s"
umount /mnt/pv 2>/dev/null; umount /mnt/v 2>/dev/null
flush

# --- 3. the product's quota path: gk-agent projects on the bricks ----------------------------
# What the agent does for a subdirectory PV on a volume whose option user.glusterkube.pv-quota
# is project (the operator sets it when every brick's disk has project quotas): the PV's size
# recorded on its directory through gluster (trusted.glusterkube.pv-size, kept by every
# brick), then on each brick a project id of that brick's filesystem with the inherit flag and
# the layout's per-brick limit. `gk-agent projects keep` is the standing pass the serving agent
# runs at start and every minute: it reads the volumes, their layouts and this node's bricks
# from glusterd, as the agent does. The limit must follow the directory to a brick that gets
# it by replace-brick and heal, and a deleted directory must give its limit back.
t3=$(now)
if [ "$BRICK_DISKS" = 3 ]; then m3=(/data /data2 /data3); else m3=(/data /data /data); fi
agent_ok=true
gk-agent projects check "${m3[0]}" >> $R/log.txt 2>&1 && pass agent-check "gk-agent projects check ${m3[0]}: $(gk-agent projects check "${m3[0]}" 2>&1)" \
  || { fail agent-check "$(gk-agent projects check "${m3[0]}" 2>&1)"; agent_ok=false; }
# vol NAME LAYOUT-WORDS DIRS...: creates and starts a volume on $host with bricks DIRS.
vol() {
  local name=$1 words=$2; shift 2
  local b=(); for d in "$@"; do b+=("$host:$d"); done
  run create-$name gluster --mode=script volume create $name $words "${b[@]}" force \
    && run start-$name gluster --mode=script volume start $name \
    && run option-$name gluster --mode=script volume set $name user.glusterkube.pv-quota project \
    && online $name $# \
    && mkdir -p /mnt/$name && run mount-$name mount -t glusterfs $host:/$name /mnt/$name \
    && sleep 1
}
# online VOL N: waits (up to 30 s) until glusterd shows N bricks of VOL online, so that a
# directory made through a fresh mount lands on every brick (once, one brick still starting
# got pvA only by heal, and every check after it failed).
online() {
  local i; for i in $(seq 1 30); do
    [ "$(gluster --mode=script volume status $1 2>/dev/null | grep -c '^Brick.* Y ')" -ge $2 ] && return 0; sleep 1
  done
  log "  (volume $1: fewer than $2 bricks online after 30 s)"; return 1
}
# pvdir VOL DIR BYTES: the PV's directory through gluster, with its size recorded.
pvdir() { mkdir -p /mnt/$1/$2 && setfattr -n trusted.glusterkube.pv-size -v $3 /mnt/$1/$2; }
# keep: the agent's standing pass for this node (every volume sized by projects); its output
# (a line per directory given a project or limit now) in $R/keep.txt and the log.
roots=$(printf '%s\n' "${m3[@]}" | sort -u | sed 's/^/--brick-root /' | tr '\n' ' ')
keep() { log "+ gk-agent projects keep --address $host $roots"; timeout 120 gk-agent projects keep --address $host $roots > $R/keep.txt 2>&1; local rc=$?; cat $R/keep.txt >> $R/log.txt; return $rc; }
# written FILE: how many MiB of FILE's 1 MiB writes went through before the first error.
written() { local n=0; while [ $n -lt 40 ]; do dd if=/dev/zero of="$1" bs=1M count=1 seek=$n conv=notrunc,fsync status=none 2>/dev/null || break; n=$((n+1)); done; echo $n; }
if $agent_ok; then
  # 3a. replicate 3: every brick enforces the PV's size.
  rb=("${m3[0]}/r1" "${m3[1]}/r2" "${m3[2]}/r3")
  vol rv "replica 3" "${rb[@]}" || fail agent-replicate-volume "see log"
  pvdir rv pvA 10485760
  n=0; for b in "${rb[@]}"; do [ "$(getfattr --only-values -n trusted.glusterkube.pv-size "$b/pvA" 2>/dev/null)" = 10485760 ] && n=$((n+1)); done
  [ $n = 3 ] && pass agent-size-on-bricks "the size set through gluster is on all 3 bricks" || fail agent-size-on-bricks "on $n of 3 bricks"
  keep && [ "$(grep -c '/pvA id=.* limit=10485760' $R/keep.txt)" = 3 ] \
    && pass agent-keep "the agent's pass read rv's layout from glusterd and gave pvA its project and a 10 MiB limit on all 3 bricks" || fail agent-keep "$(tr '\n' ' ' < $R/keep.txt)"
  mkdir -p /mnt/rvpv && run mount-rvpv mount -t glusterfs $host:/rv/pvA /mnt/rvpv
  s=$(dfk /mnt/rvpv); [ "${s%% *}" = $want10 ] && pass agent-replicate-df "df of the PV's mount: $s" || fail agent-replicate-df "df: $s, wanted size $want10"
  w=$(written /mnt/rvpv/big)
  [ "$w" -ge 8 ] && [ "$w" -le 10 ] && pass agent-replicate-full "a 1 MiB-at-a-time writer stopped after $w MiB of a 10 MiB PV (ENOSPC)" \
    || fail agent-replicate-full "the writer stopped after $w MiB of a 10 MiB PV"
  rm -f /mnt/rvpv/big
  # 3b. expansion: the size raised through gluster, the pass raises every brick's limit.
  setfattr -n trusted.glusterkube.pv-size -v 20971520 /mnt/rv/pvA
  keep; sleep 1
  s=$(dfk /mnt/rvpv); [ "${s%% *}" = $want20 ] && pass agent-expand "df after the size was raised and the pass ran: $s" || fail agent-expand "df: $s, wanted $want20"
  # 3c. the limit follows the data: a brick replaced, healed, and the pass on the new brick.
  for i in $(seq 1 12); do head -c 262144 /dev/urandom > /mnt/rvpv/f$i; done
  new="${m3[2]}/r4"
  run replace gluster --mode=script volume replace-brick rv "$host:${rb[2]}" "$host:$new" commit force
  # The self-heal daemon's index crawl runs every heal-timeout (600 s by default): asked for
  # every 10 s here, as the operator's heal does.
  ok=false
  for i in $(seq 1 240); do
    [ $((i % 10)) = 1 ] && gluster --mode=script volume heal rv >/dev/null 2>&1
    [ -f "$new/pvA/f12" ] && [ "$(stat -c %s "$new/pvA/f12")" = 262144 ] && { ok=true; break; }
    sleep 1
  done
  $ok && pass agent-heal "pvA and its files healed to the new brick $new" || fail agent-heal "$(ls -la $new/pvA 2>&1 | head -5 | tr '\n' ' ')"
  [ "$(getfattr --only-values -n trusted.glusterkube.pv-size "$new/pvA" 2>/dev/null)" = 20971520 ] \
    && pass agent-heal-size "the healed directory carries the PV's size" || fail agent-heal-size "no size on $new/pvA"
  before=$(xfs_io -r -c lsproj "$new/pvA" 2>&1)
  keep
  after=$(xfs_io -r -c lsproj "$new/pvA" 2>&1); fileproj=$(xfs_io -r -c lsproj "$new/pvA/f3" 2>&1)
  id=${after##*= }
  used=$(xfs_quota -x -c "quota -p -N -b $id" "${m3[2]}" 2>/dev/null | awk '{print $2, $4}')
  [ "${before##*= }" = 0 ] && [ "$id" != 0 ] && [ "$fileproj" = "$after" ] && [ "${used#* }" = 20480 ] \
    && pass agent-heal-enforced "new brick: pvA had $before, after the pass $after (files too); the project's usage/limit KiB: $used" \
    || fail agent-heal-enforced "before: $before; after: $after; a file: $fileproj; usage/limit: $used"
  # 3d. deletion: the directory removed through gluster (as SubdirDelete does); the answering
  # node releases its brick's project at once, the others at their next pass.
  projid() { local p; p=$(xfs_io -r -c lsproj "$1" 2>&1); echo "${p##*= }"; }
  rid=$(projid "${rb[0]}/pvA"); oid=$(projid "${rb[1]}/pvA")
  # A project with neither use nor limit is not listed at all: read as 0.
  lim() { local v; v=$(xfs_quota -x -c "quota -p -N -b $1" "$2" 2>/dev/null | awk '{print $4}'); echo "${v:-0}"; }
  held=$(lim $rid "${m3[0]}"); oheld=$(lim $oid "${m3[1]}")
  umount /mnt/rvpv
  rm -rf /mnt/rv/pvA
  run release gk-agent projects release "${rb[0]}/pvA" && [ "$rid" != 0 ] && [ "$held" = 20480 ] && [ "$(lim $rid "${m3[0]}")" = 0 ] \
    && pass agent-release "project $rid of ${rb[0]}/pvA held a 20480 KiB limit; released, it has none" \
    || fail agent-release "project ${rid:-?} limit before: ${held:-?}, after: $(lim $rid "${m3[0]}")"
  keep
  [ "$oid" != 0 ] && [ "$oheld" = 20480 ] && [ "$(lim $oid "${m3[1]}")" = 0 ] && ! grep -q '"r2/pvA"' "${m3[1]}/.glusterkube-projects.json" \
    && pass agent-release-gone "the pass released ${rb[1]}/pvA's project $oid (20480 KiB before, none after; gone from the registry)" \
    || fail agent-release-gone "project ${oid:-?} limit before: ${oheld:-?}, after: $(lim $oid "${m3[1]}"); registry: $(tr -d '\n ' < "${m3[1]}/.glusterkube-projects.json" | head -c 300)"
  umount /mnt/rv
  # 3e. arbiter: the two data bricks and the arbiter enforce the PV's size.
  ab=("${m3[0]}/a1" "${m3[1]}/a2" "${m3[2]}/a3")
  # Here by SubdirEnforce's path: one directory, the volume read from glusterd.
  vol av "replica 3 arbiter 1" "${ab[@]}" && pvdir av pvA 10485760 \
    && o=$(timeout 60 gk-agent projects enforce-dir --address $host --volume av /pvA 2>&1) \
    && echo "$o" >> $R/log.txt && [ "$(echo "$o" | grep -c 'limit=10485760')" = 3 ] \
    && w=$(written /mnt/av/pvA/big) && [ "$w" -ge 8 ] && [ "$w" -le 10 ] \
    && pass agent-arbiter-full "arbiter: the writer stopped after $w MiB of a 10 MiB PV" || fail agent-arbiter-full "arbiter: stopped after ${w:-?} MiB"
  umount /mnt/av
  # 3f. disperse 2+1: each brick holds half; the PV still holds its size.
  db=("${m3[0]}/d1" "${m3[1]}/d2" "${m3[2]}/d3")
  vol dv "disperse 3 redundancy 1" "${db[@]}" && pvdir dv pvA 10485760 && keep \
    && w=$(written /mnt/dv/pvA/big) && [ "$w" -ge 8 ] && [ "$w" -le 10 ] \
    && pass agent-disperse-full "disperse 2+1: the writer stopped after $w MiB of a 10 MiB PV (each brick limited to 5 MiB)" \
    || fail agent-disperse-full "disperse 2+1: stopped after ${w:-?} MiB"
  umount /mnt/dv
  # 3g. the serving agent: `gk-agent serve` over mutual TLS, a PV's life through its RPCs
  # (Health, SubdirCreate, SubdirEnforce, SubdirGet, SubdirExpand, SubdirList, SubdirDelete)
  # on a replica-3 volume sized by projects, each step checked on the bricks.
  pb=("${m3[0]}/p1" "${m3[1]}/p2" "${m3[2]}/p3")
  # 3h. A pool made with gluster's quota (a PV of 10 MiB holding 3 MiB), then moved by the
  # agent's PvQuotaMove once its option says project: the client drives it after 3g.
  mb=("${m3[0]}/m1" "${m3[1]}/m2" "${m3[2]}/m3")
  run create-mv gluster --mode=script volume create mv replica 3 "$host:${mb[0]}" "$host:${mb[1]}" "$host:${mb[2]}" force \
    && run start-mv gluster --mode=script volume start mv && online mv 3 \
    && run quota-mv gluster --mode=script volume quota mv enable \
    && mkdir -p /mnt/mv && run mount-mv mount -t glusterfs $host:/mv /mnt/mv && sleep 1 \
    && mkdir /mnt/mv/pvc-old && run limit-mv gluster --mode=script volume quota mv limit-usage /pvc-old 10MB \
    && dd if=/dev/urandom of=/mnt/mv/pvc-old/data bs=1M count=3 conv=fsync status=none \
    && run option-mv gluster --mode=script volume set mv user.glusterkube.pv-quota project \
    && umount /mnt/mv && export GK_MOVE_VOLUME=mv || fail move-setup "volume mv: see log"
  if vol pv "replica 3" "${pb[@]}"; then
    umount /mnt/pv 2>/dev/null
    log "+ vm-agent-rpcs gk-agent $host pv $(printf '%s\n' "${m3[@]}" | sort -u | tr '\n' ' ')"
    timeout 300 vm-agent-rpcs /usr/local/bin/gk-agent $host pv $(printf '%s\n' "${m3[@]}" | sort -u) > $R/rpcs.txt 2>> $R/log.txt
    rc=$?
    cat $R/rpcs.txt >> $R/results.txt; cat $R/rpcs.txt >> $R/log.txt
    cat /run/gk-agent.log >> $R/log.txt 2>/dev/null
    [ $rc = 0 ] || grep -q '^FAIL' $R/rpcs.txt || fail agent-rpcs "vm-agent-rpcs exit $rc with no FAIL line"
    # After the move: the PV holds its size by project quota, gluster's quota off (ENOSPC,
    # where gluster's quota answered EDQUOT).
    if [ -n "${GK_MOVE_VOLUME:-}" ] && grep -q '^PASS move-finish' $R/rpcs.txt; then
      mount -t glusterfs $host:/mv /mnt/mv && sleep 1
      r=$(write20 /mnt/mv/pvc-old/big ENOSPC); rc=$?
      # The client's write-behind acknowledges some writes before a brick's ENOSPC comes back
      # (as in section 2): what counts is what the bricks hold.
      held=$(du -sk "${mb[0]}/pvc-old" | cut -f1)
      [ $rc = 0 ] && [ "$held" -le 10240 ] && pass move-enforced "after the move, a writer in the 10 MiB PV holding 3 MiB: $r; the brick holds $held KiB" \
        || fail move-enforced "$r; the brick holds $held KiB"
      umount /mnt/mv
    fi
  else fail agent-rpcs "volume pv: see log"; fi
fi
info agent-timing "the agent section took $(awk "BEGIN{print $(now)-$t3}")s"
mkdir -p $R/glusterfs-logs && cp -r /var/log/glusterfs/. $R/glusterfs-logs/ 2>/dev/null
info total "in-VM run ended at $(now)s after kernel start"
RUN
}

# --- one run ----------------------------------------------------------------------------------
run_dir="$vm/runs/$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$run_dir/ir"
run_test | sed -e "s/__BRICK_DISKS__/$brick_disks/" -e "s/__MODE__/$mode/" \
  -e "s/__BENCH_FILES__/$bench_files/" -e "s/__BENCH_REPS__/$bench_reps/" > "$run_dir/ir/run-test.sh"
chmod 755 "$run_dir/ir/run-test.sh"
cp "$agent" "$run_dir/ir/gk-agent"
cp "$rpcs" "$run_dir/ir/vm-agent-rpcs"
(cd "$run_dir/ir" && printf '%s\n' run-test.sh gk-agent vm-agent-rpcs | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$run_dir/run.cpio.gz"
cat "$initrd" "$run_dir/run.cpio.gz" > "$run_dir/initrd"
rm -rf "$run_dir/ir" "$run_dir/run.cpio.gz"

drives=()
ndata=1; [ "$brick_disks" = 3 ] && ndata=3
for i in $(seq 1 "$ndata"); do
  truncate -s 384M "$run_dir/data$i.img"
  mkfs.xfs -q -m reflink=1 "$run_dir/data$i.img"
  drives+=(-drive "file=$run_dir/data$i.img,format=raw,if=none,id=data$i,cache=unsafe"
    -device "virtio-blk-pci,drive=data$i,serial=gkdata$i")
done
truncate -s 64M "$run_dir/io.img"

gk_log "$mode mode$([ "$mode" = test ] || echo " ($bench_files files, $bench_reps reps)")"
gk_log "booting $kpkg under TCG ($smp vCPUs, ${mem} MiB, no network; timeout ${timeout_s}s); console: $run_dir/console.log"
start=$(date +%s.%N)
rc=0
timeout --kill-after=15 "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp "$smp" -m "$mem" \
  -nodefaults -nic none -display none -monitor none -no-reboot \
  -serial "file:$run_dir/console.log" \
  -kernel "$kdir/vmlinuz" -initrd "$run_dir/initrd" \
  -append "console=ttyS0 loglevel=4 panic=-1 quiet" \
  -drive "file=$rootimg,format=raw,if=none,id=root,snapshot=on" \
  -device virtio-blk-pci,drive=root,serial=gkroot \
  "${drives[@]}" \
  -drive "file=$run_dir/io.img,format=raw,if=none,id=io" \
  -device virtio-blk-pci,drive=io,serial=gkio \
  || rc=$?
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
rm -f "$run_dir"/data*.img "$run_dir/initrd"

mkdir -p "$run_dir/results"
tar -xf "$run_dir/io.img" -C "$run_dir/results" 2>/dev/null || true
rm -f "$run_dir/io.img"
ln -sfn "$(basename "$run_dir")" "$vm/runs/last"
# Keep the last five runs.
ls -1d "$vm/runs/"2*/ 2>/dev/null | head -n -5 | xargs -r rm -rf

results="$run_dir/results/results.txt"
echo "== results ($run_dir/results) =="
if [ -s "$results" ]; then cat "$results"; else echo "(no results came out of the VM)"; tail -30 "$run_dir/console.log" || true; fi
echo "== qemu exit $rc after ${elapsed}s wall time =="
[ "$rc" = 124 ] || [ "$rc" = 137 ] && gk_log "the VM timed out after ${timeout_s}s"
npass=$(grep -c '^PASS' "$results" 2>/dev/null || true)
nfail=$(grep -c '^FAIL' "$results" 2>/dev/null || true)
echo "${npass:-0} passed, ${nfail:-0} failed"
bench_ok=true
if [ "$mode" = bench ]; then
  bench="$run_dir/results/bench.json"
  # (json.dump writes each sample's "row" key once, as "row": "...")
  nsamples=$(grep -o '"row": "' "$bench" 2>/dev/null | wc -l || true)
  echo "bench: $bench ($nsamples samples, wanted $((15 * bench_reps)))"
  [ -s "$bench" ] && [ "$nsamples" = $((15 * bench_reps)) ] || bench_ok=false
fi
if [ "$rc" = 0 ] && [ "${nfail:-0}" = 0 ] && [ "${npass:-0}" -gt 0 ] && grep -q '^INFO total' "$results" && $bench_ok; then
  exit 0
fi
exit 1
