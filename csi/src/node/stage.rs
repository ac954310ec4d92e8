//! NodeStageVolume and NodeUnstageVolume: one FUSE mount of the volume per node, recorded
//! before it is made so a restarted plugin knows it as its own.

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{NodeService, Reply};
use crate::mount;
use crate::request::{
    context_tls, context_tls_secret, invalid, mount_err, mount_flags, mount_source,
    profile_mount_flags,
};
use crate::state::StagedVolume;

impl NodeService {
    pub(super) async fn stage(
        &self,
        req: Request<csi::NodeStageVolumeRequest>,
    ) -> Reply<csi::NodeStageVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let staging = self
            .kubelet
            .staging("staging_target_path", &req.staging_target_path)?;
        let mut flags = mount_flags(req.volume_capability.as_ref())?;
        if let Some(cap) = &req.volume_capability {
            flags.extend(profile_mount_flags(&req.volume_context, cap, &flags)?);
        }
        let source = mount_source(&req.volume_context)?;
        let tls = context_tls(&req.volume_context)?;
        let tls_secret = context_tls_secret(&req.volume_context)?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        let previous = self.state.load(&req.volume_id).ok().flatten();
        if let Some(p) = previous.as_ref().filter(|p| p.staging != staging) {
            if mount::is_mounted(&p.staging).map_err(mount_err)? {
                return Err(Status::failed_precondition(format!(
                    "volume {} is staged on this node at {} already; unstage it there first",
                    req.volume_id,
                    p.staging.display()
                )));
            }
        }
        let record = StagedVolume {
            volume_id: req.volume_id.clone(),
            staging: staging.clone(),
            servers: source.servers.clone(),
            volume: source.volume.clone(),
            subdir: source.subdir.clone(),
            flags: flags.clone(),
            tls,
            tls_secret: tls_secret.clone(),
            mount_pod: self
                .mount_pods
                .as_ref()
                .map(|p| super::mount_pods::pod_name(&p.node, &req.volume_id)),
            targets: previous
                .filter(|p| p.staging == staging)
                .map(|p| p.targets)
                .unwrap_or_default(),
        };
        if mount::is_mounted(&staging).map_err(mount_err)? {
            self.save(&record)?;
            return Ok(Response::new(csi::NodeStageVolumeResponse {}));
        }
        std::fs::create_dir_all(&staging)
            .map_err(|e| Status::internal(format!("creating {}: {e}", staging.display())))?;
        let log = self.log_file(&req.volume_id);
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Status::internal(format!("creating {}: {e}", dir.display())))?;
        }
        tracing::info!(volume_id = %req.volume_id, staging = %staging.display(), "NodeStageVolume");
        // Recorded first: a plugin that dies mid-mount still knows the mount is its own.
        self.save(&record)?;
        match &self.mount_pods {
            Some(pods) => {
                if let Err(e) = pods.mount(&record).await {
                    // Nothing is left of a stage that did not mount: no pod restarting for
                    // ever, no record for the repair pass to make one again from.
                    if let Err(gone) = pods.remove(&req.volume_id, &record.staging).await {
                        tracing::warn!(volume_id = %req.volume_id, error = %gone.message(), "removing the mount pod of a failed stage");
                    } else if record.targets.is_empty() {
                        let _ = self.state.remove(&req.volume_id);
                    }
                    return Err(e);
                }
            }
            None => self
                .mount_volume(&source, &staging, &log, &flags, tls, tls_secret.is_some())
                .await
                .map_err(mount_err)?,
        }
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }

    pub(super) async fn unstage(
        &self,
        req: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Reply<csi::NodeUnstageVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let staging = self
            .kubelet
            .staging("staging_target_path", &req.staging_target_path)?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        tracing::info!(volume_id = %req.volume_id, "NodeUnstageVolume");
        // The mount pod's client unmounts as it stops; what is left is detached below.
        let recorded = self.state.load(&req.volume_id).ok().flatten();
        if let (Some(pods), Some(r)) = (&self.mount_pods, recorded) {
            if r.mount_pod.is_some() {
                pods.remove(&req.volume_id, &r.staging).await?;
            }
        }
        mount::unmount(&staging).map_err(mount_err)?;
        self.state
            .remove(&req.volume_id)
            .map_err(|e| Status::internal(format!("forgetting {}: {e}", req.volume_id)))?;
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }
}
