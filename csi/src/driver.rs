//! The CSI services: Identity, Controller (subdirectory volumes on a pool) and Node (FUSE
//! mounts staged once per node, bind-mounted into each pod).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use csi::controller_service_capability::rpc::Type as CtrlCap;
use csi::node_service_capability::rpc::Type as NodeCap;
use csi::volume_capability::access_mode::Mode;
use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use crate::backend::PoolResolver;
use crate::mount::{self, reattach, MountSource, Mounter};
use crate::params::{dir_for_name, ObjectKey, Provisioning, VolumeId};
use crate::state::{Published, StagedVolume, StateDir};

pub const DRIVER_NAME: &str = "gluster.glusterkube.dev";
pub const TOPOLOGY_KEY: &str = "topology.gluster.glusterkube.dev/node";
const DEFAULT_SIZE: u64 = 1 << 30;

type Reply<T> = Result<Response<T>, Status>;

/// Per-volume operation lock: a second call on a volume already being worked on is answered
/// with ABORTED, as the spec asks, instead of queuing behind it.
#[derive(Default, Clone)]
pub struct OpLocks(Arc<Mutex<HashSet<String>>>);

pub struct OpGuard(Arc<Mutex<HashSet<String>>>, String);

impl Drop for OpGuard {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}

impl OpLocks {
    pub fn try_lock(&self, key: &str) -> Result<OpGuard, Status> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !set.insert(key.to_string()) {
            return Err(Status::aborted(format!(
                "an operation on {key} is already in progress"
            )));
        }
        Ok(OpGuard(self.0.clone(), key.to_string()))
    }
}

pub struct Driver<P> {
    pub node_id: String,
    pub pools: Option<P>,
    pub mounter: Mounter,
    /// The node plugin's directory on the node: `logs/` (one gluster client log per volume)
    /// and `volumes/` (what is staged and published, read back after a restart).
    pub dir: PathBuf,
    pub ready: Arc<AtomicBool>,
    /// Where the FUSE clients read the plugin's gluster certificate (OpenSSL's directory),
    /// as seen by this process; None when the clients cannot read it (they run on the host).
    pub tls_dir: Option<PathBuf>,
    locks: OpLocks,
    state: StateDir,
}

impl<P: PoolResolver> Driver<P> {
    pub fn new(node_id: String, pools: Option<P>, mounter: Mounter, dir: PathBuf) -> Self {
        Self {
            node_id,
            pools,
            mounter,
            state: StateDir::new(dir.join("volumes")),
            dir,
            ready: Arc::new(AtomicBool::new(true)),
            tls_dir: Some(PathBuf::from("/usr/lib/ssl")),
            locks: OpLocks::default(),
        }
    }

    /// Mounts with gluster's TLS when the volume's cluster has it: the client presents the
    /// plugin's certificate from OpenSSL's directory (the chart mounts it there).
    async fn mount_volume(
        &self,
        source: &MountSource,
        target: &Path,
        log: &Path,
        flags: &[String],
        tls: bool,
    ) -> Result<(), mount::MountError> {
        if !tls {
            return self.mounter.mount(source, target, log, flags).await;
        }
        let Some(dir) = &self.tls_dir else {
            return Err(mount::MountError::Invalid {
                field: "volume_context.tls",
                reason: "the volume's cluster uses TLS, and this node plugin runs its gluster \
                         clients on the host (--mount-on-host), which has no client \
                         certificate; run the plugin without --mount-on-host"
                    .into(),
            });
        };
        if !dir.join("glusterfs.pem").exists() {
            return Err(mount::MountError::Invalid {
                field: "volume_context.tls",
                reason: format!(
                    "the volume's cluster uses TLS but this node plugin has no client \
                     certificate in {}; the operator issues it into Secret \
                     glusterkube-csi-gluster-tls, which the chart mounts there",
                    dir.display()
                ),
            });
        }
        self.mounter.mount_secure(source, target, log, flags).await
    }

