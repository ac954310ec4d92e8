//! The BrickAgent gRPC service over one node's glusterd.

mod inspect;
mod projects;
mod snapshot;

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

    async fn create(&self, want: &DesiredVolume, start: bool) -> Result<Volume, AgentError> {
        if let Some(existing) = self.gluster.volume_info(&want.name).await? {
            want.matches(&existing).map_err(AgentError::Conflict)?;
            tracing::info!(volume = %want.name, "volume exists as requested");
            self.converge(want, &existing, start).await?;
            return self.info(&want.name).await;
        }
        if let Err(e) = self
            .gluster
            .volume_create(&want.name, want.layout, &want.bricks, want.force)
            .await
        {
            // glusterd can mark this node's new brick directories with the volume's id and
            // then fail on a peer (say, one not connected for a moment); every retry would
            // then fail with "already part of a volume". Marks of a volume that does not
            // exist, on directories holding nothing, are cleared.
            if matches!(self.gluster.volume_info(&want.name).await, Ok(None)) {
                for b in &want.bricks {
                    if b.host == self.config.advertise_address {
                        self.clear_failed_brick(Path::new(&b.path)).await;
                    }
                }
            }
            return Err(e.into());
        }
        let created = self.info(&want.name).await?;
        if let Err(e) = self.converge(want, &created, start).await {
            tracing::warn!(volume = %want.name, error = %e, "create failed half way; rolling back");
            self.roll_back(&created).await;
            return Err(e);
        }
        self.info(&want.name).await
    }

    /// Options set, then started if asked: the steps after `volume create`.
    async fn converge(
        &self,
        want: &DesiredVolume,
        have: &Volume,
        start: bool,
    ) -> Result<(), AgentError> {
        for (k, v) in &want.options {
            if have.options.get(k) != Some(v) {
                self.gluster.volume_set(&want.name, k, v).await?;
            }
        }
        if start && !have.is_started() {
            self.gluster.volume_start(&want.name).await?;
        }
        Ok(())
    }

    /// Removes a volume this call created and frees its bricks on this node, so that a
    /// retry starts clean. Bricks on other nodes are freed through their own agents.
    async fn roll_back(&self, v: &Volume) {
        if v.is_started()
            || self
                .gluster
                .volume_info(&v.name)
                .await
                .ok()
                .flatten()
                .is_some_and(|v| v.is_started())
        {
            if let Err(e) = self.gluster.volume_stop(&v.name, true).await {
                tracing::warn!(volume = %v.name, error = %e, "rollback: stop failed");
            }
        }
        if let Err(e) = self.gluster.volume_delete(&v.name).await {
            tracing::warn!(volume = %v.name, error = %e, "rollback: delete failed");
            return;
        }
        for path in self.local_brick_paths(v).await {
            if let Err(e) = self.release(&path).await {
                tracing::warn!(brick = %path.display(), error = %e, "rollback: brick not released");
            }
        }
    }

    /// Removes `path` if a failed create left it behind: it carries the volume id of no
    /// existing volume and holds nothing but gluster's empty `.glusterfs` directory.
    async fn clear_failed_brick(&self, path: &Path) {
        if !failed_create_leftover(path) {
            return;
        }
        match self.release(path).await {
            Ok(_) => {
                tracing::info!(brick = %path.display(), "cleared a brick directory a failed create left")
            }
            Err(e) => {
                tracing::warn!(brick = %path.display(), error = %e, "brick directory of a failed create not cleared")
            }
        }
    }

    /// Bricks of `v` on this node: those whose host UUID is not one of our peers'.
    async fn local_brick_paths(&self, v: &Volume) -> Vec<PathBuf> {
        let Ok(peers) = self.gluster.peer_status().await else {
            return Vec::new();
        };
        v.bricks
            .iter()
            .filter(|b| !peers.iter().any(|p| p.uuid == b.host_uuid))
            .map(|b| PathBuf::from(&b.brick.path))
            .collect()
    }

    /// Kills this node's brick processes of `name` that glusterd has reported offline for
    /// long after they started (see `hung`), so that a forced start runs fresh ones.
    async fn kill_hung_bricks(&self, name: &str) {
        let Ok(status) = self.gluster.volume_status(name).await else {
            return;
        };
        let offline: Vec<&str> = status
            .bricks
            .iter()
            .filter(|b| !b.online && b.brick.host == self.config.advertise_address)
            .map(|b| b.brick.path.as_str())
            .collect();
        if offline.is_empty() {
            return;
        }
        let procs = crate::hung::brick_processes();
        let hung = crate::hung::hung(&procs, name, &offline, self.config.brick_hung_after);
        crate::hung::kill(name, &hung).await;
    }

    async fn release(&self, path: &Path) -> Result<bool, AgentError> {
        let inside_root = self
            .config
            .brick_roots
            .iter()
            .any(|root| path.starts_with(root) && path != root);
        if !path.is_absolute() || !inside_root || path.components().any(|c| c.as_os_str() == "..") {
            return Err(AgentError::invalid(
                "path",
                format!(
                    "{} is not a directory below a brick root {:?}",
                    path.display(),
                    self.config.brick_roots
                ),
            ));
        }
        if !path.exists() {
            return Ok(false);
        }
        if let Some(id) = brick_volume_id(path)? {
            for v in self.gluster.volume_info_all().await? {
                if v.id == id {
                    return Err(AgentError::Precondition(format!(
                        "{} is a brick of volume {}; delete the volume first",
                        path.display(),
                        v.name
                    )));
                }
            }
        }
        std::fs::remove_dir_all(path)
            .map_err(AgentError::io(format!("removing {}", path.display())))?;
        Ok(true)
    }

    /// The volume's usage limits; none while quota is off.
    async fn quotas(&self, volume: &str) -> Result<Vec<gk_gluster::QuotaEntry>, AgentError> {
        match self.gluster.quota_list(volume).await {
            Err(GlusterError::Command { message, .. })
                if message.starts_with("Quota is disabled") =>
            {
                Ok(Vec::new())
            }
            other => Ok(other?),
        }
    }

    /// The agent's own FUSE mount of `volume`, made on first use.
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

    /// `volume heal NAME info summary` (through glfsheal) as the RPCs answer it.
    async fn heal_summary(&self, name: &str) -> Reply<HealInfoResponse> {
        let heal = self
            .gluster
            .heal_info_summary(name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::heal(&heal)))
    }

    /// Makes sure `volume` is started with quota on and quota's check timeouts as the limits
    /// need them ([`crate::quota::SOFT_TIMEOUT_SECONDS`]), asking glusterd
    /// at most once per [`QUOTA_READY_TTL`].
    async fn quota_ready(&self, volume: &str) -> Result<(), AgentError> {
        let fresh = |m: &HashMap<String, Instant>| {
            m.get(volume).is_some_and(|t| t.elapsed() < QUOTA_READY_TTL)
        };
        if fresh(&lock(&self.quota_ready)) {
            return Ok(());
        }
        let _guard = self.locks.lock(volume).await;
        let v = self.info(volume).await?;
        if !v.is_started() {
            return Err(AgentError::Precondition(format!(
                "volume {volume} is not started"
            )));
        }
        // Each gluster command costs a round of glusterd transactions: skip the ones the
        // volume's options show are already in effect.
        let opt = |k: &str| v.options.get(k).map(String::as_str);
        if self.scope.is_some() {
            // A pool made by hand keeps the settings its owners gave it: turning quota on
            // starts a crawl of every file, their call to make.
            if opt("features.quota") != Some("on") {
                let (soft, hard) = (
                    crate::quota::SOFT_TIMEOUT_SECONDS,
                    crate::quota::HARD_TIMEOUT_SECONDS,
                );
                return Err(AgentError::Precondition(format!(
                    "quota is off on volume {volume}, a pool made by hand, and this agent \
                     changes no settings of it: run `gluster volume quota {volume} enable` \
                     on a server (it accounts every file once), and for limits enforced as \
                     on the operator's pools `gluster volume set {volume} \
                     features.soft-timeout {soft}` and `features.hard-timeout {hard}` \
                     (docs/external.md)"
                )));
            }
            lock(&self.quota_ready).insert(volume.to_string(), Instant::now());
            return Ok(());
        }
        if opt("features.quota") != Some("on") {
            self.gluster.quota_enable(volume).await?;
        }
        let (soft, hard) = (
            crate::quota::SOFT_TIMEOUT_SECONDS,
            crate::quota::HARD_TIMEOUT_SECONDS,
        );
        if opt("features.soft-timeout") != Some(soft.to_string().as_str())
            || opt("features.hard-timeout") != Some(hard.to_string().as_str())
        {
            self.gluster
                .quota_check_timeouts(volume, soft, hard)
                .await?;
        }
        lock(&self.quota_ready).insert(volume.to_string(), Instant::now());
        Ok(())
    }

    fn forget_quota_ready(&self, volume: &str) {
        lock(&self.quota_ready).remove(volume);
    }

    /// The management mount's copy of `path` (an absolute path inside the volume).
    async fn subdir(&self, volume: &str, path: &str) -> Result<PathBuf, AgentError> {
        let root = self.management_mount(volume).await.inspect_err(|_| {
            self.forget_quota_ready(volume);
        })?;
        Ok(root.join(&path[1..]))
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
            }
        }
    }
}

