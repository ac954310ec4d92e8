//! Subdirectory limits.
//!
//! A limit takes effect when the directory carries gluster's limit attribute: the quota
//! translator on every brick enforces it and `df` on a subdirectory mount shows it. The agent
//! sets that attribute itself, through its management mount (an internal quota client), which
//! costs one setxattr. `gluster volume quota limit-usage` sets the same attribute but is a
//! glusterd transaction across the pool, over 50 ms even on an idle machine; it is still run,
//! in the background, so that glusterd's own list (`volume quota list`) knows every limit.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_gluster::{CommandRunner, Gluster};
use tokio::sync::mpsc;

use crate::locks::VolumeLocks;
use crate::AgentError;

/// The attribute a client sets; bricks store it under a versioned name.
pub const LIMIT_XATTR: &str = "trusted.glusterfs.quota.limit-set";
/// The bytes used below a directory, summed over the bricks, as quota clients read it.
pub const SIZE_XATTR: &str = "trusted.glusterfs.quota.size";
/// `soft_limit_exceeded` in SubdirList answers means this full, gluster's default soft limit,
/// whatever soft limit a directory carries for checking (see [`soft_limit_percent`]).
const REPORTED_SOFT_LIMIT_PERCENT: u64 = 80;

/// How long to wait before retrying a registration glusterd refused.
const RETRY_DELAY: Duration = Duration::from_secs(5);

/// How often a brick re-reads a directory's usage (through quotad, which sums it over the
/// bricks) while the usage is below the directory's soft limit: at most once per this many
/// seconds (`features.soft-timeout`). Above the soft limit it is re-read on every write
/// (`features.hard-timeout` 0), so a write that would cross the hard limit is refused.
pub const SOFT_TIMEOUT_SECONDS: u32 = 1;
pub const HARD_TIMEOUT_SECONDS: u32 = 0;

/// What may be written between two reads of a directory's usage below its soft limit, with
/// room to spare: the soft limit sits this far below the hard limit (or at 1 % for limits
/// this small), so a writer would have to write this much within about two seconds (one
/// soft-timeout, rounded to whole seconds) to cross the hard limit unchecked.
pub const CHECKED_MARGIN_BYTES: u64 = 512 << 20;

/// The soft limit, in percent of `hard_limit_bytes`, that leaves [`CHECKED_MARGIN_BYTES`]
/// above it: at most gluster's default 80 %, at least 1 %.
///
/// Re-reading the usage on every write cost a subdirectory PV more than half of its write
/// throughput (issue 16: 19–23 MB/s on the demo, 49 MB/s with usage re-read less often).
/// Re-reading it at most once a second below the soft limit, with this margin, loses no
/// exactness for writers slower than the margin per two seconds.
pub fn soft_limit_percent(hard_limit_bytes: u64) -> u8 {
    if hard_limit_bytes <= CHECKED_MARGIN_BYTES {
        return 1;
    }
    let below = hard_limit_bytes - CHECKED_MARGIN_BYTES;
    // Rounded down, so the margin is never smaller than asked.
    let percent = (below as u128 * 100 / hard_limit_bytes as u128) as u8;
    percent.clamp(1, 80)
}

/// The attribute's value: the hard limit and the soft limit percentage as big-endian i64,
/// as glusterd writes it for `limit-usage PATH SIZE PERCENT`.
pub fn encode_limit(hard_limit_bytes: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&(hard_limit_bytes as i64).to_be_bytes());
    v[8..].copy_from_slice(&(soft_limit_percent(hard_limit_bytes) as i64).to_be_bytes());
    v
}

/// The hard limit in a limit attribute; `None` for a value that is not one.
pub fn decode_limit(value: &[u8]) -> Option<u64> {
    let hard = i64::from_be_bytes(value.get(..8)?.try_into().ok()?);
    (value.len() == 16 && hard > 0).then_some(hard as u64)
}

