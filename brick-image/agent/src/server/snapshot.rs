//! The snapshot RPCs: copies of subdirectories kept under the snapshot root, and fills of
//! subdirectories from them (restores) or from each other (clones).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gk_gluster::CommandRunner;
use tonic::{Request, Response, Status};

use super::{log_rpc, subdir_path, Agent, Reply};
use crate::proto::*;
use crate::quota;
use crate::snapshot::{self, Layout, Record};
use crate::AgentError;

/// The longest a call waits for its copy before answering that it still runs.
const MAX_WAIT: Duration = Duration::from_secs(600);

fn wait_of(seconds: u32) -> Duration {
    Duration::from_secs(u64::from(seconds)).min(MAX_WAIT)
}

fn message(name: &str, r: &Record) -> Snapshot {
    Snapshot {
        name: name.to_string(),
        source: r.source.clone(),
        size_bytes: r.size_bytes,
        created_unix_seconds: r.created_unix_seconds,
        ready: r.ready,
    }
}

fn snapshot_key(volume: &str, name: &str) -> String {
    format!("snapshot:{volume}:{name}")
}

/// How long SnapshotDelete waits for its removal before answering that it still runs.
const DELETE_WAIT: Duration = Duration::from_secs(20);

fn delete_key(volume: &str, name: &str) -> String {
    format!("delete:{volume}:{name}")
}

/// Fills name their source first, so a snapshot's delete can see fills still reading it.
fn fill_key(volume: &str, from: &str, path: &str) -> String {
    format!("fill:{volume}:{from}->{path}")
}

/// Looks up every entry under `dir` through the volume's mount: gluster's clients then
/// know the copy (and heal what was in flight while it was made, and count it in gluster's
/// quota where that is on).
pub(super) async fn look_up_all(dir: PathBuf) -> Result<u64, Status> {
    tokio::task::spawn_blocking(move || {
        let mut seen = 0u64;
        let mut dirs = vec![dir];
        while let Some(d) = dirs.pop() {
            let list = std::fs::read_dir(&d).map_err(AgentError::io(format!(
                "listing {} through the volume",
                d.display()
            )))?;
            for e in list {
                let e = e.map_err(AgentError::io(format!("listing {}", d.display())))?;
                let meta = std::fs::symlink_metadata(e.path()).map_err(AgentError::io(format!(
                    "looking up {} through the volume",
                    e.path().display()
                )))?;
                seen += 1;
                if meta.is_dir() {
                    dirs.push(e.path());
                }
            }
        }
        Ok::<_, AgentError>(seen)
    })
    .await
    .map_err(|e| Status::internal(format!("looking up a copy: {e}")))?
    .map_err(Status::from)
}

/// Empties `dir` through the volume's mount (a copy cut short leaves part of one).
async fn empty_dir(dir: &Path) -> Result<(), AgentError> {
    let mut list = tokio::fs::read_dir(dir)
        .await
        .map_err(AgentError::io(format!("listing {}", dir.display())))?;
    while let Some(e) = list
        .next_entry()
        .await
        .map_err(AgentError::io(format!("listing {}", dir.display())))?
    {
        let p = e.path();
        let removed = if e.file_type().await.map(|t| t.is_dir()).unwrap_or(false) {
            tokio::fs::remove_dir_all(&p).await
        } else {
            tokio::fs::remove_file(&p).await
        };
        removed.map_err(AgentError::io(format!("removing {}", p.display())))?;
    }
    Ok(())
}

/// The limit of `path` under `root`, or NotFound naming it.
fn limited_dir(root: &Path, volume: &str, path: &str) -> Result<(PathBuf, u64), AgentError> {
    let dir = root.join(&path[1..]);
    let limit = quota::read_pv_size(&dir)?.ok_or_else(|| {
        AgentError::NotFound(format!("subdirectory {path} with a limit on {volume}"))
    })?;
    Ok((dir, limit))
}

