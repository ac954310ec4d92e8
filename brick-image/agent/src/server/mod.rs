//! The BrickAgent gRPC service over one node's glusterd.
//!
//! One file per group of RPCs, each an `impl Agent` with a `<rpc>_rpc` method per call that
//! the `BrickAgent` impl below forwards to: `peers` (Health, pools), `volumes` (a volume's
//! life), `options`, `heal`, `inspect` (HealEntries, LogTail), `subdirs` (subdirectory PVs
//! under gluster's quota), `projects` (under the bricks' project quotas), `snapshot`
//! (snapshots and fills), `bricks` (add, remove, replace, rebalance, release). What every
//! call shares stays here: the agent's state, the volume-name check and lock (`Agent::begin`),
//! the management mount, and the error mapping (`crate::error`). A new RPC: its message in
//! the proto, its method in the room it belongs to, one forwarding line below.

mod brick_copy;
mod bricks;
mod heal;
mod inspect;
mod options;
mod peers;
mod projects;
mod snapshot;
mod subdirs;
mod volumes;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_gluster::{Brick, CommandRunner, Gluster, GlusterError, Volume};
use gk_mount::{self as mount, MountSource, Mounter};
use tonic::{Request, Response, Status};

use crate::convert;
use crate::locks::VolumeLocks;
use crate::proto::brick_agent_server::BrickAgent;
use crate::proto::*;
use crate::quota::{self, Registrar};
use crate::spec::{self, DesiredVolume};
use crate::AgentError;

/// How long a fresh management mount may take to answer a listing before it is used anyway
/// (callers then see gluster's own error).
const MOUNT_SETTLE: Duration = Duration::from_secs(10);

type Reply<T> = Result<Response<T>, Status>;

/// Where the agent keeps its own mounts and which brick directories it may release.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The address this node has in the trusted pool, reported by Health so the operator
    /// can probe it and place bricks on it.
    pub advertise_address: String,
    /// Address of this node's glusterd, used as the volfile server of the agent's own mounts.
    pub volfile_server: String,
    /// Directory under which the agent FUSE-mounts volumes to create subdirectories.
    pub mount_root: PathBuf,
    /// How to run mount (a wrapper such as nsenter in tests; plain mount in production).
    pub mounter: Mounter,
    /// Brick directories may be released only below these roots.
    pub brick_roots: Vec<PathBuf>,
    /// Where glusterd and the bricks write their logs (LogTail reads only below it).
    pub gluster_log_dir: PathBuf,
    /// How long a brick process may stay offline in glusterd's eyes after it started before
    /// a forced start kills it as hung (see `hung`).
    pub brick_hung_after: Duration,
}

/// How long a volume checked ready for subdirectories (started, quota on, fast quota
/// timeouts) is trusted without asking glusterd again. A volume stopped meanwhile fails the
/// create at the mount instead, which clears the mark.
const QUOTA_READY_TTL: Duration = Duration::from_secs(10);
/// How long a heal count may hold the volume's lock. The count is a glusterd transaction
/// that waits for every self-heal daemon; one on a node that dropped off the network keeps
/// it waiting until glusterd gives the peer up (minutes), and this agent's own changes to
/// the volume (the operator's options, before it writes status) would wait behind it.
const HEAL_COUNT_WAIT: Duration = Duration::from_secs(10);