    fn log_file(&self, volume_id: &str) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{}.log", volume_id.replace('/', "_")))
    }

    fn save(&self, v: &StagedVolume) -> Result<(), Status> {
        self.state.save(v).map_err(|e| {
            Status::internal(format!(
                "recording {} in {}: {e}",
                v.volume_id,
                self.dir.display()
            ))
        })
    }

    /// Repairs this plugin's mounts after a restart, or after a gluster client died: a staging
    /// mount whose client is gone (ENOTCONN) or that vanished is mounted again, every
    /// published target on the dead mount is bound again, and in every other mount namespace
    /// (running containers) a mount of the dead filesystem is replaced by the repaired one.
    pub async fn recover(&self) -> Repair {
        let mut report = Repair::default();
        // Read once: paths of different volumes never overlap, so repairing one volume does
        // not change what this says about the next.
        let table = match reattach::own_mounts() {
            Ok(t) => t,
            Err(e) => {
                report.failed.push(e.to_string());
                return report;
            }
        };
        let clients = mount::fuse_clients();
        for v in self.state.all() {
            let _guard = match self.locks.try_lock(&v.volume_id) {
                Ok(g) => g,
                Err(_) => continue,
            };
            let staging_device = reattach::device_at(&table, &v.staging);
            let staging_dead = staging_device.is_none() || client_gone(&clients, &v.staging);
            // Read before anything is unmounted: containers are found by these devices.
            let mut dead_devices: Vec<reattach::Device> = Vec::new();
            if staging_dead {
                dead_devices.extend(staging_device);
            }
            // A target is a bind mount of the staging mount, so it shares its device; one
            // that does not was bound before the staging mount was last repaired.
            let mut dead_targets: Vec<&Published> = Vec::new();
            for t in &v.targets {
                let device = reattach::device_at(&table, &t.path);
                if staging_dead || device.is_none() || device != staging_device {
                    dead_devices.extend(device);
                    dead_targets.push(t);
                }
            }
            dead_devices.sort();
            dead_devices.dedup();
            if !staging_dead && dead_targets.is_empty() {
                continue;
            }
            if staging_dead {
                tracing::warn!(volume_id = %v.volume_id, staging = %v.staging.display(), "staging mount is broken; remounting");
                let _ = nix::mount::umount2(&v.staging, nix::mount::MntFlags::MNT_DETACH);
                let source = MountSource {
                    servers: v.servers.clone(),
                    volume: v.volume.clone(),
                    subdir: v.subdir.clone(),
                };
                if let Err(e) = self
                    .mount_volume(
                        &source,
                        &v.staging,
                        &self.log_file(&v.volume_id),
                        &v.flags,
                        v.tls,
                    )
                    .await
                {
                    tracing::error!(volume_id = %v.volume_id, error = %e, "remount failed; the volume stays reported unhealthy and the next repair tries again");
                    report.failed.push(format!("{}: {e}", v.volume_id));
                    continue;
                }
            }
            for t in dead_targets {
                tracing::warn!(volume_id = %v.volume_id, target = %t.path.display(), "published mount is broken; binding again");
                let _ = nix::mount::umount2(&t.path, nix::mount::MntFlags::MNT_DETACH);
                if let Err(e) = mount::bind(&v.staging, &t.path, t.readonly) {
                    tracing::error!(volume_id = %v.volume_id, error = %e, "re-binding failed");
                    report.failed.push(format!("{}: {e}", v.volume_id));
                }
            }
            let staging = v.staging.clone();
            let (done, failed) = tokio::task::spawn_blocking(move || {
                reattach_in_containers(&staging, &dead_devices)
            })
            .await
            .unwrap_or_default();
            for m in &done {
                tracing::warn!(volume_id = %v.volume_id, mount = %m, "re-attached the repaired mount inside a running container");
            }
            for e in &failed {
                tracing::error!(volume_id = %v.volume_id, error = %e, "could not re-attach the repaired mount inside a container; restart that pod");
            }
            report.reattached.extend(done);
            report
                .failed
                .extend(failed.into_iter().map(|e| format!("{}: {e}", v.volume_id)));
            report.volumes.push(v.volume_id.clone());
        }
        report
    }

    fn pools(&self) -> Result<&P, Status> {
        self.pools.as_ref().ok_or_else(|| {
            Status::unimplemented(
                "this plugin runs in node mode; controller calls go to the controller",
            )
        })
    }
}