/// Makes the snapshot `name` of `source`, or finishes one that an earlier agent left
/// half copied (it starts over: a partial copy cannot be trusted).
async fn make_snapshot(
    root: PathBuf,
    volume: String,
    name: String,
    source: String,
) -> Result<(), Status> {
    let layout = Layout::new(&root, &name);
    match layout.read()? {
        Some(r) if r.ready => return Ok(()),
        Some(_) => tokio::fs::remove_dir_all(&layout.dir)
            .await
            .map_err(AgentError::io(format!(
                "removing the partial snapshot {name}"
            )))?,
        None => match tokio::fs::remove_dir_all(&layout.dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(
                    AgentError::io(format!("removing the partial snapshot {name}"))(e).into(),
                )
            }
            _ => {}
        },
    }
    let (src, size_bytes) = limited_dir(&root, &volume, &source)?;
    tokio::fs::create_dir_all(layout.data())
        .await
        .map_err(AgentError::io(format!(
            "creating snapshot {name} on {volume}"
        )))?;
    let created_unix_seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default();
    let mut record = Record {
        source,
        size_bytes,
        created_unix_seconds,
        ready: false,
    };
    layout.write(&record)?;
    snapshot::copy_tree(&src, &layout.data()).await?;
    record.ready = true;
    layout.write(&record)?;
    tracing::info!(%volume, snapshot = %name, "snapshot copied");
    Ok(())
}

