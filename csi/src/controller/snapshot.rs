//! CreateSnapshot, DeleteSnapshot, ListSnapshots and GetSnapshot: copies of subdirectory
//! volumes kept in their pool, where no PV can reach them.
//!
//! Dedicated PVs have none: their snapshot could only live on their own GlusterVolume,
//! which is deleted with the PV, and a snapshot must outlive its source.

use std::collections::HashMap;

use csi_proto::v1 as csi;
use gk_agent_proto::v1::Snapshot;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};
use tonic::{Request, Response, Status};

use super::{ControllerService, Reply};
use crate::backend::{Made, PoolResolver};
use crate::params::{dir_for_name, PoolKey, SnapshotId, VolumeId};
use crate::request::{invalid, page, param_status};

/// How long CreateSnapshot waits for its copy before answering ready_to_use = false; the
/// csi-snapshotter asks again until it is ready.
const SNAPSHOT_WAIT_SECONDS: u32 = 30;

/// Why a dedicated PV has no snapshots, for the errors that say so.
pub(super) const DEDICATED_REFUSAL: &str = "dedicated PVs have no snapshots or clones: a \
copy could only live on the PV's own GlusterVolume, which is deleted with the PV; use a \
subdirectory PV (StorageClass parameter mode: subdir) for data that needs snapshots";

/// The Event that tells a VolumeSnapshot's owner how its copy was made, and the object it
/// goes on (named by the csi-snapshotter's --extra-create-metadata parameters); None for a
/// snapshot that was ready before the call, or without those parameters.
pub fn snapshot_event(
    params: &HashMap<String, String>,
    made: &Made,
) -> Option<(ObjectReference, Event)> {
    let name = params.get("csi.storage.k8s.io/volumesnapshot/name")?;
    let namespace = params.get("csi.storage.k8s.io/volumesnapshot/namespace")?;
    let (reason, note) = match made {
        Made::Earlier => return None,
        Made::OnBricks { seconds } => (
            "SnapshotCopiedOnBricks",
            format!(
                "copied on the bricks by reflink in {seconds:.1} s while gluster's barrier \
                 held the source's writes: crash-consistent, and sharing the source's blocks \
                 until either is written"
            ),
        ),
        Made::ThroughVolume { why } => (
            "SnapshotCopiedThroughVolume",
            format!(
                "copied file by file through the volume, because {why}; it takes as long as \
                 reading the data, and writes made meanwhile may be in it or not"
            ),
        ),
    };
    Some((
        ObjectReference {
            api_version: Some("snapshot.storage.k8s.io/v1".into()),
            kind: Some("VolumeSnapshot".into()),
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: params.get("csi.storage.k8s.io/volumesnapshot/uid").cloned(),
            ..Default::default()
        },
        Event {
            type_: EventType::Normal,
            reason: reason.into(),
            note: Some(note.chars().take(1000).collect()),
            action: "CreateSnapshot".into(),
            secondary: None,
        },
    ))
}

fn to_csi(pool: &PoolKey, s: &Snapshot) -> Result<csi::Snapshot, Status> {
    let source = s
        .source
        .strip_prefix('/')
        .filter(|d| !d.is_empty())
        .ok_or_else(|| {
            Status::internal(format!(
                "pool {pool}: snapshot {} records no source directory",
                s.name
            ))
        })?;
    Ok(csi::Snapshot {
        size_bytes: s.size_bytes as i64,
        snapshot_id: SnapshotId {
            pool: pool.clone(),
            name: s.name.clone(),
        }
        .to_string(),
        source_volume_id: VolumeId::Subdir {
            pool: pool.clone(),
            dir: source.to_string(),
        }
        .to_string(),
        creation_time: Some(prost_types::Timestamp {
            seconds: s.created_unix_seconds,
            nanos: 0,
        }),
        ready_to_use: s.ready,
        group_snapshot_id: String::new(),
        accessible_topology: vec![],
    })
}