fn invalid(field: &str, reason: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("invalid {field}: {reason}"))
}

fn param_status(e: crate::params::ParamError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// Access modes this driver serves: any, since a gluster volume is a shared filesystem.
fn check_capabilities(caps: &[csi::VolumeCapability]) -> Result<(), Status> {
    if caps.is_empty() {
        return Err(invalid("volume_capabilities", "at least one is required"));
    }
    for (i, c) in caps.iter().enumerate() {
        match &c.access_type {
            Some(csi::volume_capability::AccessType::Mount(_)) => {}
            Some(csi::volume_capability::AccessType::Block(_)) => {
                return Err(invalid(
                    &format!("volume_capabilities[{i}]"),
                    "block access is not supported; gluster volumes are filesystems",
                ))
            }
            None => {
                return Err(invalid(
                    &format!("volume_capabilities[{i}].access_type"),
                    "is required",
                ))
            }
        }
        let mode = c.access_mode.as_ref().map(|m| m.mode).unwrap_or(0);
        match Mode::try_from(mode) {
            Ok(Mode::Unknown) | Err(_) => {
                return Err(invalid(
                    &format!("volume_capabilities[{i}].access_mode"),
                    "is required",
                ))
            }
            Ok(_) => {}
        }
    }
    Ok(())
}

fn required_bytes(range: Option<&csi::CapacityRange>) -> Result<u64, Status> {
    let Some(r) = range else {
        return Ok(DEFAULT_SIZE);
    };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(invalid("capacity_range", "sizes cannot be negative"));
    }
    let (req, lim) = (r.required_bytes as u64, r.limit_bytes as u64);
    if lim != 0 && req > lim {
        return Err(Status::out_of_range(format!(
            "required_bytes {req} is above limit_bytes {lim}"
        )));
    }
    Ok(match (req, lim) {
        (0, 0) => DEFAULT_SIZE,
        (0, lim) => lim.min(DEFAULT_SIZE),
        (req, _) => req,
    })
}

fn context(
    pool: &ObjectKey,
    volume: &str,
    servers: &[String],
    dir: &str,
    tls: bool,
) -> HashMap<String, String> {
    HashMap::from([
        ("pool".to_string(), pool.to_string()),
        ("glusterVolume".to_string(), volume.to_string()),
        ("servers".to_string(), servers.join(",")),
        ("subdir".to_string(), dir.to_string()),
        ("tls".to_string(), tls.to_string()),
    ])
}

#[tonic::async_trait]
impl<P: PoolResolver> csi::identity_server::Identity for Driver<P> {
    async fn get_plugin_info(
        &self,
        _: Request<csi::GetPluginInfoRequest>,
    ) -> Reply<csi::GetPluginInfoResponse> {
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: DRIVER_NAME.into(),
            vendor_version: env!("CARGO_PKG_VERSION").into(),
            manifest: HashMap::new(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Reply<csi::GetPluginCapabilitiesResponse> {
        use csi::plugin_capability::{
            service::Type as S, volume_expansion::Type as E, Service, Type, VolumeExpansion,
        };
        let mut caps = vec![csi::PluginCapability {
            r#type: Some(Type::VolumeExpansion(VolumeExpansion {
                r#type: E::Online as i32,
            })),
        }];
        if self.pools.is_some() {
            caps.push(csi::PluginCapability {
                r#type: Some(Type::Service(Service {
                    r#type: S::ControllerService as i32,
                })),
            });
        }
        Ok(Response::new(csi::GetPluginCapabilitiesResponse {
            capabilities: caps,
        }))
    }

    async fn probe(&self, _: Request<csi::ProbeRequest>) -> Reply<csi::ProbeResponse> {
        Ok(Response::new(csi::ProbeResponse {
            ready: Some(self.ready.load(Ordering::Relaxed)),
        }))
    }
}