/// Cloning shares everything (locks, caches, the registrar): a clone is the same agent, for
/// work that must outlive the call that started it.
#[derive(Clone)]
pub struct Agent<R> {
    gluster: Gluster<R>,
    config: AgentConfig,
    locks: VolumeLocks,
    registrar: Registrar,
    quota_ready: Arc<Mutex<HashMap<String, Instant>>>,
    project_volumes: projects::ProjectVolumes,
    copies: crate::snapshot::Copies,
    /// Set for a pool made by hand: the volumes served, whose settings are never changed.
    scope: Option<crate::scope::Scope>,
    /// The gluster CLI's version, asked at the first health call.
    version: Arc<tokio::sync::OnceCell<String>>,
}

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    /// Must be called inside a tokio runtime: it starts the quota registration task.
    pub fn new(gluster: Gluster<R>, config: AgentConfig) -> Self {
        let locks = VolumeLocks::default();
        Self {
            registrar: Registrar::start(gluster.clone(), locks.clone(), config.mount_root.clone()),
            gluster,
            config,
            locks,
            quota_ready: Arc::default(),
            project_volumes: Arc::default(),
            copies: Default::default(),
            scope: None,
            version: Default::default(),
        }
    }

    /// An agent for a pool made by hand (external mode): it serves only `volumes`, only the
    /// CSI driver's RPCs ([`crate::serve`] filters them), never changes a volume's settings,
    /// and deletes only directories it made.
    pub fn for_external_volumes(mut self, volumes: impl IntoIterator<Item = String>) -> Self {
        self.scope = Some(crate::scope::Scope {
            volumes: volumes.into_iter().collect(),
        });
        self
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    /// The volumes served, when this agent is for a pool made by hand.
    pub fn scope(&self) -> Option<&crate::scope::Scope> {
        self.scope.as_ref()
    }

    /// A volume name from a request: valid, and one this agent serves.
    fn volume_arg(&self, field: &str, name: &str) -> Result<String, AgentError> {
        let name = spec::volume_name(field, name)?;
        if let Some(scope) = &self.scope {
            scope.check(field, &name)?;
        }
        Ok(name)
    }

    /// The steps an RPC that changes one volume begins with: the name checked (and, on an
    /// agent of a pool made by hand, in scope), the call logged, and the volume's lock taken
    /// for as long as the returned guard lives.
    async fn begin(
        &self,
        rpc: &str,
        name: &str,
    ) -> Result<(String, tokio::sync::OwnedMutexGuard<()>), AgentError> {
        let name = self.volume_arg("name", name)?;
        log_rpc(rpc, &name);
        let guard = self.locks.lock(&name).await;
        Ok((name, guard))
    }

    async fn info(&self, name: &str) -> Result<Volume, AgentError> {
        self.gluster
            .volume_info(name)
            .await?
            .ok_or_else(|| AgentError::NotFound(format!("volume {name}")))
    }

    async fn volume_reply(&self, name: &str) -> Reply<VolumeResponse> {
        let v = self.info(name).await?;
        Ok(Response::new(VolumeResponse {
            volume: Some(convert::volume(&v)),
        }))
    }

    /// The agent's own FUSE mount of `volume`, made on first use.
    /// Makes the PV directory `dir` (`path` of `volume`, on the management mount) with its
    /// parents; on a pool made by hand it is marked as made here (only those are ever
    /// deleted). True when made now, false when it was there already.
    fn make_pv_dir(&self, dir: &Path, volume: &str, path: &str) -> Result<bool, AgentError> {
        let made = match std::fs::create_dir(dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir)
                    .map_err(AgentError::io(format!("creating {path} on {volume}")))?;
                true
            }
            Err(e) => {
                return Err(AgentError::Io {
                    what: format!("creating {path} on {volume}"),
                    source: e,
                })
            }
        };
        if self.scope.is_some() {
            quota::mark_made(dir)?;
        }
        Ok(made)
    }

    async fn management_mount(&self, volume: &str) -> Result<PathBuf, AgentError> {
        // Concurrent creates on one volume must not mount it twice.
        let _guard = self.locks.lock(&format!("mount:{volume}")).await;
        let target = self.config.mount_root.join(volume);
        if mount::is_mounted(&target)? {
            if rustix::fs::statvfs(&target).is_ok() {
                return Ok(target);
            }
            // Its gluster client died (ENOTCONN): detach it and mount afresh.
            tracing::warn!(volume, "management mount is broken; remounting");
            let _ = nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH);
        }
        std::fs::create_dir_all(&target)
            .map_err(AgentError::io(format!("creating {}", target.display())))?;
        let log = self.config.mount_root.join(format!("{volume}.log"));
        let source = MountSource {
            servers: vec![self.config.volfile_server.clone()],
            volume: volume.to_string(),
            subdir: None,
        };
        self.config
            .mounter
            .mount_quota_client(&source, &target, &log)
            .await?;
        // The kernel mount exists before the client has connected to enough bricks (a
        // disperse volume needs most of them, and TLS handshakes take a while): until then
        // the first listing answers ENOTCONN. Give the connections a moment.
        let deadline = Instant::now() + MOUNT_SETTLE;
        while std::fs::read_dir(&target).is_err() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.resync_limits(volume, &target);
        Ok(target)
    }

    /// In the background, compares the limits on the volume's directories with glusterd's
    /// list and registers what is missing: an agent that stopped with registrations queued
    /// leaves limits that are enforced but unknown to `gluster volume quota list`.
    fn resync_limits(&self, volume: &str, root: &Path) {
        let (registrar, volume, root) = (
            self.registrar.clone(),
            volume.to_string(),
            root.to_path_buf(),
        );
        tokio::spawn(async move {
            match tokio::task::spawn_blocking(move || quota::list_top_level(&root)).await {
                // Directories sized by project quotas have nothing to register with gluster.
                Ok(Ok(found)) if found.iter().any(|l| !l.by_projects) => registrar.resync(
                    &volume,
                    found
                        .into_iter()
                        .filter(|l| !l.by_projects)
                        .map(|l| (l.path, l.limit_bytes))
                        .collect(),
                ),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(%volume, error = %e, "reading subdirectory limits to compare with glusterd failed")
                }
                Err(e) => {
                    tracing::warn!(%volume, error = %e, "reading subdirectory limits panicked")
                }
            }
        });
    }
}

