//! ControllerExpandVolume: a subdirectory's limit raised online, or a dedicated
//! GlusterVolume's size recorded for the operator.

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{ControllerService, Reply};
use crate::backend::{PoolResolver, DEDICATED_DIR};
use crate::params::VolumeId;
use crate::request::{invalid, required_bytes};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn expand(
        &self,
        req: Request<csi::ControllerExpandVolumeRequest>,
    ) -> Reply<csi::ControllerExpandVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let id = VolumeId::parse(&req.volume_id)
            .map_err(|_| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
        let bytes = required_bytes(req.capacity_range.as_ref())?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        tracing::info!(volume_id = %id, bytes, "ControllerExpandVolume");
        let (pool, dir) = match &id {
            VolumeId::Subdir { pool, dir } => (pool, dir),
            VolumeId::Dedicated { volume } => {
                // The operator grows the volume (by bricks) to hold the new size; then the
                // PV's directory may take it.
                self.pools.expand_dedicated(volume, bytes).await?;
                let mut p = self.pools.resolve(volume).await?;
                if let Some(current) = p.limit_of(volume, DEDICATED_DIR).await? {
                    if bytes > current {
                        p.expand_dir(volume, DEDICATED_DIR, bytes).await?;
                    }
                }
                return Ok(Response::new(csi::ControllerExpandVolumeResponse {
                    capacity_bytes: bytes as i64,
                    node_expansion_required: false,
                }));
            }
        };
        let mut p = self.resolve(pool).await?;
        let current = p.limit_of(pool, dir).await?;
        let Some(current) = current else {
            return Err(Status::not_found(format!("volume {id} does not exist")));
        };
        let size = bytes.max(current);
        if size > current {
            p.check_fits(pool, size).await?;
            p.expand_dir(pool, dir, size).await?;
        }
        // The quota applies on the server; mounted pods see the new size without a node step.
        Ok(Response::new(csi::ControllerExpandVolumeResponse {
            capacity_bytes: size as i64,
            node_expansion_required: false,
        }))
    }
}