/// VolumeSnapshotClass parameters: none are known yet, so any is a mistake worth naming
/// (those the csi-snapshotter adds itself, with --extra-create-metadata, aside).
fn check_parameters(params: &HashMap<String, String>) -> Result<(), Status> {
    match params
        .keys()
        .filter(|k| !k.starts_with("csi.storage.k8s.io/"))
        .min()
    {
        Some(k) => Err(invalid(
            &format!("parameters.{k}"),
            "is not a snapshot parameter of this driver (it takes none)",
        )),
        None => Ok(()),
    }
}

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn snapshot_create(
        &self,
        req: Request<csi::CreateSnapshotRequest>,
    ) -> Reply<csi::CreateSnapshotResponse> {
        let req = req.into_inner();
        if req.name.is_empty() {
            return Err(invalid("name", "is required"));
        }
        if req.source_volume_id.is_empty() {
            return Err(invalid("source_volume_id", "is required"));
        }
        check_parameters(&req.parameters)?;
        let (pool_key, dir) = match VolumeId::parse(&req.source_volume_id).map_err(param_status)? {
            VolumeId::Subdir { pool, dir } => (pool, dir),
            VolumeId::Dedicated { .. } => {
                return Err(Status::failed_precondition(DEDICATED_REFUSAL));
            }
        };
        let id = SnapshotId {
            pool: pool_key.clone(),
            name: dir_for_name(&req.name).map_err(param_status)?,
        };
        let _guard = self.locks.try_lock(&id.to_string())?;
        tracing::info!(name = %req.name, snapshot_id = %id, source = %req.source_volume_id, "CreateSnapshot");
        let mut pool = self.resolve(&pool_key).await?;
        if pool.limit_of(&pool_key, &dir).await?.is_none() {
            return Err(Status::not_found(format!(
                "source_volume_id: volume {} does not exist",
                req.source_volume_id
            )));
        }
        let (s, made) = pool
            .snapshot_create(&pool_key, &id.name, &dir, SNAPSHOT_WAIT_SECONDS)
            .await?;
        tracing::info!(snapshot_id = %id, ready = s.ready, ?made, "CreateSnapshot answered");
        if let (Some(recorder), Some((object, event))) =
            (&self.recorder, snapshot_event(&req.parameters, &made))
        {
            // Best effort: the snapshot stands whether or not its Event is written.
            if let Err(e) = recorder.publish(&event, &object).await {
                tracing::warn!(snapshot_id = %id, error = %e, "publishing the snapshot's event failed");
            }
        }
        Ok(Response::new(csi::CreateSnapshotResponse {
            snapshot: Some(to_csi(&pool_key, &s)?),
        }))
    }

    pub(super) async fn snapshot_delete(
        &self,
        req: Request<csi::DeleteSnapshotRequest>,
    ) -> Reply<csi::DeleteSnapshotResponse> {
        let req = req.into_inner();
        if req.snapshot_id.is_empty() {
            return Err(invalid("snapshot_id", "is required"));
        }
        // An ID this driver never gave names nothing: there is nothing to delete.
        let Ok(id) = SnapshotId::parse(&req.snapshot_id) else {
            return Ok(Response::new(csi::DeleteSnapshotResponse {}));
        };
        let _guard = self.locks.try_lock(&id.to_string())?;
        tracing::info!(snapshot_id = %id, "DeleteSnapshot");
        let Some(mut pool) = self.pool_if_any(&id.pool).await? else {
            return Ok(Response::new(csi::DeleteSnapshotResponse {}));
        };
        pool.snapshot_delete(&id.pool, &id.name).await?;
        Ok(Response::new(csi::DeleteSnapshotResponse {}))
    }

    pub(super) async fn snapshot_list(
        &self,
        req: Request<csi::ListSnapshotsRequest>,
    ) -> Reply<csi::ListSnapshotsResponse> {
        let req = req.into_inner();
        let mut all = Vec::new();
        if !req.snapshot_id.is_empty() {
            // One snapshot: an ID that is not ours, or names nothing, lists nothing.
            if let Ok(id) = SnapshotId::parse(&req.snapshot_id) {
                if let Some(s) = self.find(&id).await? {
                    all.push(s);
                }
            }
        } else {
            let source = (!req.source_volume_id.is_empty())
                .then(|| VolumeId::parse(&req.source_volume_id).ok());
            let pools = match &source {
                Some(Some(VolumeId::Subdir { pool, .. })) => vec![pool.clone()],
                // A source that is not a subdirectory volume of ours has no snapshots.
                Some(_) => Vec::new(),
                None => self.all_pools().await?,
            };
            for key in pools {
                let Some(mut p) = self.pool_if_any(&key).await? else {
                    continue;
                };
                for s in p.snapshots(&key).await? {
                    let snap = to_csi(&key, &s)?;
                    if source.is_none() || snap.source_volume_id == req.source_volume_id {
                        all.push(snap);
                    }
                }
            }
        }
        let (entries, next_token) = page(&all, req.max_entries, &req.starting_token, "snapshots")?;
        Ok(Response::new(csi::ListSnapshotsResponse {
            entries: entries
                .into_iter()
                .map(|s| csi::list_snapshots_response::Entry { snapshot: Some(s) })
                .collect(),
            next_token,
        }))
    }

    pub(super) async fn snapshot_get(
        &self,
        req: Request<csi::GetSnapshotRequest>,
    ) -> Reply<csi::GetSnapshotResponse> {
        let req = req.into_inner();
        if req.snapshot_id.is_empty() {
            return Err(invalid("snapshot_id", "is required"));
        }
        let not_found =
            || Status::not_found(format!("snapshot {} does not exist", req.snapshot_id));
        let id = SnapshotId::parse(&req.snapshot_id).map_err(|_| not_found())?;
        let snapshot = self.find(&id).await?.ok_or_else(not_found)?;
        Ok(Response::new(csi::GetSnapshotResponse {
            snapshot: Some(snapshot),
        }))
    }

    /// The pool, or None when it no longer exists (its snapshots went with it).
    async fn pool_if_any(&self, key: &PoolKey) -> Result<Option<crate::backend::Pool>, Status> {
        match self.resolve(key).await {
            Ok(p) => Ok(Some(p)),
            Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
            Err(s) => Err(s),
        }
    }

    /// One snapshot, complete or not; None when it or its pool does not exist.
    pub(super) async fn find(&self, id: &SnapshotId) -> Result<Option<csi::Snapshot>, Status> {
        let Some(mut p) = self.pool_if_any(&id.pool).await? else {
            return Ok(None);
        };
        match p.snapshot(&id.pool, &id.name).await? {
            Some(s) => to_csi(&id.pool, &s).map(Some),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> HashMap<String, String> {
        [
            ("csi.storage.k8s.io/volumesnapshot/name", "nightly"),
            ("csi.storage.k8s.io/volumesnapshot/namespace", "shop"),
            ("csi.storage.k8s.io/volumesnapshot/uid", "u-1"),
            (
                "csi.storage.k8s.io/volumesnapshotcontent/name",
                "snapcontent-1",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    #[test]
    fn the_volume_snapshot_is_told_how_its_copy_was_made() {
        let (object, event) = snapshot_event(&params(), &Made::OnBricks { seconds: 2.84 }).unwrap();
        assert_eq!(object.kind.as_deref(), Some("VolumeSnapshot"));
        assert_eq!(object.name.as_deref(), Some("nightly"));
        assert_eq!(object.namespace.as_deref(), Some("shop"));
        assert_eq!(object.uid.as_deref(), Some("u-1"));
        assert_eq!(event.reason, "SnapshotCopiedOnBricks");
        let note = event.note.unwrap();
        assert!(note.contains("reflink in 2.8 s"), "{note}");
        assert!(!note.contains("  "), "runs of spaces: {note}");

        let why = "the filesystem of brick n1:/b cannot clone files".to_string();
        let (_, event) = snapshot_event(&params(), &Made::ThroughVolume { why }).unwrap();
        assert_eq!(event.reason, "SnapshotCopiedThroughVolume");
        let note = event.note.unwrap();
        assert!(
            note.contains("because the filesystem of brick n1:/b cannot clone files"),
            "{note}"
        );
        assert!(!note.contains("  "), "runs of spaces: {note}");
    }

    #[test]
    fn no_event_for_a_snapshot_made_before_or_one_without_its_object() {
        assert!(snapshot_event(&params(), &Made::Earlier).is_none());
        let mut bare = params();
        bare.remove("csi.storage.k8s.io/volumesnapshot/namespace");
        assert!(snapshot_event(&bare, &Made::OnBricks { seconds: 1.0 }).is_none());
    }
}