/// What a create that failed leaves of a brick: a directory with a volume id and nothing
/// in it but an empty .glusterfs.
fn failed_create_leftover(path: &Path) -> bool {
    matches!(brick_volume_id(path), Ok(Some(_)))
        && std::fs::read_dir(path).is_ok_and(|entries| {
            entries.flatten().all(|e| {
                e.file_name() == ".glusterfs"
                    && std::fs::read_dir(e.path()).is_ok_and(|mut d| d.next().is_none())
            })
        })
}

/// The volume UUID gluster stamps on a brick root, if any.
fn brick_volume_id(path: &Path) -> Result<Option<String>, AgentError> {
    let mut buf = [0u8; 16];
    match rustix::fs::getxattr(path, "trusted.glusterfs.volume-id", &mut buf) {
        Ok(16) => {
            let h: String = buf.iter().map(|b| format!("{b:02x}")).collect();
            Ok(Some(format!(
                "{}-{}-{}-{}-{}",
                &h[0..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..32]
            )))
        }
        Ok(_) => Ok(None),
        Err(rustix::io::Errno::NODATA) => Ok(None),
        Err(e) => Err(AgentError::Io {
            what: format!("reading the volume id of {}", path.display()),
            source: e.into(),
        }),
    }
}

/// Path inside a volume for subdirectory volumes: absolute, plain names only, the first
/// not beginning with a dot (those are the agent's own, such as the snapshots).
fn subdir_path(field: &str, path: &str) -> Result<String, AgentError> {
    let ok = path.starts_with('/')
        && path.len() > 1
        && !path[1..].starts_with('.')
        && path.len() <= 1024
        && path[1..]
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..")
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(path.to_string())
    } else {
        Err(AgentError::invalid(
            field,
            format!(
                "{path:?} must be an absolute path of plain names, the first not beginning \
                 with a dot, like /pvc-1234"
            ),
        ))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lock name for one subdirectory; `:` cannot occur in a volume name.
fn subdir_lock(volume: &str, path: &str) -> String {
    format!("subdir:{volume}:{path}")
}

/// The answer to a migration start gluster accepted: its status, or `started` when gluster
/// cannot give one yet. Right after a start, glusterd's status query can fail ("Glusterd
/// Syncop Mgmt brick op 'Rebalance' failed", seen while a node's process was still
/// starting); the start itself stands, so it is not reported as failed.
fn just_started(
    name: &str,
    st: Result<gk_gluster::RebalanceStatus, gk_gluster::GlusterError>,
) -> RebalanceStatusResponse {
    match st {
        Ok(st) => convert::rebalance(&st),
        Err(e) => {
            tracing::warn!(volume = %name, error = %e, "migration started; its status is not readable yet");
            RebalanceStatusResponse {
                status: "started".into(),
                nodes: Vec::new(),
                task_id: String::new(),
            }
        }
    }
}

fn log_rpc(rpc: &str, volume: &str) {
    tracing::info!(rpc, volume, "request");
}

#[tonic::async_trait]
impl<R: CommandRunner + Clone + 'static> BrickAgent for Agent<R> {
    async fn health(&self, req: Request<HealthRequest>) -> Reply<HealthResponse> {
        self.health_rpc(req).await
    }

    async fn peer_probe(&self, req: Request<PeerRequest>) -> Reply<PeerStatusResponse> {
        self.peer_probe_rpc(req).await
    }

    async fn peer_detach(&self, req: Request<PeerRequest>) -> Reply<PeerStatusResponse> {
        self.peer_detach_rpc(req).await
    }

    async fn peer_status(&self, req: Request<PeerStatusRequest>) -> Reply<PeerStatusResponse> {
        self.peer_status_rpc(req).await
    }

    async fn volume_create(&self, req: Request<VolumeCreateRequest>) -> Reply<VolumeResponse> {
        self.volume_create_rpc(req).await
    }

    async fn volume_start(&self, req: Request<VolumeStartRequest>) -> Reply<VolumeResponse> {
        self.volume_start_rpc(req).await
    }

    async fn volume_stop(&self, req: Request<VolumeStopRequest>) -> Reply<VolumeResponse> {
        self.volume_stop_rpc(req).await
    }

    async fn volume_delete(&self, req: Request<VolumeRequest>) -> Reply<VolumeDeleteResponse> {
        self.volume_delete_rpc(req).await
    }

    async fn volume_info(&self, req: Request<VolumeRequest>) -> Reply<VolumeResponse> {
        self.volume_info_rpc(req).await
    }

    async fn volume_list(&self, req: Request<VolumeListRequest>) -> Reply<VolumeListResponse> {
        self.volume_list_rpc(req).await
    }

    async fn volume_status(&self, req: Request<VolumeRequest>) -> Reply<VolumeStatusResponse> {
        self.volume_status_rpc(req).await
    }

    async fn volume_set(&self, req: Request<VolumeSetRequest>) -> Reply<VolumeSetResponse> {
        self.volume_set_rpc(req).await
    }

    async fn volume_reset(&self, req: Request<VolumeResetRequest>) -> Reply<VolumeResponse> {
        self.volume_reset_rpc(req).await
    }

    async fn heal_info(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        self.heal_info_rpc(req).await
    }

    async fn heal_count(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        self.heal_count_rpc(req).await
    }

    async fn heal_entries(&self, req: Request<HealEntriesRequest>) -> Reply<HealEntriesResponse> {
        self.heal_entries_rpc(req).await
    }

    async fn log_tail(&self, req: Request<LogTailRequest>) -> Reply<LogTailResponse> {
        self.log_tail_rpc(req).await
    }

    async fn heal_start(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        self.heal_start_rpc(req).await
    }

    async fn subdir_create(&self, req: Request<SubdirCreateRequest>) -> Reply<SubdirResponse> {
        self.subdir_create_rpc(req).await
    }

    async fn subdir_delete(
        &self,
        req: Request<SubdirDeleteRequest>,
    ) -> Reply<SubdirDeleteResponse> {
        self.subdir_delete_rpc(req).await
    }

    async fn subdir_get(&self, req: Request<SubdirGetRequest>) -> Reply<SubdirResponse> {
        self.subdir_get_rpc(req).await
    }

    async fn subdir_expand(&self, req: Request<SubdirCreateRequest>) -> Reply<SubdirResponse> {
        self.subdir_expand_rpc(req).await
    }

    async fn quota_list(&self, req: Request<VolumeRequest>) -> Reply<QuotaListResponse> {
        self.quota_list_rpc(req).await
    }

    async fn quota_backlog(&self, req: Request<VolumeRequest>) -> Reply<QuotaBacklogResponse> {
        self.quota_backlog_rpc(req).await
    }

    async fn subdir_list(&self, req: Request<VolumeRequest>) -> Reply<QuotaListResponse> {
        self.subdir_list_rpc(req).await
    }

    async fn snapshot_create(
        &self,
        req: Request<SnapshotCreateRequest>,
    ) -> Reply<SnapshotResponse> {
        self.snapshot_create_rpc(req).await
    }

    async fn snapshot_get(&self, req: Request<SnapshotRequest>) -> Reply<SnapshotResponse> {
        self.snapshot_get_rpc(req).await
    }

    async fn snapshot_delete(
        &self,
        req: Request<SnapshotRequest>,
    ) -> Reply<SnapshotDeleteResponse> {
        self.snapshot_delete_rpc(req).await
    }

    async fn snapshot_list(&self, req: Request<VolumeRequest>) -> Reply<SnapshotListResponse> {
        self.snapshot_list_rpc(req).await
    }

    async fn subdir_enforce(&self, req: Request<SubdirGetRequest>) -> Reply<SubdirEnforceResponse> {
        self.subdir_enforce_rpc(req).await
    }

    async fn pv_quota_move(&self, req: Request<PvQuotaMoveRequest>) -> Reply<PvQuotaMoveResponse> {
        self.pv_quota_move_rpc(req).await
    }

    async fn subdir_fill(&self, req: Request<SubdirFillRequest>) -> Reply<SubdirFillResponse> {
        self.subdir_fill_rpc(req).await
    }

    async fn brick_copy(&self, req: Request<BrickCopyRequest>) -> Reply<BrickCopyResponse> {
        self.brick_copy_rpc(req).await
    }

    async fn volume_barrier(
        &self,
        req: Request<VolumeBarrierRequest>,
    ) -> Reply<VolumeBarrierResponse> {
        self.volume_barrier_rpc(req).await
    }

    async fn add_brick(&self, req: Request<AddBrickRequest>) -> Reply<VolumeResponse> {
        self.add_brick_rpc(req).await
    }

    async fn remove_brick_start(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        self.remove_brick_start_rpc(req).await
    }

    async fn remove_brick_status(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        self.remove_brick_status_rpc(req).await
    }

    async fn remove_brick_commit(&self, req: Request<RemoveBrickRequest>) -> Reply<VolumeResponse> {
        self.remove_brick_commit_rpc(req).await
    }

    async fn remove_brick_stop(&self, req: Request<RemoveBrickRequest>) -> Reply<VolumeResponse> {
        self.remove_brick_stop_rpc(req).await
    }

    async fn rebalance_stop(&self, req: Request<VolumeRequest>) -> Reply<VolumeResponse> {
        self.rebalance_stop_rpc(req).await
    }

    async fn replace_brick(&self, req: Request<ReplaceBrickRequest>) -> Reply<VolumeResponse> {
        self.replace_brick_rpc(req).await
    }

    async fn rebalance_start(&self, req: Request<VolumeRequest>) -> Reply<RebalanceStatusResponse> {
        self.rebalance_start_rpc(req).await
    }

    async fn rebalance_status(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        self.rebalance_status_rpc(req).await
    }

    async fn brick_release(
        &self,
        req: Request<BrickReleaseRequest>,
    ) -> Reply<BrickReleaseResponse> {
        self.brick_release_rpc(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_whose_status_is_not_readable_yet_is_started_not_failed() {
        let refused = gk_gluster::GlusterError::Command {
            command: "volume rebalance v status".into(),
            ret: -1,
            errno: 0,
            message: "Glusterd Syncop Mgmt brick op 'Rebalance' failed.".into(),
        };
        let answer = just_started("v", Err(refused));
        assert_eq!(answer.status, "started");
        assert!(answer.nodes.is_empty());
    }

    #[test]
    fn subdir_paths() {
        assert_eq!(subdir_path("path", "/pvc-1").unwrap(), "/pvc-1");
        assert_eq!(subdir_path("path", "/a/b_c.d").unwrap(), "/a/b_c.d");
        for bad in ["", "/", "rel", "/a/../b", "/a//b", "/a b", "/a\n", "/./a"] {
            match subdir_path("path", bad) {
                Err(AgentError::Invalid { field, .. }) => assert_eq!(field, "path"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// An accepted subdirectory, joined under a volume's mount point, stays below it:
            /// only plain names, nothing that climbs out or names another root.
            #[test]
            fn subdirectories_stay_inside_the_pool_volume(
                p in "(/|\\.\\.|\\.|[a-z]{1,5}|\\x00|//|%2e){0,12}|.{0,40}"
            ) {
                if let Ok(path) = subdir_path("path", &p) {
                    let root = std::path::Path::new("/mnt/pool");
                    let joined = root.join(path.trim_start_matches('/'));
                    prop_assert!(joined.starts_with(root));
                    prop_assert!(joined.components().count() > root.components().count());
                    prop_assert!(joined
                        .strip_prefix(root)
                        .unwrap()
                        .components()
                        .all(|c| matches!(c, std::path::Component::Normal(n) if n != "..")));
                    prop_assert!(!path.contains('\0'));
                }
            }
        }
    }
}
