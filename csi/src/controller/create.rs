//! CreateVolume: a quota'd subdirectory of a pool GlusterVolume, or a dedicated
//! GlusterVolume made through the operator.

use csi_proto::v1 as csi;
use tonic::{Request, Response};

use super::{ControllerService, Reply};
use crate::backend::{PoolResolver, DEDICATED_DIR};
use crate::params::{dir_for_name, ObjectKey, Provisioning, VolumeId};
use crate::request::{check_capabilities, invalid, param_status, required_bytes, volume_context};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn create(
        &self,
        req: Request<csi::CreateVolumeRequest>,
    ) -> Reply<csi::CreateVolumeResponse> {
        let req = req.into_inner();
        if req.name.is_empty() {
            return Err(invalid("name", "is required"));
        }
        check_capabilities(&req.volume_capabilities)?;
        if req.volume_content_source.is_some() {
            return Err(invalid(
                "volume_content_source",
                "snapshots and clones are not supported",
            ));
        }
        let bytes = required_bytes(req.capacity_range.as_ref())?;
        let provisioning = Provisioning::from_parameters(&req.parameters).map_err(param_status)?;
        let dir = dir_for_name(&req.name).map_err(param_status)?;
        let pool_key = match &provisioning {
            Provisioning::Subdir { pool } => pool.clone(),
            Provisioning::Dedicated { cluster, .. } => {
                let key = ObjectKey {
                    namespace: cluster.namespace.clone(),
                    name: dir,
                };
                let id = VolumeId::Dedicated {
                    volume: key.clone(),
                };
                let _guard = self.locks.try_lock(&id.to_string())?;
                tracing::info!(name = %req.name, volume_id = %id, bytes, "CreateVolume");
                let d = self
                    .pools
                    .create_dedicated(&key, &provisioning, bytes)
                    .await?;
                // The PV's data lives in a directory with a quota of its size, so `df` shows
                // the PV's size and a write past it fails, as on a subdirectory PV.
                let mut pool = self.pools.resolve(&key).await?;
                pool.create_dir(&key, DEDICATED_DIR, bytes).await?;
                let ctx = volume_context(&key, &d.volume, &d.servers, DEDICATED_DIR, d.tls);
                return Ok(Response::new(csi::CreateVolumeResponse {
                    volume: Some(csi::Volume {
                        capacity_bytes: bytes as i64,
                        volume_id: id.to_string(),
                        volume_context: ctx,
                        content_source: None,
                        accessible_topology: vec![],
                    }),
                }));
            }
        };
        let id = VolumeId::Subdir {
            pool: pool_key.clone(),
            dir: dir.clone(),
        };
        let _guard = self.locks.try_lock(&id.to_string())?;
        tracing::info!(name = %req.name, volume_id = %id, bytes, "CreateVolume");
        let mut pool = self.pools.resolve(&pool_key).await?;
        pool.check_fits(&pool_key, bytes).await?;
        pool.create_dir(&pool_key, &dir, bytes).await?;
        Ok(Response::new(csi::CreateVolumeResponse {
            volume: Some(csi::Volume {
                capacity_bytes: bytes as i64,
                volume_id: id.to_string(),
                volume_context: volume_context(
                    &pool_key,
                    &pool.volume,
                    &pool.servers,
                    &dir,
                    pool.tls,
                ),
                content_source: None,
                accessible_topology: vec![],
            }),
        }))
    }
}
