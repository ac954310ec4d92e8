//! Subdirectory PVs sized by the bricks' own project quotas (a volume whose option
//! `user.glusterkube.pv-quota` is `project`): the PV's size is recorded on its directory
//! through gluster, and each node's agent gives the directory on its bricks a project and
//! a limit (`crate::projects`). Gluster's quota stays off on such volumes.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_gluster::{CommandRunner, Volume};
use tonic::{Request, Response, Status};

use super::{lock, log_rpc, subdir_path, Agent, Reply};
use crate::projects::{self, volume as pv};
use crate::proto::*;
use crate::{quota, AgentError};

/// How long a volume's answer to "sized by projects?" (and its bricks) is trusted. A brick
/// replaced meanwhile is enforced by the next standing pass (`projects::keeper`).
const VOLUME_TTL: Duration = Duration::from_secs(30);

/// Per volume: when it was read, and the volume if its PVs are sized by project quotas.
pub(super) type ProjectVolumes =
    Arc<std::sync::Mutex<std::collections::HashMap<String, (Instant, Option<Arc<Volume>>)>>>;

/// Health's word on one disk: whether its filesystem enforces project quotas, and why not.
pub(super) fn disk_quotas(root: &Path) -> (bool, String) {
    match projects::capable(root) {
        Ok(()) => (true, String::new()),
        Err(e) => (false, e.to_string()),
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    /// The volume when the bricks' project quotas size its PVs; None when gluster's quota
    /// does.
    pub(super) async fn by_projects(
        &self,
        volume: &str,
    ) -> Result<Option<Arc<Volume>>, AgentError> {
        if let Some((at, v)) = lock(&self.project_volumes).get(volume) {
            if at.elapsed() < VOLUME_TTL {
                return Ok(v.clone());
            }
        }
        let v = self.info(volume).await?;
        let found = pv::by_projects(&v).then(|| Arc::new(v));
        lock(&self.project_volumes).insert(volume.to_string(), (Instant::now(), found.clone()));
        Ok(found)
    }

    /// This node's bricks of `v` that enforce `path` now.
    async fn enforce_here(&self, v: &Volume, path: &str) -> Result<Vec<String>, AgentError> {
        let done = pv::enforce_dir(v, &self.config.advertise_address, path).await?;
        Ok(done.into_iter().map(|(brick, _)| brick).collect())
    }

    /// SubdirCreate on a volume sized by project quotas: the directory, its size recorded on
    /// it (every brick of its set keeps it), and this node's bricks enforcing it.
    pub(super) async fn project_subdir_create(
        &self,
        v: &Volume,
        path: String,
        bytes: u64,
    ) -> Reply<SubdirResponse> {
        let volume = &v.name;
        let dir = self.subdir(volume, &path).await?;
        if !self.make_pv_dir(&dir, volume, &path)? {
            match projects::recorded_size(&dir).map_err(AgentError::from)? {
                Some(size) if size != bytes => {
                    return Err(AgentError::Conflict(format!(
                        "{path} on {volume} exists with a size of {size} bytes, not {bytes}"
                    ))
                    .into())
                }
                // A retry, or a create that failed after the record: enforce again.
                Some(_) | None => {}
            }
        }
        projects::record_size(&dir, bytes).map_err(AgentError::from)?;
        let enforced_bricks = self.enforce_here(v, &path).await?;
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: bytes,
            project_quota: true,
            enforced_bricks,
        }))
    }

    /// SubdirExpand on a volume sized by project quotas: a larger size recorded, and this
    /// node's bricks enforcing it.
    pub(super) async fn project_subdir_expand(
        &self,
        v: &Volume,
        path: String,
        bytes: u64,
    ) -> Reply<SubdirResponse> {
        let volume = &v.name;
        let dir = self.subdir(volume, &path).await?;
        let current = match std::fs::symlink_metadata(&dir) {
            Ok(_) => projects::recorded_size(&dir).map_err(AgentError::from)?,
            Err(_) => None,
        }
        .ok_or_else(|| {
            AgentError::NotFound(format!("subdirectory {path} with a size on {volume}"))
        })?;
        if bytes < current {
            return Err(AgentError::Precondition(format!(
                "{path} on {volume} has a size of {current} bytes; shrinking it to {bytes} is not supported"
            ))
            .into());
        }
        if bytes > current {
            projects::record_size(&dir, bytes).map_err(AgentError::from)?;
        }
        let enforced_bricks = self.enforce_here(v, &path).await?;
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: bytes,
            project_quota: true,
            enforced_bricks,
        }))
    }

    /// After a PV directory is removed: this node's bricks give its id's limit back (the
    /// other nodes do at their next standing pass).
    pub(super) async fn project_release_here(&self, v: &Volume, path: &str) {
        for brick in pv::local_bricks(v, &self.config.advertise_address) {
            let dir = brick.join(path.trim_start_matches('/'));
            if let Err(e) = projects::release(&dir).await {
                tracing::warn!(dir = %dir.display(), error = %e, "releasing the project of a deleted PV directory; the next pass retries");
            }
        }
    }

    pub(super) async fn subdir_enforce_rpc(
        &self,
        req: Request<SubdirGetRequest>,
    ) -> Reply<SubdirEnforceResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirEnforce", &volume);
        let _guard = self.locks.lock(&super::subdir_lock(&volume, &path)).await;
        // Asked because another node found the volume sized by projects: a cached "no" is
        // from before the operator chose, so it is asked again.
        let cached = self.by_projects(&volume).await?;
        let v = match cached {
            Some(v) => Some(v),
            None => {
                lock(&self.project_volumes).remove(&volume);
                self.by_projects(&volume).await?
            }
        };
        let v = v.ok_or_else(|| {
            AgentError::Precondition(format!(
                "volume {volume} sizes its PVs with gluster's quota, not the bricks' project quotas"
            ))
        })?;
        let enforced_bricks = self.enforce_here(&v, &path).await?;
        Ok(Response::new(SubdirEnforceResponse {
            enforced_bricks,
            bricks: v.bricks.iter().map(|b| b.brick.to_string()).collect(),
        }))
    }

    pub(super) async fn pv_quota_move_rpc(
        &self,
        req: Request<PvQuotaMoveRequest>,
    ) -> Reply<PvQuotaMoveResponse> {
        let req = req.into_inner();
        let (volume, _guard) = self.begin("PvQuotaMove", &req.volume).await?;
        lock(&self.project_volumes).remove(&volume);
        let v = self.info(&volume).await?;
        if !pv::by_projects(&v) {
            return Err(AgentError::Precondition(format!(
                "volume {volume} is not to be sized by the bricks' project quotas (its option \
                 {} is not {}); the operator sets it when every brick's disk has them",
                gk_agent_proto::pv_quota::OPTION,
                gk_agent_proto::pv_quota::PROJECT
            ))
            .into());
        }
        let mut quota_on = v.options.get("features.quota").map(String::as_str) == Some("on");
        // Each PV's gluster limit recorded as its size, through gluster: every brick of its
        // set keeps it.
        let root = self.management_mount(&volume).await?;
        let listed = {
            let root = root.clone();
            tokio::task::spawn_blocking(move || quota::list_top_level(&root))
                .await
                .map_err(|e| Status::internal(format!("listing PVs of {volume}: {e}")))??
        };
        for d in listed.iter().filter(|d| !d.by_projects) {
            projects::record_size(&root.join(d.path.trim_start_matches('/')), d.limit_bytes)
                .map_err(AgentError::from)?;
        }
        // This node's bricks enforce every one of them.
        let mut enforced_here = 0;
        let mut not_enforced_here = Vec::new();
        let bricks = pv::keep(&v, &self.config.advertise_address).await;
        let bricks_here = bricks.len() as u32;
        for (brick, pass) in bricks {
            match pass {
                Ok(p) => {
                    enforced_here += p.enforced.len() as u32;
                    not_enforced_here.extend(
                        p.failed
                            .iter()
                            .map(|(d, e)| format!("{}: {e}", d.display())),
                    );
                }
                Err(e) => not_enforced_here.push(format!("{}: {e}", brick.display())),
            }
        }
        // Every brick here holds every PV directory of a single-set volume: fewer enforced
        // means some did not get their size yet (a brick that missed the record heals it).
        let complete =
            not_enforced_here.is_empty() && enforced_here >= listed.len() as u32 * bricks_here;
        if req.finish && quota_on && complete {
            tracing::info!(volume = %volume, pvs = listed.len(), "every PV enforced by project quotas; turning gluster's quota off");
            self.gluster
                .quota_disable(&volume)
                .await
                .map_err(AgentError::from)?;
            self.forget_quota_ready(&volume);
            quota_on = false;
        }
        if req.finish && quota_on && !complete {
            return Err(AgentError::Precondition(format!(
                "not every PV of {volume} is enforced on this node's bricks yet ({enforced_here} \
                 of {}): gluster's quota stays on; take another step",
                listed.len() as u32 * bricks_here
            ))
            .into());
        }
        Ok(Response::new(PvQuotaMoveResponse {
            pvs: listed.len() as u32,
            bricks_here,
            enforced_here,
            not_enforced_here,
            gluster_quota_on: quota_on,
        }))
    }
}
