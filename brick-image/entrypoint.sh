#!/bin/sh
# Brick pod entrypoint: prepares node-local storage, then runs glusterd and the brick agent.
# If either exits, the pod exits and the kubelet restarts it.
set -eu

state=${GK_STATE_DIR:-/var/lib/glusterkube}
device=${GK_DEVICE:-}

log() { echo "gk-brick: $*" >&2; }

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
  mountpoint -q "$state" || mount -t xfs -o inode64,noatime "$device" "$state"
fi

mkdir -p "$state/glusterd" "$state/log" "$state/bricks" "$state/mounts"
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
gk-agent serve --brick-root "$state/bricks" --mount-root "$state/mounts" &
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