impl<R: CommandRunner + 'static> Agent<R> {
    pub(super) async fn snapshot_create_rpc(
        &self,
        req: Request<SnapshotCreateRequest>,
    ) -> Reply<SnapshotResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let name = snapshot::snapshot_name("name", &req.name)?;
        let source = subdir_path("source", &req.source)?;
        log_rpc("SnapshotCreate", &volume);
        if self.copies.running(&delete_key(&volume, &name)) {
            return Err(Status::unavailable(format!(
                "snapshot {name} on {volume} is being removed; create it again when that ends"
            )));
        }
        let root = self.management_mount(&volume).await?;
        let layout = Layout::new(&root, &name);
        match layout.read()? {
            Some(r) if r.source != source => {
                return Err(AgentError::Conflict(format!(
                    "snapshot {name} on {volume} is of {}, not {source}",
                    r.source
                ))
                .into())
            }
            Some(r) if r.ready => {
                return Ok(Response::new(SnapshotResponse {
                    snapshot: Some(message(&name, &r)),
                }))
            }
            _ => {}
        }
        limited_dir(&root, &volume, &source)?;
        match CopyStage::try_from(req.stage) {
            Ok(CopyStage::Mount) => {}
            Ok(CopyStage::Prepare) => {
                return self.snapshot_prepare(&root, &volume, &name, source).await;
            }
            Ok(CopyStage::Seal) => return self.snapshot_seal(&root, &volume, &name).await,
            Err(_) => return Err(AgentError::invalid("stage", "is not a known copy stage").into()),
        }
        let job = make_snapshot(root, volume.clone(), name.clone(), source.clone());
        let done = self
            .copies
            .run(
                &snapshot_key(&volume, &name),
                wait_of(req.wait_seconds),
                job,
            )
            .await;
        if let Some(Err(e)) = done {
            return Err(e);
        }
        let r = layout.read()?.unwrap_or(Record {
            source,
            size_bytes: 0,
            created_unix_seconds: 0,
            ready: false,
        });
        Ok(Response::new(SnapshotResponse {
            snapshot: Some(message(&name, &r)),
        }))
    }

    pub(super) async fn snapshot_get_rpc(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Reply<SnapshotResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let name = snapshot::snapshot_name("name", &req.name)?;
        log_rpc("SnapshotGet", &volume);
        let root = self.management_mount(&volume).await?;
        let r = Layout::new(&root, &name)
            .read()?
            .ok_or_else(|| AgentError::NotFound(format!("snapshot {name} on {volume}")))?;
        Ok(Response::new(SnapshotResponse {
            snapshot: Some(message(&name, &r)),
        }))
    }

    pub(super) async fn snapshot_delete_rpc(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Reply<SnapshotDeleteResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let name = snapshot::snapshot_name("name", &req.name)?;
        log_rpc("SnapshotDelete", &volume);
        let busy = self.copies.running(&snapshot_key(&volume, &name))
            || self
                .copies
                .running_prefix(&fill_key(&volume, &format!("snapshot:{name}"), ""));
        if busy {
            return Err(Status::unavailable(format!(
                "snapshot {name} on {volume} is being copied (made, or restored from); \
                 delete it again when that copy ends"
            )));
        }
        let root = self.management_mount(&volume).await?;
        let layout = Layout::new(&root, &name);
        let key = delete_key(&volume, &name);
        let existed =
            self.copies.running(&key) || tokio::fs::try_exists(&layout.dir).await.unwrap_or(true);
        // Removing thousands of files through gluster outlasts a CSI call: the removal runs
        // in the agent, and a call that comes back finds it running or done. The record goes
        // first, so a snapshot half removed is never found ready.
        let job = async move {
            for gone in [
                tokio::fs::remove_file(layout.dir.join(snapshot::RECORD)).await,
                tokio::fs::remove_dir_all(&layout.dir).await,
            ] {
                match gone {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(
                            AgentError::io(format!("removing snapshot {name} on {volume}"))(e)
                                .into(),
                        )
                    }
                }
            }
            Ok(())
        };
        match self.copies.run(&key, DELETE_WAIT, job).await {
            Some(Ok(())) => Ok(Response::new(SnapshotDeleteResponse { deleted: existed })),
            Some(Err(e)) => Err(e),
            None => Err(Status::unavailable(format!(
                "snapshot {} is still being removed; delete it again to wait for it",
                req.name
            ))),
        }
    }

    pub(super) async fn snapshot_list_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<SnapshotListResponse> {
        let volume = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("SnapshotList", &volume);
        let root = self.management_mount(&volume).await?;
        let all = tokio::task::spawn_blocking(move || snapshot::list(&root))
            .await
            .map_err(|e| Status::internal(format!("listing snapshots of {volume}: {e}")))??;
        Ok(Response::new(SnapshotListResponse {
            snapshots: all
                .iter()
                .filter(|(_, r)| r.ready)
                .map(|(n, r)| message(n, r))
                .collect(),
        }))
    }

    pub(super) async fn subdir_fill_rpc(
        &self,
        req: Request<SubdirFillRequest>,
    ) -> Reply<SubdirFillResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirFill", &volume);
        let root = self.management_mount(&volume).await?;
        let (label, src) = match &req.from {
            Some(subdir_fill_request::From::Snapshot(n)) => {
                let name = snapshot::snapshot_name("snapshot", n)?;
                let layout = Layout::new(&root, &name);
                match layout.read()? {
                    Some(r) if r.ready => {}
                    Some(_) => {
                        return Err(AgentError::Precondition(format!(
                            "snapshot {name} on {volume} is not yet complete"
                        ))
                        .into())
                    }
                    None => {
                        return Err(
                            AgentError::NotFound(format!("snapshot {name} on {volume}")).into()
                        )
                    }
                }
                (format!("snapshot:{name}"), layout.data())
            }
            Some(subdir_fill_request::From::Subdir(p)) => {
                let from = subdir_path("subdir", p)?;
                if from == path {
                    return Err(AgentError::invalid("subdir", "cannot be the path it fills").into());
                }
                let (dir, _) = limited_dir(&root, &volume, &from)?;
                (format!("subdir:{from}"), dir)
            }
            None => {
                return Err(AgentError::invalid(
                    "from",
                    "name a snapshot or a subdirectory to copy",
                )
                .into())
            }
        };
        let (target, _) = limited_dir(&root, &volume, &path)?;
        match snapshot::filled_from(&target)? {
            Some(f) if f == label => return Ok(Response::new(SubdirFillResponse { ready: true })),
            Some(other) => {
                return Err(AgentError::Conflict(format!(
                    "{path} on {volume} was filled from {other}, not {label}"
                ))
                .into())
            }
            None => {}
        }
        let key = fill_key(&volume, &label, &path);
        match CopyStage::try_from(req.stage) {
            Ok(CopyStage::Mount) => {}
            Ok(CopyStage::Prepare) => {
                if self.copies.running(&key) {
                    return Err(Status::unavailable(format!(
                        "{path} on {volume} is being filled through the volume; ask again when it ends"
                    )));
                }
                // The directory is a PV being made, not yet handed to anyone.
                empty_dir(&target).await?;
                return Ok(Response::new(SubdirFillResponse { ready: false }));
            }
            Ok(CopyStage::Seal) => {
                look_up_all(target.clone()).await?;
                snapshot::mark_filled(&target, &label)?;
                tracing::info!(%volume, %path, from = %label, "filled on the bricks");
                return Ok(Response::new(SubdirFillResponse { ready: true }));
            }
            Err(_) => return Err(AgentError::invalid("stage", "is not a known copy stage").into()),
        }
        let job = async move {
            if snapshot::filled_from(&target)?.as_deref() == Some(label.as_str()) {
                return Ok(());
            }
            snapshot::copy_tree(&src, &target).await?;
            snapshot::mark_filled(&target, &label)?;
            Ok(())
        };
        match self.copies.run(&key, wait_of(req.wait_seconds), job).await {
            Some(Err(e)) => Err(e),
            done => Ok(Response::new(SubdirFillResponse {
                ready: done.is_some(),
            })),
        }
    }

    /// Stage PREPARE of a snapshot copied on the bricks: its record (not ready) and an empty
    /// data directory, made through the volume so it has its gfid on every brick.
    async fn snapshot_prepare(
        &self,
        root: &Path,
        volume: &str,
        name: &str,
        source: String,
    ) -> Reply<SnapshotResponse> {
        if self.copies.running(&snapshot_key(volume, name)) {
            return Err(Status::unavailable(format!(
                "snapshot {name} on {volume} is being copied through the volume; ask again when it ends"
            )));
        }
        let layout = Layout::new(root, name);
        match tokio::fs::remove_dir_all(&layout.dir).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(
                    AgentError::io(format!("removing the partial snapshot {name}"))(e).into(),
                )
            }
            _ => {}
        }
        let (_, size_bytes) = limited_dir(root, volume, &source)?;
        tokio::fs::create_dir_all(layout.data())
            .await
            .map_err(AgentError::io(format!(
                "creating snapshot {name} on {volume}"
            )))?;
        let record = Record {
            source,
            size_bytes,
            created_unix_seconds: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or_default(),
            ready: false,
        };
        layout.write(&record)?;
        Ok(Response::new(SnapshotResponse {
            snapshot: Some(message(name, &record)),
        }))
    }

    /// Stage SEAL of a snapshot copied on the bricks: the copy looked up through the volume,
    /// then recorded ready.
    async fn snapshot_seal(
        &self,
        root: &Path,
        volume: &str,
        name: &str,
    ) -> Reply<SnapshotResponse> {
        let layout = Layout::new(root, name);
        let mut record = layout.read()?.ok_or_else(|| {
            AgentError::Precondition(format!(
                "snapshot {name} on {volume} was not prepared; call stage PREPARE first"
            ))
        })?;
        let entries = look_up_all(layout.data()).await?;
        record.ready = true;
        layout.write(&record)?;
        tracing::info!(%volume, snapshot = %name, entries, "snapshot copied on the bricks");
        Ok(Response::new(SnapshotResponse {
            snapshot: Some(message(name, &record)),
        }))
    }
}