/// The hard limit set on `dir`, if any. `dir` must be on a quota-client mount: ordinary
/// clients do not see the attribute.
pub fn read_limit(dir: &Path) -> Result<Option<u64>, AgentError> {
    let mut buf = [0u8; 64];
    match rustix::fs::getxattr(dir, LIMIT_XATTR, &mut buf) {
        Ok(n) => decode_limit(&buf[..n]).map(Some).ok_or_else(|| {
            AgentError::Conflict(format!(
                "{} carries a quota limit this agent cannot read ({n} bytes); \
                 inspect it with `gluster volume quota list`",
                dir.display()
            ))
        }),
        Err(rustix::io::Errno::NODATA) => Ok(None),
        Err(e) => Err(AgentError::Io {
            what: format!("reading the quota limit of {}", dir.display()),
            source: e.into(),
        }),
    }
}

/// As [`read_limit`], with a directory that does not exist (deleted meanwhile) read as having
/// no limit.
pub fn read_limit_if_present(dir: &Path) -> Result<Option<u64>, AgentError> {
    match read_limit(dir) {
        Err(AgentError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        other => other,
    }
}

/// A PV directory's size: gluster's limit on it, or the size recorded for the bricks'
/// project quotas (`crate::projects`); None when it has neither or does not exist.
pub fn read_pv_size(dir: &Path) -> Result<Option<u64>, AgentError> {
    // The recorded size first: a directory moved to project quotas may keep gluster's old
    // limit attribute after gluster's quota is off, and its size may have grown since.
    if let Some(size) = recorded_size_if_present(dir)? {
        return Ok(Some(size));
    }
    read_limit_if_present(dir)
}

/// The size recorded for project quotas on `dir`; None when absent or `dir` is gone.
fn recorded_size_if_present(dir: &Path) -> Result<Option<u64>, AgentError> {
    match crate::projects::recorded_size(dir) {
        Err(crate::projects::ProjectError::Io(_, e))
            if e.kind() == std::io::ErrorKind::NotFound =>
        {
            Ok(None)
        }
        other => Ok(other?),
    }
}

/// Bytes used in a directory sized by project quotas, from its statfs: the brick
/// filesystems report the project's use there.
fn project_used(dir: &Path) -> Result<u64, AgentError> {
    rustix::fs::statvfs(dir)
        .map(|st| st.f_blocks.saturating_sub(st.f_bfree) * st.f_frsize)
        .map_err(|e| AgentError::Io {
            what: format!("reading the use of {}", dir.display()),
            source: e.into(),
        })
}

/// Bytes used below `dir` as quota accounts them (0 before anything was written).
pub fn read_used(dir: &Path) -> Result<u64, AgentError> {
    let mut buf = [0u8; 64];
    match rustix::fs::getxattr(dir, SIZE_XATTR, &mut buf) {
        // Newer bricks add file and directory counts after the size.
        Ok(n) if n >= 8 => {
            Ok(i64::from_be_bytes(buf[..8].try_into().expect("8 bytes")).max(0) as u64)
        }
        Ok(_) | Err(rustix::io::Errno::NODATA) => Ok(0),
        Err(e) => Err(AgentError::Io {
            what: format!("reading the quota usage of {}", dir.display()),
            source: e.into(),
        }),
    }
}

/// A directory with a limit, as [`list_top_level`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// Absolute inside the volume, as gluster names quota paths.
    pub path: String,
    pub limit_bytes: u64,
    pub used_bytes: u64,
    /// Sized by the bricks' project quotas (its recorded size), not gluster's quota.
    pub by_projects: bool,
}

impl Limited {
    pub fn soft_limit_exceeded(&self) -> bool {
        self.used_bytes.saturating_mul(100) >= self.limit_bytes * REPORTED_SOFT_LIMIT_PERCENT
    }
}

