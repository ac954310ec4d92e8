//! The CSI Controller service: volumes on pools, found through a [`PoolResolver`]. Each RPC
//! that does something has a file of its own; this one wires them to the gRPC trait and
//! answers the RPCs the driver does not offer.

mod capacity;
mod create;
mod delete;
mod expand;
mod list;
mod snapshot;
mod validate;

use csi::controller_service_capability::rpc::Type as CtrlCap;
use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use crate::backend::{Pool, PoolResolver};
use crate::external::ExternalPools;
use crate::locks::OpLocks;
use crate::params::PoolKey;

type Reply<T> = Result<Response<T>, Status>;

pub struct ControllerService<P> {
    /// Pool GlusterVolumes and dedicated volumes.
    pools: P,
    /// Pools made by hand, when this controller reads their Secrets.
    external: Option<ExternalPools>,
    locks: OpLocks,
    /// Where a snapshot's Event goes (on its VolumeSnapshot), when this controller has an
    /// API client.
    recorder: Option<kube::runtime::events::Recorder>,
}

impl<P: PoolResolver> ControllerService<P> {
    pub fn new(pools: P) -> Self {
        Self {
            pools,
            external: None,
            locks: OpLocks::default(),
            recorder: None,
        }
    }

    /// Also says on each VolumeSnapshot how its copy was made (an Event).
    pub fn with_events(mut self, recorder: kube::runtime::events::Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Also serves pools made by hand (StorageClass `mode: external`).
    pub fn with_external(mut self, external: ExternalPools) -> Self {
        self.external = Some(external);
        self
    }

    /// The pool a subdirectory volume or snapshot lives on, from whichever declares it.
    async fn resolve(&self, key: &PoolKey) -> Result<Pool, Status> {
        match key {
            PoolKey::Volume(k) => self.pools.resolve(k).await,
            PoolKey::External(k) => match &self.external {
                Some(e) => e.resolve(k).await,
                None => Err(Status::failed_precondition(format!(
                    "pool {key}: this CSI controller serves no external pools (it has no \
                     Kubernetes API to read their Secrets)"
                ))),
            },
        }
    }

    /// Every pool, for listing and capacity.
    async fn all_pools(&self) -> Result<Vec<PoolKey>, Status> {
        let mut all: Vec<PoolKey> = self
            .pools
            .pools()
            .await?
            .into_iter()
            .map(PoolKey::Volume)
            .collect();
        if let Some(e) = &self.external {
            all.extend(e.pools().await?.into_iter().map(PoolKey::External));
        }
        Ok(all)
    }
}

#[tonic::async_trait]
impl<P: PoolResolver> csi::controller_server::Controller for ControllerService<P> {
    async fn create_volume(
        &self,
        req: Request<csi::CreateVolumeRequest>,
    ) -> Reply<csi::CreateVolumeResponse> {
        self.create(req).await
    }

    async fn delete_volume(
        &self,
        req: Request<csi::DeleteVolumeRequest>,
    ) -> Reply<csi::DeleteVolumeResponse> {
        self.delete(req).await
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Reply<csi::ValidateVolumeCapabilitiesResponse> {
        self.validate(req).await
    }

    async fn list_volumes(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        self.list(req).await
    }

    async fn get_capacity(
        &self,
        req: Request<csi::GetCapacityRequest>,
    ) -> Reply<csi::GetCapacityResponse> {
        self.capacity(req).await
    }

    async fn controller_expand_volume(
        &self,
        req: Request<csi::ControllerExpandVolumeRequest>,
    ) -> Reply<csi::ControllerExpandVolumeResponse> {
        self.expand(req).await
    }

    async fn controller_publish_volume(
        &self,
        _: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Reply<csi::ControllerPublishVolumeResponse> {
        Err(Status::unimplemented(
            "no attach step: gluster volumes are mounted by the node plugin",
        ))
    }

    async fn controller_unpublish_volume(
        &self,
        _: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Reply<csi::ControllerUnpublishVolumeResponse> {
        Err(Status::unimplemented(
            "no attach step: gluster volumes are mounted by the node plugin",
        ))
    }

    async fn controller_list_volume_health(
        &self,
        _: Request<csi::ControllerListVolumeHealthRequest>,
    ) -> Reply<csi::ControllerListVolumeHealthResponse> {
        Err(Status::unimplemented(
            "volume health is reported by the node plugin",
        ))
    }

    async fn controller_get_volume_health(
        &self,
        _: Request<csi::ControllerGetVolumeHealthRequest>,
    ) -> Reply<csi::ControllerGetVolumeHealthResponse> {
        Err(Status::unimplemented(
            "volume health is reported by the node plugin",
        ))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Reply<csi::ControllerGetCapabilitiesResponse> {
        let caps = [
            CtrlCap::CreateDeleteVolume,
            CtrlCap::ListVolumes,
            CtrlCap::GetCapacity,
            CtrlCap::ExpandVolume,
            CtrlCap::SingleNodeMultiWriter,
            CtrlCap::CreateDeleteSnapshot,
            CtrlCap::ListSnapshots,
            CtrlCap::GetSnapshot,
            CtrlCap::CloneVolume,
        ]
        .into_iter()
        .map(|t| csi::ControllerServiceCapability {
            r#type: Some(csi::controller_service_capability::Type::Rpc(
                csi::controller_service_capability::Rpc { r#type: t as i32 },
            )),
        })
        .collect();
        Ok(Response::new(csi::ControllerGetCapabilitiesResponse {
            capabilities: caps,
        }))
    }

    async fn create_snapshot(
        &self,
        req: Request<csi::CreateSnapshotRequest>,
    ) -> Reply<csi::CreateSnapshotResponse> {
        self.snapshot_create(req).await
    }

    async fn delete_snapshot(
        &self,
        req: Request<csi::DeleteSnapshotRequest>,
    ) -> Reply<csi::DeleteSnapshotResponse> {
        self.snapshot_delete(req).await
    }

    async fn list_snapshots(
        &self,
        req: Request<csi::ListSnapshotsRequest>,
    ) -> Reply<csi::ListSnapshotsResponse> {
        self.snapshot_list(req).await
    }

    async fn get_snapshot(
        &self,
        req: Request<csi::GetSnapshotRequest>,
    ) -> Reply<csi::GetSnapshotResponse> {
        self.snapshot_get(req).await
    }

    async fn controller_get_volume(
        &self,
        _: Request<csi::ControllerGetVolumeRequest>,
    ) -> Reply<csi::ControllerGetVolumeResponse> {
        Err(Status::unimplemented("GetVolume is not offered"))
    }

    async fn controller_modify_volume(
        &self,
        _: Request<csi::ControllerModifyVolumeRequest>,
    ) -> Reply<csi::ControllerModifyVolumeResponse> {
        Err(Status::unimplemented("ModifyVolume is not offered"))
    }
}
