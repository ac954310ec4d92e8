//! Snapshots of subdirectories, and restores and clones from them: where they live on the
//! volume, what records them, and the copies that make them.
//!
//! Gluster has no per-directory snapshot, and on glusterfs 10.3 a reflink does not pass
//! through the FUSE client (FICLONE fails with EOPNOTSUPP; `copy_file_range` turns into
//! plain writes), so a snapshot is a copy of the files.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tonic::Status;

pub mod on_bricks;

use crate::AgentError;

/// Top-level directory of the snapshots. Subdirectory paths may not begin with a dot, so no
/// subdirectory volume can name it or anything under it.
pub const SNAPSHOT_ROOT: &str = ".glusterkube-snapshots";

/// The file beside a snapshot's data that records it.
pub const RECORD: &str = "snapshot.json";

/// The attribute a filled subdirectory carries: what filled it.
const FILLED_FROM: &str = "trusted.glusterkube.filled-from";

/// What a snapshot is a copy of, written before its copy starts and again, ready, after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub source: String,
    pub size_bytes: u64,
    pub created_unix_seconds: i64,
    pub ready: bool,
}

/// A snapshot name: one plain name, not beginning with a dot.
pub fn snapshot_name(field: &str, name: &str) -> Result<String, AgentError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(name.to_string())
    } else {
        Err(AgentError::invalid(
            field,
            format!("{name:?} must be a plain name of letters, digits, '-', '_' and '.', like snapshot-0f3c"),
        ))
    }
}

/// Where one snapshot lives under a mount of its volume.
pub struct Layout {
    pub dir: PathBuf,
}

impl Layout {
    pub fn new(mount: &Path, name: &str) -> Self {
        Self {
            dir: mount.join(SNAPSHOT_ROOT).join(name),
        }
    }

    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn read(&self) -> Result<Option<Record>, AgentError> {
        read_record(&self.dir.join(RECORD))
    }

    /// Writes the record through a temporary file, so a reader sees the old or the new.
    pub fn write(&self, r: &Record) -> Result<(), AgentError> {
        let tmp = self.dir.join(format!(".{RECORD}.tmp"));
        let body = serde_json::to_vec(r).expect("a record serialises");
        std::fs::write(&tmp, body)
            .and_then(|()| std::fs::rename(&tmp, self.dir.join(RECORD)))
            .map_err(AgentError::io(format!(
                "recording snapshot {}",
                self.dir.display()
            )))
    }
}

fn read_record(path: &Path) -> Result<Option<Record>, AgentError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| AgentError::Io {
                what: format!("reading {}", path.display()),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(AgentError::Io {
            what: format!("reading {}", path.display()),
            source: e,
        }),
    }
}