#[tonic::async_trait]
impl<P: PoolResolver> csi::controller_server::Controller for Driver<P> {
    async fn create_volume(
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
                    .pools()?
                    .create_dedicated(&key, &provisioning, bytes)
                    .await?;
                let mut ctx = context(&key, &d.volume, &d.servers, "", d.tls);
                ctx.remove("subdir");
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
        let mut pool = self.pools()?.resolve(&pool_key).await?;
        pool.create_dir(&pool_key, &dir, bytes).await?;
        Ok(Response::new(csi::CreateVolumeResponse {
            volume: Some(csi::Volume {
                capacity_bytes: bytes as i64,
                volume_id: id.to_string(),
                volume_context: context(&pool_key, &pool.volume, &pool.servers, &dir, pool.tls),
                content_source: None,
                accessible_topology: vec![],
            }),
        }))
    }

    async fn delete_volume(
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
                let mut p = match self.pools()?.resolve(&pool).await {
                    Ok(p) => p,
                    Err(s) if s.code() == tonic::Code::NotFound => {
                        return Ok(Response::new(csi::DeleteVolumeResponse {}))
                    }
                    Err(s) => return Err(s),
                };
                p.delete_dir(&pool, &dir).await?;
            }
            VolumeId::Dedicated { volume } => self.pools()?.delete_dedicated(&volume).await?,
        }
        Ok(Response::new(csi::DeleteVolumeResponse {}))
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

    async fn validate_volume_capabilities(
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
                let mut p = self.pools()?.resolve(pool).await?;
                p.limit_of(pool, dir).await?.is_some()
            }
            VolumeId::Dedicated { volume } => self.pools()?.get_dedicated(volume).await?.is_some(),
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

    async fn list_volumes(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        let req = req.into_inner();
        if req.max_entries < 0 {
            return Err(invalid("max_entries", "cannot be negative"));
        }
        let start: usize = if req.starting_token.is_empty() {
            0
        } else {
            req.starting_token.parse().map_err(|_| {
                Status::aborted(format!(
                    "starting_token {:?} is not one this driver gave",
                    req.starting_token
                ))
            })?
        };
        let mut all = Vec::new();
        for key in self.pools()?.pools().await? {
            let mut p = self.pools()?.resolve(&key).await?;
            let mut dirs = p.dirs(&key).await?;
            dirs.sort();
            for (dir, bytes) in dirs {
                all.push(csi::Volume {
                    capacity_bytes: bytes as i64,
                    volume_id: VolumeId::Subdir {
                        pool: key.clone(),
                        dir: dir.clone(),
                    }
                    .to_string(),
                    volume_context: context(&key, &p.volume, &p.servers, &dir, p.tls),
                    content_source: None,
                    accessible_topology: vec![],
                });
            }
        }
        if start > all.len() {
            return Err(Status::aborted(format!(
                "starting_token {start} is past the {} volumes",
                all.len()
            )));
        }
        let take = if req.max_entries == 0 {
            usize::MAX
        } else {
            req.max_entries as usize
        };
        let end = start.saturating_add(take).min(all.len());
        let next_token = if end < all.len() {
            end.to_string()
        } else {
            String::new()
        };
        Ok(Response::new(csi::ListVolumesResponse {
            entries: all[start..end]
                .iter()
                .cloned()
                .map(|v| csi::list_volumes_response::Entry {
                    volume: Some(v),
                    status: None,
                })
                .collect(),
            next_token,
        }))
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

    async fn get_capacity(
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
            self.pools()?.pools().await?
        } else {
            match Provisioning::from_parameters(&req.parameters).map_err(param_status)? {
                Provisioning::Subdir { pool } => vec![pool],
                Provisioning::Dedicated { .. } => {
                    return Err(Status::unimplemented(
                        "parameters.mode: capacity is reported for subdir pools; a dedicated volume gets new bricks",
                    ))
                }
            }
        };
        let mut free = 0;
        for pool in &pools {
            let mut p = self.pools()?.resolve(pool).await?;
            free = free.max(p.free_bytes(pool).await?);
        }
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: free as i64,
            maximum_volume_size: Some(free as i64),
            minimum_volume_size: None,
        }))
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
        _: Request<csi::CreateSnapshotRequest>,
    ) -> Reply<csi::CreateSnapshotResponse> {
        Err(Status::unimplemented("snapshots are not supported"))
    }

    async fn delete_snapshot(
        &self,
        _: Request<csi::DeleteSnapshotRequest>,
    ) -> Reply<csi::DeleteSnapshotResponse> {
        Err(Status::unimplemented("snapshots are not supported"))
    }

    async fn list_snapshots(
        &self,
        _: Request<csi::ListSnapshotsRequest>,
    ) -> Reply<csi::ListSnapshotsResponse> {
        Err(Status::unimplemented("snapshots are not supported"))
    }

    async fn get_snapshot(
        &self,
        _: Request<csi::GetSnapshotRequest>,
    ) -> Reply<csi::GetSnapshotResponse> {
        Err(Status::unimplemented("snapshots are not supported"))
    }

    async fn controller_expand_volume(
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
                // Recorded on the GlusterVolume; gluster grows by bricks, not by a number.
                self.pools()?.expand_dedicated(volume, bytes).await?;
                return Ok(Response::new(csi::ControllerExpandVolumeResponse {
                    capacity_bytes: bytes as i64,
                    node_expansion_required: false,
                }));
            }
        };
        let mut p = self.pools()?.resolve(pool).await?;
        let current = p.limit_of(pool, dir).await?;
        let Some(current) = current else {
            return Err(Status::not_found(format!("volume {id} does not exist")));
        };
        let size = bytes.max(current);
        if size > current {
            p.expand_dir(pool, dir, size).await?;
        }
        // The quota applies on the server; mounted pods see the new size without a node step.
        Ok(Response::new(csi::ControllerExpandVolumeResponse {
            capacity_bytes: size as i64,
            node_expansion_required: false,
        }))
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

