#!/bin/sh
# Brick pod entrypoint: prepares node-local storage, then runs glusterd and the brick agent.
# If either exits, the pod exits and the kubelet restarts it.
set -eu

state=${GK_STATE_DIR:-/var/lib/glusterkube}
device=${GK_DEVICE:-}

log() { echo "gk-brick: $*" >&2; }

# Brick filesystems we mount. allocsize fixes XFS's preallocation beyond a growing file's end
# at 64 KiB: gluster's quota counts a file's blocks (marker), and XFS's dynamic default
# reserved up to the file's size again while it grew (a 20 MiB file appended with fdatasync
# held 31 MiB of blocks until closed), which a PV's limit would count as used.
xfs_options=inode64,noatime,allocsize=64k

# Mounts the XFS device $1 at $2 with project quotas (prjquota), so that the agent can size
# subdirectory PVs with the brick filesystem's own quota (brick-image/agent/src/projects);
# XFS cannot turn them on later by a remount. A kernel without XFS quota support refuses
# prjquota: the disk is then mounted without, and its bricks' PVs keep gluster's quota.
mount_xfs() {
  if mount -t xfs -o "$xfs_options,prjquota" "$1" "$2" 2>/dev/null; then
    log "$1 mounted with project quotas"
  else
    log "$1: this kernel or filesystem refused project quotas (prjquota); mounted without them, so PVs on its bricks keep gluster's quota"
    mount -t xfs -o "$xfs_options" "$1" "$2"
  fi
}

# The brick roots the agent serves, comma-separated: the one of a single device or directory,
# or one per disk.
roots="$state/bricks"

if [ -n "$device" ]; then
  # The spec's path may be a link (/dev/disk/by-id/...): what it names must be a block
  # device under /dev, not anything a link could lead to.
  real=$(readlink -f "$device" || true)
  case $real in
    /dev/*) ;;
    *) log "GK_DEVICE=$device resolves to ${real:-nothing}, outside /dev; refusing it"; exit 1 ;;
  esac
  [ -b "$real" ] || { log "GK_DEVICE=$device ($real) is not a block device"; exit 1; }
  device=$real
  # A partition table means the disk is in use, even with no filesystem on the whole disk.
  pttype=$(blkid -p -s PTTYPE -o value "$device" 2>/dev/null || true)
  [ -z "$pttype" ] || { log "$device holds a $pttype partition table; refusing to format or use it (wipe it by hand if it is really free)"; exit 1; }
  # Format only a device that holds no filesystem at all: never touch existing data.
  if ! blkid -p "$device" >/dev/null 2>&1; then
    # 512-byte inodes leave room for gluster's xattrs; reflink (the default of recent
    # xfsprogs, named so it stays on) lets the brick filesystem share blocks between copies.
    log "formatting $device as XFS (512-byte inodes, reflink on)"
    mkfs.xfs -i size=512 -m reflink=1 "$device"
  fi
  fstype=$(blkid -p -s TYPE -o value "$device" || true)
  [ "$fstype" = xfs ] || { log "$device holds a $fstype filesystem, not XFS; refusing to use it"; exit 1; }
  mkdir -p "$state"
  mountpoint -q "$state" || mount_xfs "$device" "$state"
fi

# Several disks (GK_DEVICES, GK_DIRECTORIES): each is mounted at $state/disks/<id>, where
# <id> is kept in a marker file at the disk's root with the cluster that owns it, so a disk
# keeps its bricks whatever order the spec lists it in, and no two clusters share one.
marker=.glusterkube-disk
owner=${GK_OWNER:-}
if [ -n "${GK_DEVICES:-}${GK_DIRECTORIES:-}" ]; then
  [ -n "$owner" ] || { log "GK_OWNER (namespace/cluster) is not set"; exit 1; }
  roots=""
  mkdir -p "$state/disks"
fi

# Prints the id of the disk mounted at $1 ($2 names it in messages) when it is this
# cluster's; with $3 = new, an unmarked disk becomes this cluster's. Fails otherwise.
claim() {
  m="$1/$marker"
  if [ -f "$m" ]; then
    o=$(sed -n 's/^owner=//p' "$m")
    id=$(sed -n 's/^id=//p' "$m")
    [ "$o" = "$owner" ] || { log "$2 belongs to glusterkube cluster $o, not $owner"; return 1; }
    case $id in ''|*[!0-9a-f-]*) log "$2: $m holds no valid id"; return 1 ;; esac
  else
    [ "$3" = new ] || { log "$2 holds a filesystem this cluster did not make"; return 1; }
    id=$(cat /proc/sys/kernel/random/uuid)
    printf 'owner=%s\nid=%s\n' "$owner" "$id" >"$m.tmp"
    mv "$m.tmp" "$m"
  fi
  echo "$id"
}

add_disk() {
  mkdir -p "$state/disks/$1/bricks"
  roots="${roots:+$roots,}$state/disks/$1/bricks"
}

seen=" "
# use_device PATH named: a device named by path (refused loudly when unusable) or matched by
# a pattern (left alone, with a log line, unless empty or already this cluster's).
use_device() {
  real=$(readlink -f "$1" || true)
  case $seen in *" $real "*) return 0 ;; esac
  seen="$seen$real "
  case $real in
    /dev/*) ;;
    *) log "$1 resolves to ${real:-nothing}, outside /dev"; [ "$2" = named ] && exit 1; return 0 ;;
  esac
  if [ ! -b "$real" ]; then
    log "$1 ($real) is not a block device"; [ "$2" = named ] && exit 1; return 0
  fi
  pttype=$(blkid -p -s PTTYPE -o value "$real" 2>/dev/null || true)
  if [ -n "$pttype" ]; then
    log "$1 ($real) holds a $pttype partition table; leaving it alone (wipe it by hand if it is really free)"
    [ "$2" = named ] && exit 1; return 0
  fi
  fresh=""
  if ! blkid -p "$real" >/dev/null 2>&1; then
    log "formatting $1 ($real) as XFS (512-byte inodes, reflink on)"
    mkfs.xfs -q -i size=512 -m reflink=1 "$real"
    fresh=new
  fi
  fstype=$(blkid -p -s TYPE -o value "$real" || true)
  if [ "$fstype" != xfs ]; then
    log "$1 ($real) holds a ${fstype:-unknown} filesystem, not XFS; leaving it alone"
    [ "$2" = named ] && exit 1; return 0
  fi
  tmp="$state/disks/.probe"
  mkdir -p "$tmp"
  if [ "$2" != named ] && [ -z "$fresh" ]; then
    # An XFS a pattern found may be someone's data: look without writing (no log replay).
    mount -t xfs -o ro,norecovery "$real" "$tmp" || { log "$1 ($real) cannot be mounted; leaving it alone"; return 0; }
    ours=$(sed -n 's/^owner=//p' "$tmp/$marker" 2>/dev/null || true)
    umount "$tmp"
    [ "$ours" = "$owner" ] || { log "$1 ($real) holds an XFS filesystem this cluster did not make; leaving it alone"; return 0; }
  fi
  mount_xfs "$real" "$tmp"
  # A device named by path is the user's choice, as `device` is: an unmarked XFS becomes ours.
  [ "$2" = named ] && fresh=new
  if ! id=$(claim "$tmp" "$1 ($real)" "${fresh:-$2}"); then
    umount "$tmp"
    [ "$2" = named ] && exit 1; return 0
  fi
  mkdir -p "$state/disks/$id"
  mount --move "$tmp" "$state/disks/$id"
  log "$1 ($real) is disk $id"
  add_disk "$id"
}

# for_each LIST FUNC: FUNC ENTRY for each entry of the comma-separated LIST, split on commas
# only, with no pathname expansion until a pattern is matched on purpose.
for_each() {
  old_ifs=$IFS
  set -f
  IFS=,
  for entry in $1; do
    IFS=$old_ifs
    set +f
    "$2" "$entry"
    set -f
    IFS=,
  done
  set +f
  IFS=$old_ifs
}

# A device entry: a pattern (matched here, on the node; no match leaves the pattern itself,
# which is no device) or a path.
device_entry() {
  case ${1##*/} in
    *[*?[]*)
      for d in $1; do
        if [ -e "$d" ]; then use_device "$d" matched; fi
      done ;;
    *) use_device "$1" named ;;
  esac
}

