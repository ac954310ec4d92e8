//! GetCapacity: what a new volume can still be promised.

use csi_proto::v1 as csi;
use tonic::{Request, Response};

use super::{ControllerService, Reply};
use crate::backend::PoolResolver;
use crate::params::Provisioning;
use crate::request::{check_capabilities, param_status};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn capacity(
        &self,
        req: Request<csi::GetCapacityRequest>,
    ) -> Reply<csi::GetCapacityResponse> {
        let req = req.into_inner();
        if let Some(caps) =
            (!req.volume_capabilities.is_empty()).then_some(&req.volume_capabilities)
        {
            check_capabilities(caps)?;
        }
        // Without parameters: the largest volume any pool can still take.
        let pools = if req.parameters.is_empty() {
            self.all_pools().await?
        } else {
            match Provisioning::from_parameters(&req.parameters).map_err(param_status)? {
                Provisioning::Subdir { pool } => vec![pool],
                dedicated @ Provisioning::Dedicated { .. } => {
                    let free = self.pools.dedicated_capacity(&dedicated).await?;
                    return Ok(Response::new(csi::GetCapacityResponse {
                        available_capacity: free as i64,
                        maximum_volume_size: Some(free as i64),
                        minimum_volume_size: None,
                    }));
                }
            }
        };
        let mut free = 0;
        for pool in &pools {
            let mut p = self.resolve(pool).await?;
            free = free.max(p.free_bytes(pool).await?);
        }
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: free as i64,
            maximum_volume_size: Some(free as i64),
            minimum_volume_size: None,
        }))
    }
}