/// Whether the volume context asks for gluster's TLS; volumes made before TLS existed have no
/// such key and mount without it.
fn context_tls(ctx: &HashMap<String, String>) -> Result<bool, Status> {
    match ctx.get("tls").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(invalid(
            "volume_context.tls",
            format!("{other:?} must be true or false"),
        )),
    }
}

fn mount_source(ctx: &HashMap<String, String>) -> Result<MountSource, Status> {
    let get = |k: &str| {
        ctx.get(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(&format!("volume_context.{k}"), "is required"))
    };
    Ok(MountSource {
        servers: get("servers")?.split(',').map(str::to_string).collect(),
        volume: get("glusterVolume")?.clone(),
        subdir: ctx.get("subdir").filter(|s| !s.is_empty()).cloned(),
    })
}

fn mount_flags(cap: Option<&csi::VolumeCapability>) -> Result<Vec<String>, Status> {
    let cap = cap.ok_or_else(|| invalid("volume_capability", "is required"))?;
    check_capabilities(std::slice::from_ref(cap))?;
    Ok(match &cap.access_type {
        Some(csi::volume_capability::AccessType::Mount(m)) => m.mount_flags.clone(),
        _ => Vec::new(),
    })
}

/// A path from a CSI request: absolute, without NUL and without `.` or `..` components, so a
/// request cannot aim a mount or an unmount outside the directory it names.
fn path_arg(field: &str, p: &str) -> Result<PathBuf, Status> {
    let path = PathBuf::from(p);
    let reason = if p.is_empty() || !path.is_absolute() {
        "must be an absolute path"
    } else if p.contains('\0') {
        "must not contain a NUL byte"
    } else if p.split('/').any(|w| w == "." || w == "..") {
        "must not contain . or .. components"
    } else {
        return Ok(path);
    };
    Err(invalid(field, format!("{p:?} {reason}")))
}