directory_entry() {
  [ -d "$1" ] || { log "$1 is not a directory"; exit 1; }
  id=$(claim "$1" "directory $1" new) || exit 1
  mkdir -p "$state/disks/$id"
  mountpoint -q "$state/disks/$id" || mount --bind "$1" "$state/disks/$id"
  add_disk "$id"
}

[ -z "${GK_DEVICES:-}" ] || for_each "$GK_DEVICES" device_entry
[ -z "${GK_DIRECTORIES:-}" ] || for_each "$GK_DIRECTORIES" directory_entry

if [ -z "$roots" ]; then
  log "none of GK_DEVICES (${GK_DEVICES:-}) is a disk this cluster may use; see the lines above"
  exit 1
fi

mkdir -p "$state/glusterd" "$state/log" "$state/mounts"
[ -n "${GK_DEVICES:-}${GK_DIRECTORIES:-}" ] || mkdir -p "$state/bricks"
# glusterd keeps its UUID and the pool's state in /var/lib/glusterd.
for pair in "/var/lib/glusterd:$state/glusterd" "/var/log/glusterfs:$state/log"; do
  link=${pair%%:*}; target=${pair#*:}
  if [ ! -L "$link" ]; then
    if [ -d "$link" ] && [ -z "$(ls -A "$target")" ]; then cp -a "$link/." "$target/"; fi
    rm -rf "$link"
    ln -s "$target" "$link"
  fi
done

# Gluster's management TLS is on while secure-access exists; the operator sets GK_GLUSTER_TLS
# and mounts the certificate (glusterfs.pem, .key, .ca) in OpenSSL's directory.
case ${GK_GLUSTER_TLS:-off} in
  on)
    [ -s /usr/lib/ssl/glusterfs.pem ] || { log "GK_GLUSTER_TLS=on but /usr/lib/ssl/glusterfs.pem is missing"; exit 1; }
    touch /var/lib/glusterd/secure-access ;;
  off) rm -f /var/lib/glusterd/secure-access ;;
  *) log "GK_GLUSTER_TLS must be on or off, not $GK_GLUSTER_TLS"; exit 1 ;;
esac

glusterd -N --log-file=- &
glusterd_pid=$!
gk-agent serve --brick-root "$roots" --mount-root "$state/mounts" &
agent_pid=$!

stopping=0
stop() { stopping=1; kill -TERM "$agent_pid" "$glusterd_pid" 2>/dev/null || true; }
trap stop TERM INT

# Exit as soon as either process ends (or on SIGTERM), then stop the other.
while [ "$stopping" = 0 ] && kill -0 "$glusterd_pid" 2>/dev/null && kill -0 "$agent_pid" 2>/dev/null; do
  sleep 1
done
[ "$stopping" = 1 ] && graceful=1 || graceful=0
stop
wait "$agent_pid" 2>/dev/null || true
wait "$glusterd_pid" 2>/dev/null || true
[ "$graceful" = 1 ] && exit 0
log "glusterd or the agent stopped; exiting so the pod restarts"
exit 1