/// Top-level directories under `root` (a quota-client mount) that carry a limit. Blocking.
pub fn list_top_level(root: &Path) -> Result<Vec<Limited>, AgentError> {
    let what = || format!("listing {}", root.display());
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).map_err(AgentError::io(what()))? {
        let entry = entry.map_err(AgentError::io(what()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Gluster's own directories (.trashcan, .glusterfs-anonymous-inode-*) are not PVs.
        if name.starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        // A recorded size means project quotas size it (or will: a pool moving to them).
        match recorded_size_if_present(&dir) {
            Ok(Some(limit_bytes)) => {
                out.push(Limited {
                    path: format!("/{name}"),
                    limit_bytes,
                    used_bytes: project_used(&dir)?,
                    by_projects: true,
                });
                continue;
            }
            Ok(None) => {}
            Err(e) => return Err(e),
        }
        match read_limit(&dir) {
            Ok(Some(limit_bytes)) => out.push(Limited {
                path: format!("/{name}"),
                limit_bytes,
                used_bytes: read_used(&dir)?,
                by_projects: false,
            }),
            Ok(None) => {}
            // Deleted while listing.
            Err(AgentError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            }
            Err(e) => return Err(e),
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// Sets the hard limit on `dir`, effective at once on every brick that is up (self-heal
/// copies it to the others).
pub fn write_limit(dir: &Path, hard_limit_bytes: u64) -> Result<(), AgentError> {
    rustix::fs::setxattr(
        dir,
        LIMIT_XATTR,
        &encode_limit(hard_limit_bytes),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(|e| AgentError::Io {
        what: format!("setting the quota limit of {}", dir.display()),
        source: e.into(),
    })
}

/// Set on the directories an agent for a pool made by hand creates: only those are ever
/// deleted there. A trusted attribute, which the PV's users cannot see or change.
pub const MADE_XATTR: &str = "trusted.glusterkube.made";

/// Marks `dir` (on the management mount) as made by this driver.
pub fn mark_made(dir: &Path) -> Result<(), AgentError> {
    rustix::fs::setxattr(dir, MADE_XATTR, b"1", rustix::fs::XattrFlags::empty()).map_err(|e| {
        AgentError::Io {
            what: format!("marking {} as made by glusterkube", dir.display()),
            source: e.into(),
        }
    })
}

/// Whether `dir` carries the mark of [`mark_made`].
pub fn made_here(dir: &Path) -> Result<bool, AgentError> {
    let mut buf = [0u8; 8];
    match rustix::fs::getxattr(dir, MADE_XATTR, &mut buf) {
        Ok(_) => Ok(true),
        Err(rustix::io::Errno::NODATA) => Ok(false),
        Err(e) => Err(AgentError::Io {
            what: format!("reading the glusterkube mark of {}", dir.display()),
            source: e.into(),
        }),
    }
}

type Key = (String, String);

enum Job {
    Register(Key),
    /// Limits found on a volume's directories, to compare with glusterd's list.
    Resync {
        volume: String,
        limits: Vec<(String, u64)>,
        attempt: u32,
    },
}

/// How often a resync whose `quota list` failed is tried again.
const RESYNC_ATTEMPTS: u32 = 5;

/// The directories whose limit glusterd's list lacks or holds with another value.
pub fn unregistered(limits: &[(String, u64)], listed: &[gk_gluster::QuotaEntry]) -> Vec<String> {
    limits
        .iter()
        .filter(|(path, limit)| {
            !listed
                .iter()
                .any(|q| &q.path == path && q.hard_limit_bytes == *limit)
        })
        .map(|(path, _)| path.clone())
        .collect()
}

/// Registers limits with glusterd in the background, one transaction at a time, under the
/// volume's lock so that it never races the agent's own gluster transactions on that volume.
///
/// A registration carries no value: it reads the directory's limit attribute (set by the
/// agent, the truth) when it runs, so a late or repeated registration can never bring back
/// an older limit.
#[derive(Clone)]
pub struct Registrar {
    tx: mpsc::UnboundedSender<Job>,
    /// Registrations still to make, with the request's sequence number: a registration only
    /// clears its entry if no newer request came meanwhile.
    pending: Arc<Mutex<HashMap<Key, u64>>>,
    sequence: Arc<std::sync::atomic::AtomicU64>,
    /// Volumes whose resync has not yet queued what it found.
    resyncing: Arc<Mutex<HashMap<String, usize>>>,
}

impl Registrar {
    /// `mount_root` holds the agent's management mount of each volume, named after it.
    pub fn start<R: CommandRunner + 'static>(
        gluster: Gluster<R>,
        locks: VolumeLocks,
        mount_root: std::path::PathBuf,
    ) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        let this = Self {
            tx: tx.clone(),
            pending: Arc::default(),
            sequence: Arc::default(),
            resyncing: Arc::default(),
        };
        let me = this.clone();
        let later = move |job: Job| {
            let tx = tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RETRY_DELAY).await;
                let _ = tx.send(job);
            });
        };
        tokio::spawn(async move {
            while let Some(job) = rx.recv().await {
                match job {
                    Job::Register(key) => {
                        if me.want(&key).is_none() {
                            continue;
                        }
                        let _guard = locks.lock(&key.0).await;
                        // Cancelled while waiting for the lock: the map has the truth.
                        let Some(seq) = me.want(&key) else { continue };
                        let dir = mount_root.join(&key.0).join(key.1.trim_start_matches('/'));
                        // Deleted, or without a limit: nothing to register.
                        let found = tokio::task::spawn_blocking(move || {
                            read_limit_if_present(&dir).map_err(|e| e.to_string())
                        })
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()));
                        let result = match found {
                            Ok(None) => Ok(()),
                            Ok(Some(limit)) => gluster
                                .quota_limit_usage(
                                    &key.0,
                                    &key.1,
                                    limit,
                                    Some(soft_limit_percent(limit)),
                                )
                                .await
                                .map_err(|e| e.to_string()),
                            Err(e) => Err(e),
                        };
                        match result {
                            Ok(()) => me.finish(&key, seq),
                            // Deleted after the limit was read.
                            Err(e) if e.ends_with("No such file or directory") => {
                                me.finish(&key, seq)
                            }
                            Err(e) => {
                                tracing::warn!(
                                    volume = %key.0, path = %key.1, error = %e,
                                    "glusterd did not take a quota limit that is already enforced; \
                                     retrying in {RETRY_DELAY:?}"
                                );
                                later(Job::Register(key));
                            }
                        }
                    }
                    Job::Resync {
                        volume,
                        limits,
                        attempt,
                    } => {
                        let listed = {
                            let _guard = locks.lock(&volume).await;
                            gluster.quota_list(&volume).await
                        };
                        match listed {
                            Ok(listed) => {
                                let missing = unregistered(&limits, &listed);
                                if !missing.is_empty() {
                                    tracing::info!(%volume, count = missing.len(), "registering limits glusterd does not list");
                                }
                                for path in missing {
                                    me.register(&volume, &path);
                                }
                                me.resynced(&volume);
                            }
                            Err(e) if attempt < RESYNC_ATTEMPTS => {
                                tracing::warn!(%volume, error = %e, "reading glusterd's quota list failed; retrying in {RETRY_DELAY:?}");
                                later(Job::Resync {
                                    volume,
                                    limits,
                                    attempt: attempt + 1,
                                });
                            }
                            Err(e) => {
                                tracing::warn!(%volume, error = %e, "gave up comparing limits with glusterd's quota list");
                                me.resynced(&volume);
                            }
                        }
                    }
                }
            }
        });
        this
    }

    fn want(&self, key: &Key) -> Option<u64> {
        lock(&self.pending).get(key).copied()
    }

    /// Queues the limit now on `path` for registration with glusterd.
    pub fn register(&self, volume: &str, path: &str) {
        let key = (volume.to_string(), path.to_string());
        let seq = self
            .sequence
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.pending).insert(key.clone(), seq);
        let _ = self.tx.send(Job::Register(key));
    }

    /// Registers those of `limits` (path, bytes; read from the volume's directories) that
    /// glusterd's list lacks: registrations queued when the agent last stopped were lost.
    pub fn resync(&self, volume: &str, limits: Vec<(String, u64)>) {
        *lock(&self.resyncing).entry(volume.to_string()).or_default() += 1;
        let _ = self.tx.send(Job::Resync {
            volume: volume.to_string(),
            limits,
            attempt: 1,
        });
    }

    fn resynced(&self, volume: &str) {
        let mut r = lock(&self.resyncing);
        if let Some(n) = r.get_mut(volume) {
            *n -= 1;
            if *n == 0 {
                r.remove(volume);
            }
        }
    }

    /// Forgets a registration not yet made (the directory is being deleted).
    pub fn cancel(&self, volume: &str, path: &str) {
        lock(&self.pending).remove(&(volume.to_string(), path.to_string()));
    }

    fn finish(&self, key: &Key, seq: u64) {
        let mut pending = lock(&self.pending);
        if pending.get(key) == Some(&seq) {
            pending.remove(key);
        }
    }

    /// Registrations still queued for `volume`.
    pub fn pending(&self, volume: &str) -> usize {
        let resyncing = lock(&self.resyncing).get(volume).copied().unwrap_or(0);
        lock(&self.pending).keys().filter(|k| k.0 == volume).count() + resyncing
    }

    /// Waits until every registration queued for `volume` is made, or `timeout` passes;
    /// returns how many are still queued.
    pub async fn flush(&self, volume: &str, timeout: Duration) -> usize {
        let deadline = Instant::now() + timeout;
        loop {
            let left = self.pending(volume);
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_round_trip_in_glusterd_layout() {
        // What `limit-usage /d 1GB` left on a brick here: 1 GiB, soft limit -1 (the
        // volume's default).
        let on_brick = [
            0, 0, 0, 0, 0x40, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(decode_limit(&on_brick), Some(1 << 30));
        // Ours for 1 GiB: the same hard limit, soft limit 50 % (512 MiB below it).
        let ours = encode_limit(1 << 30);
        assert_eq!(ours[..8], on_brick[..8]);
        assert_eq!(ours[8..], 50i64.to_be_bytes());
        assert_eq!(decode_limit(&ours), Some(1 << 30));
        assert_eq!(decode_limit(&on_brick[..8]), None);
        assert_eq!(decode_limit(&encode_limit(0)), None);
        assert_eq!(decode_limit(&[0xff; 16]), None);
    }

    #[test]
    fn the_soft_limit_leaves_the_checked_margin_above_it() {
        const MIB: u64 = 1 << 20;
        assert_eq!(soft_limit_percent(8 * MIB), 1);
        assert_eq!(soft_limit_percent(512 * MIB), 1);
        assert_eq!(soft_limit_percent(1024 * MIB), 50);
        assert_eq!(soft_limit_percent(1800 * MIB), 71);
        assert_eq!(soft_limit_percent(100 * 1024 * MIB), 80);
        assert_eq!(soft_limit_percent(u64::MAX / 2), 80);
        for hard in [600 * MIB, 1000 * MIB, 3 * 1024 * MIB, 5000 * MIB] {
            let soft = hard * soft_limit_percent(hard) as u64 / 100;
            assert!(hard - soft >= CHECKED_MARGIN_BYTES, "{hard}");
        }
    }

    #[test]
    fn limits_missing_from_glusterds_list_or_differing_are_unregistered() {
        let entry = |path: &str, hard: u64| gk_gluster::QuotaEntry {
            path: path.into(),
            hard_limit_bytes: hard,
            soft_limit_percent: 80,
            used_bytes: 0,
            available_bytes: hard,
            soft_limit_exceeded: false,
            hard_limit_exceeded: false,
        };
        let on_disk = vec![
            ("/a".to_string(), 1 << 30),
            ("/b".to_string(), 2 << 30),
            ("/c".to_string(), 1 << 30),
        ];
        let listed = [entry("/a", 1 << 30), entry("/b", 1 << 30), entry("/z", 5)];
        assert_eq!(unregistered(&on_disk, &listed), ["/b", "/c"]);
        assert!(unregistered(&on_disk[..1], &listed).is_empty());
    }
}
