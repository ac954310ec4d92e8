//! ValidateVolumeCapabilities: the volume exists and the capabilities are ones it serves.

use std::collections::HashMap;

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{ControllerService, Reply};
use crate::backend::PoolResolver;
use crate::params::VolumeId;
use crate::request::{check_capabilities, invalid};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn validate(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Reply<csi::ValidateVolumeCapabilitiesResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let id = VolumeId::parse(&req.volume_id)
            .map_err(|_| Status::not_found(format!("volume {} does not exist", req.volume_id)))?;
        check_capabilities(&req.volume_capabilities)?;
        let exists = match &id {
            VolumeId::Subdir { pool, dir } => {
                let mut p = self.resolve(pool).await?;
                p.limit_of(pool, dir).await?.is_some()
            }
            VolumeId::Dedicated { volume } => self.pools.get_dedicated(volume).await?.is_some(),
        };
        if !exists {
            return Err(Status::not_found(format!("volume {id} does not exist")));
        }
        Ok(Response::new(csi::ValidateVolumeCapabilitiesResponse {
            confirmed: Some(csi::validate_volume_capabilities_response::Confirmed {
                volume_context: req.volume_context,
                volume_capabilities: req.volume_capabilities,
                parameters: req.parameters,
                mutable_parameters: HashMap::new(),
            }),
            message: String::new(),
        }))
    }
}
