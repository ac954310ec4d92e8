//! NodePublishVolume and NodeUnpublishVolume: bind mounts of the staged volume into pods.

use csi::volume_capability::access_mode::Mode;
use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{NodeService, Reply};
use crate::mount;
use crate::request::{invalid, mount_err, mount_flags};
use crate::state::Published;

impl NodeService {
    pub(super) async fn publish(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let target = self.kubelet.target("target_path", &req.target_path)?;
        let staging = self
            .kubelet
            .staging("staging_target_path", &req.staging_target_path)?;
        mount_flags(req.volume_capability.as_ref())?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        if !mount::is_mounted(&staging).map_err(mount_err)? {
            return Err(Status::failed_precondition(format!(
                "volume {} is not staged at {}",
                req.volume_id,
                staging.display()
            )));
        }
        if mount::is_mounted(&target).map_err(mount_err)? {
            return Ok(Response::new(csi::NodePublishVolumeResponse {}));
        }
        let mode = req
            .volume_capability
            .as_ref()
            .and_then(|c| c.access_mode.as_ref())
            .map(|m| m.mode)
            .unwrap_or(0);
        let single_writer = mode == Mode::SingleNodeSingleWriter as i32 && !req.readonly;
        let mut record = self
            .state
            .load(&req.volume_id)
            .map_err(|e| Status::internal(format!("reading the state of {}: {e}", req.volume_id)))?
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "volume {} was not staged by this plugin",
                    req.volume_id
                ))
            })?;
        if let Some(other) = record.targets.iter().find(|t| t.path != target) {
            if single_writer {
                return Err(Status::failed_precondition(format!(
                    "volume {} is single-writer and already published at {}",
                    req.volume_id,
                    other.path.display()
                )));
            }
        }
        std::fs::create_dir_all(&target)
            .map_err(|e| Status::internal(format!("creating {}: {e}", target.display())))?;
        tracing::info!(volume_id = %req.volume_id, target = %target.display(), readonly = req.readonly, "NodePublishVolume");
        mount::bind(&staging, &target, req.readonly).map_err(mount_err)?;
        record.targets.retain(|t| t.path != target);
        record.targets.push(Published {
            path: target,
            readonly: req.readonly,
        });
        self.save(&record)?;
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }

    pub(super) async fn unpublish(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Reply<csi::NodeUnpublishVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let target = self.kubelet.target("target_path", &req.target_path)?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        tracing::info!(volume_id = %req.volume_id, target = %target.display(), "NodeUnpublishVolume");
        mount::unmount(&target).map_err(mount_err)?;
        if let Ok(Some(mut record)) = self.state.load(&req.volume_id) {
            record.targets.retain(|t| t.path != target);
            self.save(&record)?;
        }
        match std::fs::remove_dir(&target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(Status::internal(format!(
                    "removing {}: {e}",
                    target.display()
                )))
            }
        }
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }
}
