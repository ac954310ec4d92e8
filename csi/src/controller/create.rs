//! CreateVolume: a quota'd subdirectory of a pool GlusterVolume (empty, or filled from a
//! snapshot or another volume of the pool), or a dedicated GlusterVolume made through the
//! operator.

/// How long CreateVolume waits for a restore's or clone's copy before telling the
/// provisioner to call again (it does, with backoff, and the copy goes on meanwhile).
const FILL_WAIT_SECONDS: u32 = 60;

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::snapshot::DEDICATED_REFUSAL;
use super::{ControllerService, Reply};
use crate::backend::{PoolResolver, Source, DEDICATED_DIR};
use crate::params::{
    claim_of, dir_for_name, subdir_for, ObjectKey, PoolKey, Provisioning, SnapshotId, VolumeId,
};
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
        let content = req.volume_content_source.clone();
        let source = content_source(content.as_ref())?;
        let bytes = required_bytes(req.capacity_range.as_ref())?;
        let provisioning = Provisioning::from_parameters(&req.parameters).map_err(param_status)?;
        if source.is_some() && matches!(provisioning, Provisioning::Dedicated { .. }) {
            return Err(invalid("volume_content_source", DEDICATED_REFUSAL));
        }
        let pool_key = match &provisioning {
            Provisioning::Subdir { pool } => pool.clone(),
            Provisioning::Dedicated { cluster, .. } => {
                let key = ObjectKey {
                    namespace: cluster.namespace.clone(),
                    name: dir_for_name(&req.name).map_err(param_status)?,
                };
                let id = VolumeId::Dedicated {
                    volume: key.clone(),
                };
                let _guard = self.locks.try_lock(&id.to_string())?;
                tracing::info!(name = %req.name, volume_id = %id, bytes, "CreateVolume");
                let d = self
                    .pools
                    .create_dedicated(
                        &key,
                        &provisioning,
                        bytes,
                        claim_of(&req.parameters).as_ref(),
                    )
                    .await?;
                // The PV's data lives in a directory with a quota of its size, so `df` shows
                // the PV's size and a write past it fails, as on a subdirectory PV.
                let mut pool = self.pools.resolve(&key).await?;
                pool.create_dir(&key, DEDICATED_DIR, bytes).await?;
                let ctx = volume_context(
                    &key,
                    &d.volume,
                    &d.servers,
                    DEDICATED_DIR,
                    d.tls,
                    None,
                    d.profile,
                );
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
        let dir = subdir_for(&req.name, &req.parameters).map_err(param_status)?;
        let id = VolumeId::Subdir {
            pool: pool_key.clone(),
            dir: dir.clone(),
        };
        let _guard = self.locks.try_lock(&id.to_string())?;
        tracing::info!(name = %req.name, volume_id = %id, bytes, "CreateVolume");
        let mut pool = self.resolve(&pool_key).await?;
        let fill = match &source {
            Some((from_pool, from)) => {
                let need = self
                    .source_bytes(&mut pool, from_pool, &pool_key, from)
                    .await?;
                // No size asked: the source's. A size asked must hold the source.
                let bytes = if req.capacity_range.is_none() {
                    bytes.max(need)
                } else {
                    bytes
                };
                if bytes < need {
                    return Err(Status::out_of_range(format!(
                        "capacity_range: {bytes} bytes cannot hold the source's {need}; ask \
                         for at least that"
                    )));
                }
                Some((from.clone(), bytes))
            }
            None => None,
        };
        let bytes = fill.as_ref().map_or(bytes, |(_, b)| *b);
        pool.check_fits(&pool_key, bytes).await?;
        pool.create_dir(&pool_key, &dir, bytes).await?;
        if let Some((from, _)) = &fill {
            if !pool
                .fill_dir(&pool_key, &dir, from, FILL_WAIT_SECONDS)
                .await?
            {
                return Err(Status::unavailable(format!(
                    "copying {from:?} into {id} still runs; CreateVolume again to wait for it"
                )));
            }
        }
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
                    pool.tls_secret.as_deref(),
                    pool.profile,
                ),
                content_source: content,
                accessible_topology: vec![],
            }),
        }))
    }

    /// Bytes a new volume must hold to take `from`: a snapshot's size, or the cloned
    /// volume's limit. NotFound when the source does not exist.
    async fn source_bytes(
        &self,
        pool: &mut crate::backend::Pool,
        from_pool: &PoolKey,
        pool_key: &PoolKey,
        from: &Source,
    ) -> Result<u64, Status> {
        if from_pool != pool_key {
            return Err(invalid(
                "volume_content_source",
                format!(
                    "the source lives on pool {from_pool}, and copies stay in their pool; \
                     use a StorageClass whose pool is {from_pool}"
                ),
            ));
        }
        let found = match from {
            Source::Snapshot(name) => pool
                .snapshot(pool_key, name)
                .await?
                .map(|s| (s.ready, s.size_bytes)),
            Source::Dir(dir) => pool.limit_of(pool_key, dir).await?.map(|b| (true, b)),
        };
        match found {
            Some((true, bytes)) => Ok(bytes),
            Some((false, _)) => Err(Status::unavailable(format!(
                "volume_content_source: snapshot {from:?} is still being copied; try again \
                 when it is ready to use"
            ))),
            None => Err(Status::not_found(format!(
                "volume_content_source: {from:?} on pool {pool_key} does not exist"
            ))),
        }
    }
}

/// The pool and source a content source names. Sources this driver never made cannot
/// exist, so they are NotFound, as the CSI spec asks.
fn content_source(
    src: Option<&csi::VolumeContentSource>,
) -> Result<Option<(PoolKey, Source)>, Status> {
    use csi::volume_content_source::Type;
    let Some(src) = src else { return Ok(None) };
    match &src.r#type {
        Some(Type::Snapshot(s)) => match SnapshotId::parse(&s.snapshot_id) {
            Ok(id) => Ok(Some((id.pool, Source::Snapshot(id.name)))),
            Err(_) => Err(Status::not_found(format!(
                "volume_content_source.snapshot.snapshot_id: snapshot {:?} does not exist",
                s.snapshot_id
            ))),
        },
        Some(Type::Volume(v)) => match VolumeId::parse(&v.volume_id) {
            Ok(VolumeId::Subdir { pool, dir }) => Ok(Some((pool, Source::Dir(dir)))),
            Ok(VolumeId::Dedicated { .. }) => Err(invalid(
                "volume_content_source.volume.volume_id",
                DEDICATED_REFUSAL,
            )),
            Err(_) => Err(Status::not_found(format!(
                "volume_content_source.volume.volume_id: volume {:?} does not exist",
                v.volume_id
            ))),
        },
        None => Err(invalid(
            "volume_content_source",
            "names no snapshot or volume",
        )),
    }
}
