//! The CSI Node service: FUSE mounts staged once per node and bind-mounted into each pod,
//! what the kubelet asks of them, and their repair. Each stage has a file of its own; this
//! one holds the service's state and wires the stages to the gRPC trait.

pub mod mount_events;
pub mod mount_pods;
mod publish;
pub mod reap;
mod repair;
mod stage;
mod stats;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use csi::node_service_capability::rpc::Type as NodeCap;
use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

pub use repair::Repair;
pub use stats::health;

use crate::locks::OpLocks;
use crate::mount::{self, MountSource, Mounter};
use crate::request::KubeletDirs;
use crate::state::{StagedVolume, StateDir};
use crate::TOPOLOGY_KEY;

type Reply<T> = Result<Response<T>, Status>;

pub struct NodeService {
    node_id: String,
    mounter: Mounter,
    /// The node plugin's directory on the node: `logs/` (one gluster client log per volume)
    /// and `volumes/` (what is staged and published, read back after a restart).
    dir: PathBuf,
    /// Probe's answer (shared with the Identity service): false until the mounts a previous
    /// plugin left have been checked.
    pub ready: Arc<AtomicBool>,
    /// Where the FUSE clients read the plugin's gluster certificate (OpenSSL's directory),
    /// as seen by this process; None when the clients cannot read it (they run on the host).
    pub tls_dir: Option<PathBuf>,
    /// The kubelet's directories, where alone this plugin mounts.
    pub kubelet: KubeletDirs,
    /// Where the gluster clients run: in mount pods of their own (production), or, without
    /// them, in this plugin's container.
    pub mount_pods: Option<mount_pods::MountPods>,
    locks: OpLocks,
    state: StateDir,
    /// Per volume, dead devices some container still held when a repair could not reattach
    /// it: the next passes try those containers again, though their host mounts look well.
    unattached: std::sync::Mutex<HashMap<String, Vec<gk_mount::reattach::Device>>>,
    /// Volumes a repair pass has looked for such containers since this plugin started (it
    /// may have been restarted while one was left on a dead device), once each mounted.
    swept: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl NodeService {
    pub fn new(node_id: String, mounter: Mounter, dir: PathBuf) -> Self {
        Self {
            node_id,
            mounter,
            state: StateDir::new(dir.join("volumes")),
            unattached: Default::default(),
            swept: Default::default(),
            dir,
            ready: Arc::new(AtomicBool::new(true)),
            tls_dir: Some(PathBuf::from("/usr/lib/ssl")),
            kubelet: KubeletDirs::default(),
            mount_pods: None,
            locks: OpLocks::default(),
        }
    }

    /// Mounts with gluster's TLS when the volume's cluster has it: the client presents the
    /// plugin's certificate from OpenSSL's directory (the chart mounts it there). A pool
    /// made by hand with I/O TLS only (`own_certificate` without `tls`) needs the certificate
    /// but fetches its volfile in clear. This plugin's clients have one certificate
    /// directory: a pool with a CA of its own is served here only if that directory holds a
    /// certificate of that CA (mount pods mount each pool's own).
    async fn mount_volume(
        &self,
        source: &MountSource,
        target: &Path,
        log: &Path,
        flags: &[String],
        tls: bool,
        own_certificate: bool,
    ) -> Result<(), mount::MountError> {
        if !tls && !own_certificate {
            return self.mounter.mount(source, target, log, flags).await;
        }
        let Some(dir) = &self.tls_dir else {
            return Err(mount::MountError::Invalid {
                field: "volume_context.tls",
                reason: "the volume's cluster uses TLS, and this node plugin has no client \
                         certificate directory (its clients run in mount pods)"
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
        if tls {
            self.mounter.mount_secure(source, target, log, flags).await
        } else {
            self.mounter.mount(source, target, log, flags).await
        }
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
}

impl NodeService {
    /// Whether this plugin's own files answer: its state directory takes a write, and no
    /// FUSE mount covers the directories it runs from. Blocking; a hung mount makes it hang,
    /// which the caller's timeout turns into a failed liveness probe.
    pub fn self_check(&self) -> Result<(), crate::identity::Wedged> {
        use crate::identity::Wedged;
        let probe = self.dir.join(".liveness");
        std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&probe, b"ok"))
            .and_then(|()| std::fs::File::open(&probe)?.sync_all())
            .and_then(|()| std::fs::remove_file(&probe))
            .map_err(|e| Wedged::StateDir {
                dir: self.dir.clone(),
                error: e.to_string(),
            })?;
        let own: Vec<PathBuf> = ["/", "/etc", "/usr", "/bin", "/lib"]
            .into_iter()
            .map(PathBuf::from)
            .chain(self.tls_dir.clone())
            .chain(std::iter::once(self.dir.clone()))
            .collect();
        let table = mount::reattach::own_mounts().map_err(|e| Wedged::MountTable {
            error: e.to_string(),
        })?;
        if let Some(m) = table
            .iter()
            .find(|m| m.fs_type.starts_with("fuse") && own.contains(&m.mount_point))
        {
            return Err(Wedged::Covered {
                dir: m.mount_point.clone(),
            });
        }
        for p in &own {
            nix::sys::statvfs::statvfs(p.as_path()).map_err(|e| Wedged::Unreadable {
                dir: p.clone(),
                error: e.to_string(),
            })?;
        }
        Ok(())
    }
}

#[tonic::async_trait]
impl csi::node_server::Node for NodeService {
    async fn node_stage_volume(
        &self,
        req: Request<csi::NodeStageVolumeRequest>,
    ) -> Reply<csi::NodeStageVolumeResponse> {
        self.stage(req).await
    }

    async fn node_unstage_volume(
        &self,
        req: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Reply<csi::NodeUnstageVolumeResponse> {
        self.unstage(req).await
    }

    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        self.publish(req).await
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Reply<csi::NodeUnpublishVolumeResponse> {
        self.unpublish(req).await
    }

    async fn node_get_volume_stats(
        &self,
        req: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Reply<csi::NodeGetVolumeStatsResponse> {
        self.stats(req).await
    }

    async fn node_get_volume_health(
        &self,
        req: Request<csi::NodeGetVolumeHealthRequest>,
    ) -> Reply<csi::NodeGetVolumeHealthResponse> {
        self.volume_health(req).await
    }

    async fn node_expand_volume(
        &self,
        req: Request<csi::NodeExpandVolumeRequest>,
    ) -> Reply<csi::NodeExpandVolumeResponse> {
        self.expand(req).await
    }

    async fn node_get_storage_health(
        &self,
        _: Request<csi::NodeGetStorageHealthRequest>,
    ) -> Reply<csi::NodeGetStorageHealthResponse> {
        Err(Status::unimplemented(
            "storage health is reported per volume",
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_check_fails_when_the_state_directory_takes_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let node = NodeService::new("n".into(), Mounter::default(), dir.path().join("state"));
        node.self_check().unwrap();
        // The state "directory" is a file: nothing can be written under it.
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        let broken = NodeService::new("n".into(), Mounter::default(), file.join("state"));
        let e = broken.self_check().unwrap_err();
        assert!(matches!(e, crate::identity::Wedged::StateDir { .. }), "{e}");
        assert!(e.to_string().contains("takes no write"), "{e}");
    }
}
