//! DeleteVolume: the subdirectory and its data, or the dedicated GlusterVolume.

use csi_proto::v1 as csi;
use tonic::{Request, Response};

use super::{ControllerService, Reply};
use crate::backend::PoolResolver;
use crate::params::VolumeId;
use crate::request::invalid;

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn delete(
        &self,
        req: Request<csi::DeleteVolumeRequest>,
    ) -> Reply<csi::DeleteVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        // An ID this driver never made cannot exist: deleting it is a success.
        let Ok(id) = VolumeId::parse(&req.volume_id) else {
            return Ok(Response::new(csi::DeleteVolumeResponse {}));
        };
        let _guard = self.locks.try_lock(&req.volume_id)?;
        tracing::info!(volume_id = %id, "DeleteVolume");
        match id {
            VolumeId::Subdir { pool, dir } => {
                let mut p = match self.resolve(&pool).await {
                    Ok(p) => p,
                    Err(s) if s.code() == tonic::Code::NotFound => {
                        return Ok(Response::new(csi::DeleteVolumeResponse {}))
                    }
                    Err(s) => return Err(s),
                };
                p.delete_dir(&pool, &dir).await?;
            }
            VolumeId::Dedicated { volume } => self.pools.delete_dedicated(&volume).await?,
        }
        Ok(Response::new(csi::DeleteVolumeResponse {}))
    }
}