fn mount_err(e: mount::MountError) -> Status {
    match e {
        mount::MountError::Invalid { .. } => Status::invalid_argument(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

#[tonic::async_trait]
impl<P: PoolResolver> csi::node_server::Node for Driver<P> {
    async fn node_stage_volume(
        &self,
        req: Request<csi::NodeStageVolumeRequest>,
    ) -> Reply<csi::NodeStageVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
        let flags = mount_flags(req.volume_capability.as_ref())?;
        let source = mount_source(&req.volume_context)?;
        let tls = context_tls(&req.volume_context)?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        let record = StagedVolume {
            volume_id: req.volume_id.clone(),
            staging: staging.clone(),
            servers: source.servers.clone(),
            volume: source.volume.clone(),
            subdir: source.subdir.clone(),
            flags: flags.clone(),
            tls,
            targets: self
                .state
                .load(&req.volume_id)
                .ok()
                .flatten()
                .map(|v| v.targets)
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
        self.mount_volume(&source, &staging, &log, &flags, tls)
            .await
            .map_err(mount_err)?;
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        req: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Reply<csi::NodeUnstageVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
        let _guard = self.locks.try_lock(&req.volume_id)?;
        tracing::info!(volume_id = %req.volume_id, "NodeUnstageVolume");
        mount::unmount(&staging).map_err(mount_err)?;
        self.state
            .remove(&req.volume_id)
            .map_err(|e| Status::internal(format!("forgetting {}: {e}", req.volume_id)))?;
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let target = path_arg("target_path", &req.target_path)?;
        let staging = path_arg("staging_target_path", &req.staging_target_path)?;
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

    async fn node_unpublish_volume(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Reply<csi::NodeUnpublishVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let target = path_arg("target_path", &req.target_path)?;
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

    async fn node_get_volume_stats(
        &self,
        req: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Reply<csi::NodeGetVolumeStatsResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        if req.volume_path.is_empty() {
            return Err(invalid("volume_path", "is required"));
        }
        let path = PathBuf::from(&req.volume_path);
        if !path.is_absolute() || !path.exists() {
            return Err(Status::not_found(format!(
                "{} does not exist on this node",
                path.display()
            )));
        }
        let st = nix::sys::statvfs::statvfs(&path)
            .map_err(|e| Status::internal(format!("statvfs {}: {e}", path.display())))?;
        let frag = st.fragment_size() as i64;
        let usage =
            |unit: csi::volume_usage::Unit, total: i64, avail: i64, free: i64| csi::VolumeUsage {
                available: avail,
                total,
                used: total - free,
                unit: unit as i32,
            };
        Ok(Response::new(csi::NodeGetVolumeStatsResponse {
            usage: vec![
                usage(
                    csi::volume_usage::Unit::Bytes,
                    st.blocks() as i64 * frag,
                    st.blocks_available() as i64 * frag,
                    st.blocks_free() as i64 * frag,
                ),
                usage(
                    csi::volume_usage::Unit::Inodes,
                    st.files() as i64,
                    st.files_available() as i64,
                    st.files_free() as i64,
                ),
            ],
        }))
    }

    async fn node_get_volume_health(
        &self,
        req: Request<csi::NodeGetVolumeHealthRequest>,
    ) -> Reply<csi::NodeGetVolumeHealthResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        // The paths asked about, or else every target this plugin published the volume at.
        let paths: Vec<PathBuf> = [&req.volume_publish_path, &req.staging_target_path]
            .into_iter()
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .chain(
                if req.volume_publish_path.is_empty() && req.staging_target_path.is_empty() {
                    self.state
                        .load(&req.volume_id)
                        .ok()
                        .flatten()
                        .map(|v| v.targets.into_iter().map(|t| t.path).collect())
                        .unwrap_or_default()
                } else {
                    Vec::new()
                },
            )
            .collect();
        let entries = paths
            .iter()
            .filter_map(|p| health(p))
            .map(
                |(status, reason, message)| csi::volume_health::VolumeHealthEntry {
                    status: status as i32,
                    reason: reason.into(),
                    message,
                },
            )
            .collect();
        Ok(Response::new(csi::NodeGetVolumeHealthResponse {
            volume_health: Some(csi::VolumeHealth {
                volume_id: req.volume_id,
                health_statuses: entries,
            }),
        }))
    }

    async fn node_get_storage_health(
        &self,
        _: Request<csi::NodeGetStorageHealthRequest>,
    ) -> Reply<csi::NodeGetStorageHealthResponse> {
        Err(Status::unimplemented(
            "storage health is reported per volume",
        ))
    }

    async fn node_expand_volume(
        &self,
        req: Request<csi::NodeExpandVolumeRequest>,
    ) -> Reply<csi::NodeExpandVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        if req.volume_path.is_empty() {
            return Err(invalid("volume_path", "is required"));
        }
        let path = PathBuf::from(&req.volume_path);
        if !path.is_absolute() || !path.exists() {
            return Err(Status::not_found(format!(
                "{} does not exist on this node",
                path.display()
            )));
        }
        let st = nix::sys::statvfs::statvfs(&path)
            .map_err(|e| Status::not_found(format!("{}: {e}", path.display())))?;
        // Quotas are enforced by the bricks; the mount already shows the new size.
        Ok(Response::new(csi::NodeExpandVolumeResponse {
            capacity_bytes: (st.blocks() as u64 * st.fragment_size()) as i64,
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Reply<csi::NodeGetCapabilitiesResponse> {
        let caps = [
            NodeCap::StageUnstageVolume,
            NodeCap::GetVolumeStats,
            NodeCap::ExpandVolume,
            NodeCap::SingleNodeMultiWriter,
            NodeCap::GetVolumeHealth,
        ]
        .into_iter()
        .map(|t| csi::NodeServiceCapability {
            r#type: Some(csi::node_service_capability::Type::Rpc(
                csi::node_service_capability::Rpc { r#type: t as i32 },
            )),
        })
        .collect();
        Ok(Response::new(csi::NodeGetCapabilitiesResponse {
            capabilities: caps,
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<csi::NodeGetInfoRequest>,
    ) -> Reply<csi::NodeGetInfoResponse> {
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: self.node_id.clone(),
            max_volumes_per_node: 0,
            accessible_topology: Some(csi::Topology {
                segments: HashMap::from([(TOPOLOGY_KEY.to_string(), self.node_id.clone())]),
            }),
        }))
    }
}

/// Whether the gluster client of the mounted `staging` is gone: no live process serves it
/// (`clients`, from [`mount::fuse_clients`]) and the mount answers ENOTCONN. A live client
/// answers ENOTCONN too while no brick is reachable; that is the volume's failure, which a
/// remount would not mend. Mounts with a live client are not asked at all, so a repair pass
/// costs no round trip to the bricks.
fn client_gone(clients: &HashMap<PathBuf, i32>, staging: &Path) -> bool {
    !clients.contains_key(staging)
        && nix::sys::statvfs::statvfs(staging).err() == Some(nix::Error::ENOTCONN)
}

/// What one repair pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Volumes whose staging or published mounts were mounted again.
    pub volumes: Vec<String>,
    /// Mounts replaced inside running containers, as `pid <n>: <path in the container>`.
    pub reattached: Vec<String>,
    /// What could not be repaired, and why.
    pub failed: Vec<String>,
}

/// Replaces the mounts of `dead` devices in other mount namespaces with the matching part
/// of the repaired mount at `staging`. Returns what was replaced and what failed.
fn reattach_in_containers(staging: &Path, dead: &[reattach::Device]) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    if dead.is_empty() {
        return (done, failed);
    }
    for holder in reattach::holders(dead) {
        for m in &holder.mounts {
            let where_ = format!("pid {}: {}", holder.pid, m.mount_point.display());
            let Some(source) = reattach::source_for(staging, m) else {
                failed.push(format!("{where_}: unusable mount root {:?}", m.root));
                continue;
            };
            match reattach::reattach(holder.pid, m, &source) {
                Ok(()) => done.push(where_),
                Err(e) => failed.push(format!("{where_}: {e}")),
            }
        }
    }
    (done, failed)
}

/// Why a mounted volume is unhealthy, or None when it answers.
pub fn health(path: &Path) -> Option<(csi::VolumeHealthErrorType, &'static str, String)> {
    match nix::sys::statvfs::statvfs(path) {
        Ok(_) => None,
        Err(nix::Error::ENOTCONN) => Some((
            csi::VolumeHealthErrorType::Inaccessible,
            "TransportEndpointNotConnected",
            format!(
                "{}: the gluster client behind this mount is gone",
                path.display()
            ),
        )),
        Err(nix::Error::ENOENT) => Some((
            csi::VolumeHealthErrorType::Inaccessible,
            "NotMounted",
            format!("{} does not exist", path.display()),
        )),
        Err(e) => Some((
            csi::VolumeHealthErrorType::Degraded,
            "StatFailed",
            format!("{}: {e}", path.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        #[test]
        fn request_paths_found_by_the_property_are_refused() {
            // Accepted before path_arg checked NUL and `..` (the first was proptest's minimal
            // failing input).
            for p in ["//\0", "/var/lib/kubelet/../../etc", "/a/./b"] {
                let e = path_arg("target_path", p).unwrap_err();
                assert!(e.message().contains("target_path"), "{p:?}: {e:?}");
            }
            assert!(path_arg("target_path", "/var/lib/kubelet/pods/x/volumes/y").is_ok());
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// A staging or target path from a CSI request is used only if it is absolute,
            /// has no `.` or `..` component and no NUL: a caller cannot point a mount at
            /// `/var/lib/kubelet/../../etc`.
            #[test]
            fn request_paths_cannot_traverse(
                p in "(/|\\.\\.|\\.|[a-z]{1,5}|\\x00|//){0,12}|.{0,40}"
            ) {
                if let Ok(path) = path_arg("target_path", &p) {
                    prop_assert!(path.is_absolute());
                    prop_assert!(!p.contains('\0'));
                    prop_assert!(path.components().all(|c| matches!(
                        c,
                        std::path::Component::RootDir | std::path::Component::Normal(_)
                    )), "{p:?}");
                    prop_assert!(!p.split('/').any(|w| w == ".."), "{p:?}");
                }
            }
        }
    }

    #[test]
    fn op_lock_aborts_a_second_caller_and_frees_on_drop() {
        let locks = OpLocks::default();
        let g = locks.try_lock("v").unwrap();
        assert_eq!(
            locks.try_lock("v").err().unwrap().code(),
            tonic::Code::Aborted
        );
        locks.try_lock("w").unwrap();
        drop(g);
        locks.try_lock("v").unwrap();
    }

    #[test]
    fn sizes() {
        assert_eq!(required_bytes(None).unwrap(), DEFAULT_SIZE);
        let r = |req, lim| {
            required_bytes(Some(&csi::CapacityRange {
                required_bytes: req,
                limit_bytes: lim,
            }))
        };
        assert_eq!(r(5, 0).unwrap(), 5);
        assert_eq!(r(0, 1 << 20).unwrap(), 1 << 20);
        assert_eq!(r(10, 5).unwrap_err().code(), tonic::Code::OutOfRange);
        assert_eq!(r(-1, 0).unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn capabilities() {
        let cap = |access, mode: Mode| csi::VolumeCapability {
            access_type: access,
            access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
        };
        let mount = Some(csi::volume_capability::AccessType::Mount(Default::default()));
        let block = Some(csi::volume_capability::AccessType::Block(Default::default()));
        check_capabilities(&[cap(mount.clone(), Mode::MultiNodeMultiWriter)]).unwrap();
        assert!(check_capabilities(&[cap(block, Mode::SingleNodeWriter)])
            .unwrap_err()
            .message()
            .contains("block"));
        assert!(check_capabilities(&[cap(mount, Mode::Unknown)]).is_err());
        assert!(check_capabilities(&[]).is_err());
    }
}