fn log_rpc(rpc: &str, volume: &str) {
    tracing::info!(rpc, volume, "request");
}

#[tonic::async_trait]
impl<R: CommandRunner + Clone + 'static> BrickAgent for Agent<R> {
    async fn health(&self, _: Request<HealthRequest>) -> Reply<HealthResponse> {
        tracing::debug!(rpc = "Health", "request");
        let h = crate::health(&self.gluster, &self.version)
            .await
            .map_err(AgentError::from)?;
        let disks: Vec<Disk> = self
            .config
            .brick_roots
            .iter()
            .map(|root| {
                let (total_bytes, free_bytes) = rustix::fs::statvfs(root)
                    .map(|st| (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize))
                    .unwrap_or_default();
                let (project_quotas, project_quotas_reason) = projects::disk_quotas(root);
                Disk {
                    brick_root: root.display().to_string(),
                    total_bytes,
                    free_bytes,
                    project_quotas,
                    project_quotas_reason,
                }
            })
            .collect();
        let first = disks.first().cloned().unwrap_or_default();
        Ok(Response::new(HealthResponse {
            agent_version: env!("CARGO_PKG_VERSION").into(),
            gluster_version: h.version,
            peers: h.peers as u32,
            peers_connected: h.peers_connected as u32,
            address: self.config.advertise_address.clone(),
            brick_root: first.brick_root,
            brick_root_total_bytes: first.total_bytes,
            brick_root_free_bytes: first.free_bytes,
            disks,
        }))
    }

    async fn peer_probe(&self, req: Request<PeerRequest>) -> Reply<PeerStatusResponse> {
        let host = req.into_inner().host;
        log_rpc("PeerProbe", "");
        Brick::new(&host, "/x").map_err(|e| AgentError::invalid("host", e.to_string()))?;
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        if !peers.iter().any(|p| p.hostname == host) {
            self.gluster
                .peer_probe(&host)
                .await
                .map_err(AgentError::from)?;
        }
        self.peer_status(Request::new(PeerStatusRequest {})).await
    }

    async fn peer_detach(&self, req: Request<PeerRequest>) -> Reply<PeerStatusResponse> {
        let PeerRequest { host, force } = req.into_inner();
        log_rpc("PeerDetach", "");
        Brick::new(&host, "/x").map_err(|e| AgentError::invalid("host", e.to_string()))?;
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        if peers.iter().any(|p| p.hostname == host) {
            if force {
                self.gluster.peer_detach_force(&host).await
            } else {
                self.gluster.peer_detach(&host).await
            }
            .map_err(AgentError::from)?;
        }
        self.peer_status(Request::new(PeerStatusRequest {})).await
    }

    async fn peer_status(&self, _: Request<PeerStatusRequest>) -> Reply<PeerStatusResponse> {
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        Ok(Response::new(PeerStatusResponse {
            peers: peers.iter().map(convert::peer).collect(),
        }))
    }

    async fn volume_create(&self, req: Request<VolumeCreateRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let want = DesiredVolume::from_spec(req.spec.as_ref())?;
        log_rpc("VolumeCreate", &want.name);
        // On a task of its own: a caller that goes away (an operator restarting) would
        // otherwise cut the create between its steps, leaving a volume without its access
        // options or not started.
        let agent = self.clone();
        let v = tokio::spawn(async move {
            let _guard = agent.locks.lock(&want.name).await;
            agent.create(&want, req.start).await
        })
        .await
        .map_err(|e| Status::internal(format!("the volume create task failed: {e}")))??;
        Ok(Response::new(VolumeResponse {
            volume: Some(convert::volume(&v)),
        }))
    }

    async fn volume_start(&self, req: Request<VolumeStartRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        log_rpc("VolumeStart", &name);
        let _guard = self.locks.lock(&name).await;
        let v = self.info(&name).await?;
        if req.force {
            self.kill_hung_bricks(&name).await;
            self.gluster
                .volume_start_force(&name)
                .await
                .map_err(AgentError::from)?;
        } else if !v.is_started() {
            self.gluster
                .volume_start(&name)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    async fn volume_stop(&self, req: Request<VolumeStopRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        log_rpc("VolumeStop", &name);
        let _guard = self.locks.lock(&name).await;
        self.forget_quota_ready(&name);
        if self.info(&name).await?.is_started() {
            self.gluster
                .volume_stop(&name, req.force)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    async fn volume_delete(&self, req: Request<VolumeRequest>) -> Reply<VolumeDeleteResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("VolumeDelete", &name);
        let _guard = self.locks.lock(&name).await;
        self.forget_quota_ready(&name);
        let Some(v) = self
            .gluster
            .volume_info(&name)
            .await
            .map_err(AgentError::from)?
        else {
            return Ok(Response::new(VolumeDeleteResponse { deleted: false }));
        };
        if v.is_started() {
            return Err(AgentError::Precondition(format!(
                "volume {name} is started; stop it before deleting"
            ))
            .into());
        }
        let mount = self.config.mount_root.join(&name);
        mount::unmount(&mount).map_err(AgentError::from)?;
        self.gluster
            .volume_delete(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(VolumeDeleteResponse { deleted: true }))
    }

    async fn volume_info(&self, req: Request<VolumeRequest>) -> Reply<VolumeResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.volume_reply(&name).await
    }

    async fn volume_list(&self, _: Request<VolumeListRequest>) -> Reply<VolumeListResponse> {
        let names = self.gluster.volume_list().await.map_err(AgentError::from)?;
        Ok(Response::new(VolumeListResponse { names }))
    }

    async fn volume_status(&self, req: Request<VolumeRequest>) -> Reply<VolumeStatusResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        let status = self
            .gluster
            .volume_status(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::volume_status(&status)))
    }

    async fn volume_set(&self, req: Request<VolumeSetRequest>) -> Reply<VolumeSetResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let options: BTreeMap<String, String> = req.options.into_iter().collect();
        spec::options("options", &options)?;
        log_rpc("VolumeSet", &name);
        let _guard = self.locks.lock(&name).await;
        let have = self.info(&name).await?;
        let mut rejected = Vec::new();
        let mut asked = false;
        // Once glusterd is busy past the retries each command gets, the other options are
        // not tried (each would wait out the same retries) and are reported as not set.
        let mut busy: Option<String> = None;
        for (k, v) in &options {
            if have.options.get(k) == Some(v) {
                continue;
            }
            let reason = if let Some(b) = &busy {
                format!("not tried: glusterd was busy ({b}); set at the next refresh")
            } else {
                asked = true;
                match self.gluster.volume_set(&name, k, v).await {
                    Ok(()) => continue,
                    Err(GlusterError::Command { message, .. }) => {
                        if gk_gluster::is_busy(&message) {
                            busy = Some(message.clone());
                        }
                        message
                    }
                    Err(e) => return Err(AgentError::from(e).into()),
                }
            };
            rejected.push(RejectedOption {
                key: k.clone(),
                value: v.clone(),
                reason,
            });
        }
        for r in &rejected {
            tracing::warn!(volume = %name, key = %r.key, reason = %r.reason, "option refused by gluster");
        }
        // Every refresh asks with the options already set: read again only after a change.
        let v = if asked { self.info(&name).await? } else { have };
        Ok(Response::new(VolumeSetResponse {
            volume: Some(convert::volume(&v)),
            rejected,
        }))
    }

    async fn volume_reset(&self, req: Request<VolumeResetRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        spec::options("key", &BTreeMap::from([(req.key.clone(), "x".to_string())]))?;
        log_rpc("VolumeReset", &name);
        let _guard = self.locks.lock(&name).await;
        if self.info(&name).await?.options.contains_key(&req.key) {
            self.gluster
                .volume_reset(&name, &req.key)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    async fn heal_info(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        self.heal_summary(&name).await
    }

    async fn heal_count(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        let bricks: Vec<gk_gluster::Brick> = self
            .info(&name)
            .await?
            .bricks
            .into_iter()
            .map(|b| b.brick)
            .collect();
        // The count is a glusterd transaction on the volume: glusterd would refuse this
        // agent's own changes to it meanwhile instead of queueing them. The summary below
        // is a client of the bricks (glfsheal), not a transaction, and may take minutes: it
        // runs without the lock, so an add-brick or an option change does not wait for it.
        let asked = {
            let _guard = self.locks.lock(&name).await;
            tokio::time::timeout(HEAL_COUNT_WAIT, self.gluster.heal_count(&name)).await
        }
        // The summary would wait on the same unreachable node: none is run.
        .map_err(|_| {
            AgentError::from(GlusterError::Timeout {
                command: format!("volume heal {name} statistics heal-count"),
                timeout: HEAL_COUNT_WAIT,
            })
        })?;
        match asked {
            Ok(counts) if gk_gluster::nothing_to_heal(&counts, &bricks) => {
                return Ok(Response::new(convert::nothing_to_heal(&bricks)));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(volume = %name, error = %e, "heal count failed; running the summary")
            }
        }
        self.heal_summary(&name).await
    }

    async fn heal_entries(&self, req: Request<HealEntriesRequest>) -> Reply<HealEntriesResponse> {
        self.heal_entries_rpc(req).await
    }

    async fn log_tail(&self, req: Request<LogTailRequest>) -> Reply<LogTailResponse> {
        self.log_tail_rpc(req).await
    }

    async fn heal_start(&self, req: Request<VolumeRequest>) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("HealStart", &name);
        self.info(&name).await?;
        self.gluster
            .heal_start(&name)
            .await
            .map_err(AgentError::from)?;
        let heal = self
            .gluster
            .heal_info_summary(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::heal(&heal)))
    }

    async fn subdir_create(&self, req: Request<SubdirCreateRequest>) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        if req.limit_bytes == 0 {
            return Err(AgentError::invalid("limit_bytes", "must be more than 0").into());
        }
        log_rpc("SubdirCreate", &volume);
        // Creates of different directories need no gluster transaction, so they only
        // serialise per directory; the volume lock is for glusterd work.
        let _guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        if let Some(v) = self.by_projects(&volume).await? {
            return self.project_subdir_create(&v, path, req.limit_bytes).await;
        }
        self.quota_ready(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                if self.scope.is_some() {
                    quota::mark_made(&dir)?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                match quota::read_limit(&dir)? {
                    Some(limit) if limit != req.limit_bytes => {
                        return Err(AgentError::Conflict(format!(
                            "{path} on {volume} exists with a limit of {limit} bytes, not {}",
                            req.limit_bytes
                        ))
                        .into())
                    }
                    // A retry: make sure glusterd's list gets it even if the agent
                    // restarted before registering it.
                    Some(_) => {
                        self.registrar.register(&volume, &path);
                        return Ok(Response::new(SubdirResponse {
                            path,
                            limit_bytes: req.limit_bytes,
                            ..Default::default()
                        }));
                    }
                    // Made by a create that failed before its limit: finish it.
                    None => {}
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir)
                    .map_err(AgentError::io(format!("creating {path} on {volume}")))?;
                if self.scope.is_some() {
                    quota::mark_made(&dir)?;
                }
            }
            Err(e) => {
                self.forget_quota_ready(&volume);
                return Err(AgentError::Io {
                    what: format!("creating {path} on {volume}"),
                    source: e,
                }
                .into());
            }
        }
        quota::write_limit(&dir, req.limit_bytes)?;
        self.registrar.register(&volume, &path);
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: req.limit_bytes,
            ..Default::default()
        }))
    }

    async fn subdir_delete(
        &self,
        req: Request<SubdirDeleteRequest>,
    ) -> Reply<SubdirDeleteResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirDelete", &volume);
        let _path_guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        // Cancel first, then take the volume lock: a registration running now finishes
        // before the list below is read.
        self.registrar.cancel(&volume, &path);
        let _guard = self.locks.lock(&volume).await;
        self.info(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        match std::fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Response::new(SubdirDeleteResponse { deleted: false }));
            }
            Err(e) => {
                return Err(AgentError::Io {
                    what: format!("looking up {path} on {volume}"),
                    source: e,
                }
                .into())
            }
            Ok(_) => {}
        }
        // The directory's own attribute says whether it has a limit: asking glusterd's list
        // instead would cost a read of every limit on the volume for each delete.
        if quota::read_limit(&dir)?.is_some() {
            self.gluster
                .quota_remove(&volume, &path)
                .await
                .map_err(AgentError::from)?;
        }
        // On a pool made by hand, a directory that was there before the driver (reused
        // through a StorageClass subDir template) keeps its data: only its limit goes.
        if self.scope.is_some() && !quota::made_here(&dir)? {
            tracing::warn!(volume = %volume, path = %path, "kept a directory this agent did not make; only its limit was removed");
            return Ok(Response::new(SubdirDeleteResponse { deleted: false }));
        }
        std::fs::remove_dir_all(&dir)
            .map_err(AgentError::io(format!("removing {path} on {volume}")))?;
        if let Some(v) = self.by_projects(&volume).await? {
            self.project_release_here(&v, &path).await;
        }
        Ok(Response::new(SubdirDeleteResponse { deleted: true }))
    }

    async fn subdir_get(&self, req: Request<SubdirGetRequest>) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirGet", &volume);
        let dir = self.subdir(&volume, &path).await?;
        let limit = tokio::task::spawn_blocking(move || quota::read_pv_size(&dir))
            .await
            .map_err(|e| {
                Status::internal(format!("reading the limit of {path} on {volume}: {e}"))
            })??;
        let limit_bytes = limit.ok_or_else(|| {
            AgentError::NotFound(format!("subdirectory {path} with a limit on {volume}"))
        })?;
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes,
            ..Default::default()
        }))
    }

    async fn subdir_expand(&self, req: Request<SubdirCreateRequest>) -> Reply<SubdirResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let path = subdir_path("path", &req.path)?;
        log_rpc("SubdirExpand", &volume);
        let _guard = self.locks.lock(&subdir_lock(&volume, &path)).await;
        if let Some(v) = self.by_projects(&volume).await? {
            return self.project_subdir_expand(&v, path, req.limit_bytes).await;
        }
        self.quota_ready(&volume).await?;
        let dir = self.subdir(&volume, &path).await?;
        let current = match std::fs::symlink_metadata(&dir) {
            Ok(_) => quota::read_limit(&dir)?,
            Err(_) => None,
        }
        .ok_or_else(|| {
            AgentError::NotFound(format!("subdirectory {path} with a limit on {volume}"))
        })?;
        if req.limit_bytes < current {
            return Err(AgentError::Precondition(format!(
                "{path} on {volume} has a limit of {current} bytes; shrinking it to {} is not supported",
                req.limit_bytes
            ))
            .into());
        }
        if req.limit_bytes > current {
            quota::write_limit(&dir, req.limit_bytes)?;
            self.registrar.register(&volume, &path);
        }
        Ok(Response::new(SubdirResponse {
            path,
            limit_bytes: req.limit_bytes,
            ..Default::default()
        }))
    }

    async fn quota_list(&self, req: Request<VolumeRequest>) -> Reply<QuotaListResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        // Gluster's list is only complete once the limits set here are registered.
        let left = self.registrar.flush(&name, Duration::from_secs(30)).await;
        if left > 0 {
            return Err(Status::unavailable(format!(
                "{left} quota limits on {name} are enforced but glusterd has not taken them yet; \
                 see the agent log and retry"
            )));
        }
        let entries = self.quotas(&name).await?;
        Ok(Response::new(QuotaListResponse {
            entries: entries.iter().map(convert::quota).collect(),
        }))
    }

    async fn quota_backlog(&self, req: Request<VolumeRequest>) -> Reply<QuotaBacklogResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        Ok(Response::new(QuotaBacklogResponse {
            pending: self.registrar.pending(&name) as u32,
        }))
    }

    async fn subdir_list(&self, req: Request<VolumeRequest>) -> Reply<QuotaListResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        let root = self.management_mount(&name).await?;
        let found = tokio::task::spawn_blocking(move || quota::list_top_level(&root))
            .await
            .map_err(|e| Status::internal(format!("listing subdirectories of {name}: {e}")))??;
        Ok(Response::new(QuotaListResponse {
            entries: found
                .iter()
                .map(|d| QuotaEntry {
                    path: d.path.clone(),
                    hard_limit_bytes: d.limit_bytes,
                    used_bytes: d.used_bytes,
                    available_bytes: d.limit_bytes.saturating_sub(d.used_bytes),
                    soft_limit_exceeded: d.soft_limit_exceeded(),
                    hard_limit_exceeded: d.used_bytes >= d.limit_bytes,
                })
                .collect(),
        }))
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

    async fn subdir_fill(&self, req: Request<SubdirFillRequest>) -> Reply<SubdirFillResponse> {
        self.subdir_fill_rpc(req).await
    }

    async fn add_brick(&self, req: Request<AddBrickRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        log_rpc("AddBrick", &name);
        let _guard = self.locks.lock(&name).await;
        let v = self.info(&name).await?;
        let present: Vec<&Brick> = v.bricks.iter().map(|b| &b.brick).collect();
        let new: Vec<Brick> = bricks
            .into_iter()
            .filter(|b| !present.contains(&b))
            .collect();
        if !new.is_empty() {
            let layout = convert::layout_of(&v);
            self.gluster
                .add_brick(&name, layout, &new, req.force)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    async fn remove_brick_start(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        log_rpc("RemoveBrickStart", &name);
        let _guard = self.locks.lock(&name).await;
        self.info(&name).await?;
        self.gluster
            .remove_brick_start(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        let st = self.gluster.remove_brick_status(&name, &bricks).await;
        Ok(Response::new(just_started(&name, st)))
    }

    async fn remove_brick_status(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        self.info(&name).await?;
        let st = self
            .gluster
            .remove_brick_status(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::rebalance(&st)))
    }

    async fn remove_brick_commit(&self, req: Request<RemoveBrickRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        log_rpc("RemoveBrickCommit", &name);
        let _guard = self.locks.lock(&name).await;
        let v = self.info(&name).await?;
        if !bricks
            .iter()
            .any(|b| v.bricks.iter().any(|have| &have.brick == b))
        {
            return self.volume_reply(&name).await;
        }
        // Commit only once data has left the bricks: a commit before that loses files.
        let st = self
            .gluster
            .remove_brick_status(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        let done = convert::rebalance(&st);
        if done.status != "completed" {
            return Err(AgentError::Precondition(format!(
                "data migration off the removed bricks is {}, not completed; commit would lose data",
                done.status
            ))
            .into());
        }
        self.gluster
            .remove_brick_commit(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    async fn remove_brick_stop(&self, req: Request<RemoveBrickRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        log_rpc("RemoveBrickStop", &name);
        let _guard = self.locks.lock(&name).await;
        self.info(&name).await?;
        self.gluster
            .remove_brick_stop(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    async fn rebalance_stop(&self, req: Request<VolumeRequest>) -> Reply<VolumeResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("RebalanceStop", &name);
        let _guard = self.locks.lock(&name).await;
        self.info(&name).await?;
        self.gluster
            .rebalance_stop(&name)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    async fn replace_brick(&self, req: Request<ReplaceBrickRequest>) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let old = Brick::parse(&req.old_brick)
            .map_err(|e| AgentError::invalid("old_brick", e.to_string()))?;
        let new = Brick::parse(&req.new_brick)
            .map_err(|e| AgentError::invalid("new_brick", e.to_string()))?;
        log_rpc("ReplaceBrick", &name);
        let _guard = self.locks.lock(&name).await;
        let v = self.info(&name).await?;
        let has = |b: &Brick| v.bricks.iter().any(|have| &have.brick == b);
        match (has(&old), has(&new)) {
            (false, true) => {}
            (true, false) => {
                self.gluster
                    .replace_brick_commit_force(&name, &old, &new)
                    .await
                    .map_err(AgentError::from)?;
            }
            (true, true) => {
                return Err(AgentError::invalid(
                    "new_brick",
                    format!("{new} is already a brick of {name}"),
                )
                .into())
            }
            (false, false) => {
                return Err(AgentError::invalid(
                    "old_brick",
                    format!("{old} is not a brick of {name}"),
                )
                .into())
            }
        }
        self.volume_reply(&name).await
    }

    async fn rebalance_start(&self, req: Request<VolumeRequest>) -> Reply<RebalanceStatusResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("RebalanceStart", &name);
        let _guard = self.locks.lock(&name).await;
        self.info(&name).await?;
        let running = self
            .gluster
            .rebalance_status(&name)
            .await
            .map(|s| convert::rebalance(&s).status == "in progress")
            .unwrap_or(false);
        if !running {
            self.gluster
                .rebalance_start(&name)
                .await
                .map_err(AgentError::from)?;
        }
        let st = self.gluster.rebalance_status(&name).await;
        Ok(Response::new(just_started(&name, st)))
    }

    async fn rebalance_status(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        let st = self
            .gluster
            .rebalance_status(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::rebalance(&st)))
    }

    async fn brick_release(
        &self,
        req: Request<BrickReleaseRequest>,
    ) -> Reply<BrickReleaseResponse> {
        let req = req.into_inner();
        let path = PathBuf::from(&req.path);
        log_rpc("BrickRelease", "");
        if req.only_if_empty && !failed_create_leftover(&path) {
            return Ok(Response::new(BrickReleaseResponse { released: false }));
        }
        tracing::info!(path = %path.display(), "releasing brick directory");
        let released = self.release(&path).await?;
        Ok(Response::new(BrickReleaseResponse { released }))
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