/// Every snapshot under a mount of a volume, by name, complete or not.
pub fn list(mount: &Path) -> Result<Vec<(String, Record)>, AgentError> {
    let root = mount.join(SNAPSHOT_ROOT);
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(AgentError::Io {
                what: format!("listing {}", root.display()),
                source: e,
            })
        }
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.map_err(AgentError::io(format!("listing {}", root.display())))?;
        let name = e.file_name().to_string_lossy().into_owned();
        if snapshot_name("name", &name).is_err() {
            continue;
        }
        if let Some(r) = read_record(&e.path().join(RECORD))? {
            out.push((name, r));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// What filled a subdirectory, if it was filled.
pub fn filled_from(dir: &Path) -> Result<Option<String>, AgentError> {
    let mut buf = [0u8; 512];
    match rustix::fs::getxattr(dir, FILLED_FROM, &mut buf) {
        Ok(n) => Ok(Some(String::from_utf8_lossy(&buf[..n]).into_owned())),
        Err(rustix::io::Errno::NODATA) => Ok(None),
        Err(e) => Err(AgentError::Io {
            what: format!("reading what filled {}", dir.display()),
            source: e.into(),
        }),
    }
}

pub fn mark_filled(dir: &Path, from: &str) -> Result<(), AgentError> {
    rustix::fs::setxattr(
        dir,
        FILLED_FROM,
        from.as_bytes(),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(|e| AgentError::Io {
        what: format!("recording what filled {}", dir.display()),
        source: e.into(),
    })
}

/// Copies the tree under `from` into the existing directory `to`: data, modes, owners,
/// timestamps, symlinks and hard links. Extended attributes are left behind: on a gluster
/// mount they include the source directory's quota limit, which must not travel.
pub async fn copy_tree(from: &Path, to: &Path) -> Result<(), Status> {
    let out = tokio::process::Command::new("cp")
        .args([
            "-dR",
            "--preserve=mode,ownership,timestamps",
            "--reflink=auto",
            "-T",
        ])
        .arg(from)
        .arg(to)
        .output()
        .await
        .map_err(|e| Status::internal(format!("running cp: {e}")))?;
    if out.status.success() {
        Ok(())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().next().unwrap_or("").trim();
        let code = if err.contains("Disk quota exceeded") || err.contains("No space left") {
            tonic::Code::ResourceExhausted
        } else {
            tonic::Code::Internal
        };
        Err(Status::new(
            code,
            format!(
                "copying {} to {}: {first} ({} more lines)",
                from.display(),
                to.display(),
                err.lines().count().saturating_sub(1)
            ),
        ))
    }
}

/// How a copy ended; None while it runs.
type Outcome = watch::Receiver<Option<Result<(), Status>>>;

/// Copies running in the agent, each under a key, outliving the calls that started them.
#[derive(Clone, Default)]
pub struct Copies {
    jobs: Arc<Mutex<HashMap<String, Outcome>>>,
}

impl Copies {
    /// Starts `job` under `key` unless a job runs under it already, then waits up to `wait`
    /// for whichever runs. None means it still runs. A job must itself see and skip work
    /// already done, since a later call starts it again.
    pub async fn run<F>(&self, key: &str, wait: Duration, job: F) -> Option<Result<(), Status>>
    where
        F: Future<Output = Result<(), Status>> + Send + 'static,
    {
        let mut rx = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            match jobs.get(key) {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    jobs.insert(key.to_string(), rx.clone());
                    let all = self.jobs.clone();
                    let key = key.to_string();
                    tokio::spawn(async move {
                        let r = job.await;
                        if let Err(e) = &r {
                            tracing::warn!(copy = %key, error = %e.message(), "copy failed");
                        }
                        all.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                        let _ = tx.send(Some(r));
                    });
                    rx
                }
            }
        };
        let done = match tokio::time::timeout(wait, rx.wait_for(|r| r.is_some())).await {
            Ok(Ok(r)) => r.clone(),
            Ok(Err(_)) => Some(Err(Status::internal(
                "the copy task ended without a result",
            ))),
            Err(_) => None,
        };
        done
    }

    /// Whether any job runs under a key that begins with `prefix`.
    pub fn running_prefix(&self, prefix: &str) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .any(|k| k.starts_with(prefix))
    }

    pub fn running(&self, key: &str) -> bool {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_plain_and_never_hidden() {
        assert!(snapshot_name("name", "snapshot-0f3c").is_ok());
        for bad in ["", ".x", "a/b", "..", "a b", &"x".repeat(201)] {
            let e = snapshot_name("name", bad).unwrap_err().to_string();
            assert!(e.starts_with("invalid name:"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn records_round_trip_and_list_skips_unrecorded() {
        let tmp = tempfile::tempdir().unwrap();
        let l = Layout::new(tmp.path(), "s1");
        std::fs::create_dir_all(l.data()).unwrap();
        assert_eq!(l.read().unwrap(), None);
        let r = Record {
            source: "/pvc-1".into(),
            size_bytes: 5,
            created_unix_seconds: 7,
            ready: true,
        };
        l.write(&r).unwrap();
        assert_eq!(l.read().unwrap(), Some(r.clone()));
        std::fs::create_dir_all(Layout::new(tmp.path(), "s0").data()).unwrap();
        assert_eq!(list(tmp.path()).unwrap(), vec![("s1".to_string(), r)]);
    }

    #[tokio::test]
    async fn copy_tree_keeps_links_and_modes() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let (src, dst) = (tmp.path().join("src"), tmp.path().join("dst"));
        std::fs::create_dir_all(src.join("d")).unwrap();
        std::fs::write(src.join("d/f"), b"hello").unwrap();
        std::fs::set_permissions(src.join("d/f"), std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink("d/f", src.join("l")).unwrap();
        std::fs::create_dir(&dst).unwrap();
        copy_tree(&src, &dst).await.unwrap();
        assert_eq!(std::fs::read(dst.join("d/f")).unwrap(), b"hello");
        let mode = std::fs::metadata(dst.join("d/f"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        assert_eq!(
            std::fs::read_link(dst.join("l")).unwrap(),
            PathBuf::from("d/f")
        );
    }

    #[tokio::test]
    async fn one_job_per_key_and_waiters_see_its_end() {
        let c = Copies::default();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let first = c
            .run("k", Duration::from_millis(50), async move {
                let _ = rx.await;
                Ok(())
            })
            .await;
        assert!(first.is_none(), "the job still runs");
        assert!(c.running("k"));
        // A second call joins the first job: its own would fail.
        let c2 = c.clone();
        let again = tokio::spawn(async move {
            c2.run("k", Duration::from_secs(5), async {
                Err(Status::internal("not run"))
            })
            .await
        });
        // The current-thread test runtime runs the second call here, while the job waits.
        tokio::time::sleep(Duration::from_millis(50)).await;
        tx.send(()).unwrap();
        assert!(again.await.unwrap().unwrap().is_ok());
        assert!(!c.running("k"));
    }
}
