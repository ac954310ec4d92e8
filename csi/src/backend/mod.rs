//! Where the controller's volumes come from: a pool GlusterVolume's brick agent.

mod brick_copy;

use std::collections::HashMap;
use std::fmt::Display;
use std::sync::Arc;

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use gk_agent_proto::v1::subdir_fill_request::From as FillFrom;
use gk_agent_proto::v1::{
    CopyStage, QuotaEntry, Snapshot, SnapshotCreateRequest, SnapshotRequest, SubdirCreateRequest,
    SubdirDeleteRequest, SubdirFillRequest, SubdirGetRequest, VolumeRequest,
};
use std::collections::BTreeSet;
use std::time::Duration;

use gk_agent_proto::v1::SubdirResponse;
use tonic::transport::Channel;
use tonic::{Code, Status};

use crate::params::{ObjectKey, Provisioning};

/// How a call of [`Pool::snapshot_create`] made the snapshot it answers with.
#[derive(Debug, Clone, PartialEq)]
pub enum Made {
    /// Ready before this call; nothing was copied now.
    Earlier,
    /// Copied on the bricks by reflink, while gluster's barrier held the source's writes,
    /// in `seconds`.
    OnBricks { seconds: f64 },
    /// Copied (or still being copied) file by file through the volume, and why not on the
    /// bricks.
    ThroughVolume { why: String },
}

/// A pool volume ready for use: its agent, gluster name and mount servers.
#[derive(Clone)]
pub struct Pool {
    pub agent: BrickAgentClient<Channel>,
    /// The agents of the pool's other nodes that answer (may include `agent`'s): on a
    /// volume sized by the bricks' project quotas, each gives a PV's directory its limit
    /// on its own bricks. Empty where the resolver knows one agent only.
    pub nodes: Vec<BrickAgentClient<Channel>>,
    /// The gluster volume name.
    pub volume: String,
    /// Volfile servers: the primary first, then the backups.
    pub servers: Vec<String>,
    /// Whether clients must mount with gluster's TLS (management and I/O).
    pub tls: bool,
    /// The Secret (in the CSI driver's namespace) holding the gluster certificate clients
    /// mount with, when it is not the one the operator issues the node plugins: a pool made
    /// by hand has its own CA.
    pub tls_secret: Option<String>,
    /// What the pool holds, when its resolver knows (a GlusterVolume's status); otherwise
    /// asked of the agent when needed.
    pub total_bytes: Option<u64>,
    /// The pool's tuning profile, when its resolver knows it.
    pub profile: Option<gk_api::crd::TuningProfile>,
}

/// Finds pools by their GlusterVolume. The production resolver reads the GlusterVolume's
/// status and the cluster's agent credentials from the Kubernetes API; tests name pools directly.
pub trait PoolResolver: Send + Sync + 'static {
    fn resolve(
        &self,
        pool: &ObjectKey,
    ) -> impl std::future::Future<Output = Result<Pool, Status>> + Send;
    /// Every pool this resolver knows, for ListVolumes.
    fn pools(&self) -> impl std::future::Future<Output = Result<Vec<ObjectKey>, Status>> + Send;

    /// Makes (or finds, when the same) a dedicated GlusterVolume and waits until it serves.
    /// With the `claim` it is for, nothing is made once that claim is gone, and a volume
    /// made for a claim deleted while it is waited for is deleted again.
    fn create_dedicated(
        &self,
        key: &ObjectKey,
        spec: &Provisioning,
        bytes: u64,
        claim: Option<&ObjectKey>,
    ) -> impl std::future::Future<Output = Result<Dedicated, Status>> + Send {
        let _ = (key, spec, bytes, claim);
        async {
            Err(Status::unimplemented(
                "dedicated volumes need the Kubernetes API",
            ))
        }
    }

    /// The dedicated volume, if it exists.
    fn get_dedicated(
        &self,
        key: &ObjectKey,
    ) -> impl std::future::Future<Output = Result<Option<Dedicated>, Status>> + Send {
        let _ = key;
        async {
            Err(Status::unimplemented(
                "dedicated volumes need the Kubernetes API",
            ))
        }
    }

    /// Deletes a dedicated GlusterVolume (with its data) and waits until it is gone.
    fn delete_dedicated(
        &self,
        key: &ObjectKey,
    ) -> impl std::future::Future<Output = Result<(), Status>> + Send {
        let _ = key;
        async {
            Err(Status::unimplemented(
                "dedicated volumes need the Kubernetes API",
            ))
        }
    }

    /// Every dedicated volume this driver made, for ListVolumes.
    fn list_dedicated(
        &self,
    ) -> impl std::future::Future<Output = Result<Vec<(ObjectKey, Dedicated)>, Status>> + Send {
        async { Ok(Vec::new()) }
    }

    /// Bytes a new dedicated volume of `spec` could hold on its cluster.
    fn dedicated_capacity(
        &self,
        spec: &Provisioning,
    ) -> impl std::future::Future<Output = Result<u64, Status>> + Send {
        let _ = spec;
        async {
            Err(Status::unimplemented(
                "dedicated volumes need the Kubernetes API",
            ))
        }
    }

    /// Records a dedicated volume's new size and waits until the operator has grown the
    /// volume to hold it (an error naming the reason when it refuses).
    fn expand_dedicated(
        &self,
        key: &ObjectKey,
        bytes: u64,
    ) -> impl std::future::Future<Output = Result<(), Status>> + Send {
        let _ = (key, bytes);
        async {
            Err(Status::unimplemented(
                "dedicated volumes need the Kubernetes API",
            ))
        }
    }
}

/// A dedicated volume as clients mount it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedicated {
    pub volume: String,
    pub servers: Vec<String>,
    pub bytes: u64,
    pub tls: bool,
    /// The directory that holds the PV's data, with a quota of the PV's size (volumes made
    /// before PVs had one mount the root).
    pub subdir: Option<String>,
    /// The volume's tuning profile (its own, or its cluster's default).
    pub profile: Option<gk_api::crd::TuningProfile>,
}

/// The directory of a dedicated volume that holds its PV, quota'd to the PV's size.
pub const DEDICATED_DIR: &str = "pv";

/// What a new directory is filled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A snapshot of the same pool, by name.
    Snapshot(String),
    /// Another directory of the same pool (a clone).
    Dir(String),
}

/// A fixed set of pools.
#[derive(Clone, Default)]
pub struct StaticPools {
    pub pools: Arc<HashMap<ObjectKey, Pool>>,
}

impl PoolResolver for StaticPools {
    async fn resolve(&self, pool: &ObjectKey) -> Result<Pool, Status> {
        self.pools
            .get(pool)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("pool GlusterVolume {pool} does not exist")))
    }

    async fn pools(&self) -> Result<Vec<ObjectKey>, Status> {
        let mut keys: Vec<ObjectKey> = self.pools.keys().cloned().collect();
        keys.sort_by_key(|k| k.to_string());
        Ok(keys)
    }
}

/// Why a PV's directory is not yet held to its size: CreateVolume or ControllerExpandVolume
/// answers UNAVAILABLE with it, and the provisioner or resizer retries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotHeld {
    #[error("made, but not every brick limits it to its size: {}; retried", .0.join("; "))]
    Refused(Vec<String>),
    #[error("no brick limits it to its size yet; retried")]
    Nowhere,
    #[error(
        "only {held} of the {bricks} bricks that hold it limit it to its size yet (the other \
         nodes' agents did not answer); retried"
    )]
    Minority { held: usize, bricks: usize },
}

/// Whether a PV's directory is held to its size: no node refused to enforce it, and more
/// than half of the bricks that hold it do (so a replicated write past the size fails even
/// while the rest catch up at their agents' next pass). `Err` says why not.
fn enforced_enough(
    enforced: &BTreeSet<String>,
    bricks: &BTreeSet<String>,
    failed: &[String],
) -> Result<(), NotHeld> {
    if !failed.is_empty() {
        return Err(NotHeld::Refused(failed.to_vec()));
    }
    // No other node could be asked (a resolver that knows one agent): the answering node's
    // bricks hold it, the others' agents catch up at their next pass.
    if bricks.is_empty() {
        return if enforced.is_empty() {
            Err(NotHeld::Nowhere)
        } else {
            Ok(())
        };
    }
    let held = bricks.intersection(enforced).count();
    if held * 2 <= bricks.len() {
        return Err(NotHeld::Minority {
            held,
            bricks: bricks.len(),
        });
    }
    Ok(())
}

/// How long one node may take to give a PV's directory its project limit.
const ENFORCE_WAIT: Duration = Duration::from_secs(15);

/// Agent errors, with the pool named, keeping the agent's code (AlreadyExists, NotFound, …).
pub fn agent_status(pool: &(dyn Display + Sync), s: Status) -> Status {
    let code = match s.code() {
        Code::Unknown | Code::Internal => Code::Unavailable,
        c => c,
    };
    Status::new(code, format!("pool {pool}: {}", s.message()))
}

impl Pool {
    /// What the pool holds in all: no volume on it can ever be larger.
    pub async fn capacity(&mut self, pool: &(dyn Display + Sync)) -> Result<u64, Status> {
        if let Some(t) = self.total_bytes.filter(|t| *t > 0) {
            return Ok(t);
        }
        let req = || VolumeRequest {
            name: self.volume.clone(),
        };
        let vol = self
            .agent
            .volume_info(req())
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner()
            .volume
            .ok_or_else(|| Status::not_found(format!("pool {pool}: its gluster volume is gone")))?;
        let st = self
            .agent
            .volume_status(req())
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner();
        let (total, _) = gk_api::capacity::of_volume(&vol, &st);
        self.total_bytes = Some(total);
        Ok(total)
    }

    /// Refuses a volume of `bytes` that the pool can never hold (OUT_OF_RANGE, as the CSI
    /// spec asks of sizes the plugin cannot provide).
    pub async fn check_fits(
        &mut self,
        pool: &(dyn Display + Sync),
        bytes: u64,
    ) -> Result<(), Status> {
        let total = self.capacity(pool).await?;
        if bytes > total {
            return Err(Status::out_of_range(format!(
                "capacity_range: {bytes} bytes are more than pool {pool} can ever hold \
                 ({total} bytes); ask for less, or grow the pool (its size or brickCount)"
            )));
        }
        Ok(())
    }

    pub async fn create_dir(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
        bytes: u64,
    ) -> Result<(), Status> {
        let made = self
            .agent
            .subdir_create(SubdirCreateRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
                limit_bytes: bytes,
            })
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner();
        self.enforce_everywhere(pool, dir, made).await
    }

    pub async fn expand_dir(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
        bytes: u64,
    ) -> Result<(), Status> {
        let grown = self
            .agent
            .subdir_expand(SubdirCreateRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
                limit_bytes: bytes,
            })
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner();
        self.enforce_everywhere(pool, dir, grown).await
    }

    /// On a volume sized by the bricks' project quotas, has every other node's agent give
    /// `dir` its limit on its bricks, and answers only when a majority of the bricks that
    /// hold it enforce it (so replicated writes past the size fail); a node that does not
    /// answer enforces it at its agent's next pass. Nothing to do under gluster's quota.
    async fn enforce_everywhere(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
        answer: SubdirResponse,
    ) -> Result<(), Status> {
        if !answer.project_quota {
            return Ok(());
        }
        let mut enforced: BTreeSet<String> = answer.enforced_bricks.into_iter().collect();
        let mut bricks: BTreeSet<String> = BTreeSet::new();
        let mut failed = Vec::new();
        for node in &mut self.nodes {
            let asked = node.subdir_enforce(SubdirGetRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
            });
            match tokio::time::timeout(ENFORCE_WAIT, asked).await {
                Ok(Ok(r)) => {
                    let r = r.into_inner();
                    enforced.extend(r.enforced_bricks);
                    bricks.extend(r.bricks);
                }
                // Its bricks are then most likely down with it.
                Ok(Err(s)) if matches!(s.code(), Code::Unavailable | Code::DeadlineExceeded) => {
                    tracing::warn!(%pool, dir, error = %s.message(), "a node did not enforce a PV's project limit; its agent will at its next pass");
                }
                Ok(Err(s)) => failed.push(s.message().to_string()),
                Err(_) => {
                    tracing::warn!(%pool, dir, "a node did not answer within {}s to enforce a PV's project limit; its agent will at its next pass", ENFORCE_WAIT.as_secs())
                }
            }
        }
        enforced_enough(&enforced, &bricks, &failed)
            .map_err(|why| Status::unavailable(format!("pool {pool}: {dir}: {why}")))
    }

    pub async fn delete_dir(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
    ) -> Result<(), Status> {
        self.agent
            .subdir_delete(SubdirDeleteRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
            })
            .await
            .map(|_| ())
            .map_err(|s| agent_status(pool, s))
    }

    /// The limit of one directory of the pool; None when it does not exist or has no limit.
    pub async fn limit_of(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
    ) -> Result<Option<u64>, Status> {
        match self
            .agent
            .subdir_get(SubdirGetRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
            })
            .await
        {
            Ok(r) => Ok(Some(r.into_inner().limit_bytes)),
            Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
            Err(s) => Err(agent_status(pool, s)),
        }
    }

    /// Copies `dir` into the snapshot `name`: on the bricks by reflink where they allow,
    /// otherwise through the volume, waiting up to `wait_seconds` for that copy; the
    /// snapshot comes back not ready while it still runs. Says how this call made it.
    pub async fn snapshot_create(
        &mut self,
        pool: &(dyn Display + Sync),
        name: &str,
        dir: &str,
        wait_seconds: u32,
    ) -> Result<(Snapshot, Made), Status> {
        // The external snapshotter asks again until the snapshot is ready: a ready one is
        // answered without probing every node's bricks.
        match self.snapshot(pool, name).await? {
            Some(s) if s.ready && s.source == format!("/{dir}") => return Ok((s, Made::Earlier)),
            _ => {}
        }
        let started = std::time::Instant::now();
        let why = match self.snapshot_on_bricks(pool, name, dir).await? {
            Ok(s) => {
                let seconds = started.elapsed().as_secs_f64();
                return Ok((s, Made::OnBricks { seconds }));
            }
            Err(why) => why,
        };
        let s = self
            .agent
            .snapshot_create(SnapshotCreateRequest {
                volume: self.volume.clone(),
                name: name.to_string(),
                source: format!("/{dir}"),
                wait_seconds,
                stage: CopyStage::Mount as i32,
            })
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner()
            .snapshot
            .ok_or_else(|| Status::internal(format!("pool {pool}: the agent sent no snapshot")))?;
        Ok((s, Made::ThroughVolume { why }))
    }

    /// The snapshot `name`; None when it does not exist.
    pub async fn snapshot(
        &mut self,
        pool: &(dyn Display + Sync),
        name: &str,
    ) -> Result<Option<Snapshot>, Status> {
        match self
            .agent
            .snapshot_get(SnapshotRequest {
                volume: self.volume.clone(),
                name: name.to_string(),
            })
            .await
        {
            Ok(r) => Ok(r.into_inner().snapshot),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(agent_status(pool, s)),
        }
    }

    pub async fn snapshot_delete(
        &mut self,
        pool: &(dyn Display + Sync),
        name: &str,
    ) -> Result<(), Status> {
        self.agent
            .snapshot_delete(SnapshotRequest {
                volume: self.volume.clone(),
                name: name.to_string(),
            })
            .await
            .map(|_| ())
            .map_err(|s| agent_status(pool, s))
    }

    /// The pool's complete snapshots, by name.
    pub async fn snapshots(
        &mut self,
        pool: &(dyn Display + Sync),
    ) -> Result<Vec<Snapshot>, Status> {
        self.agent
            .snapshot_list(VolumeRequest {
                name: self.volume.clone(),
            })
            .await
            .map(|r| r.into_inner().snapshots)
            .map_err(|s| agent_status(pool, s))
    }

    /// Fills the directory `dir` (made, with its limit) from a snapshot or from another
    /// directory of the pool. False while the copy still runs.
    pub async fn fill_dir(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
        from: &Source,
        wait_seconds: u32,
    ) -> Result<bool, Status> {
        if self.fill_on_bricks(pool, dir, from).await? {
            return Ok(true);
        }
        let from = match from {
            Source::Snapshot(name) => FillFrom::Snapshot(name.clone()),
            Source::Dir(d) => FillFrom::Subdir(format!("/{d}")),
        };
        self.agent
            .subdir_fill(SubdirFillRequest {
                volume: self.volume.clone(),
                path: format!("/{dir}"),
                from: Some(from),
                wait_seconds,
                stage: CopyStage::Mount as i32,
            })
            .await
            .map(|r| r.into_inner().ready)
            .map_err(|s| agent_status(pool, s))
    }

    /// The pool's top-level directories that carry a limit, as the agent reads them.
    async fn limited(&mut self, pool: &(dyn Display + Sync)) -> Result<Vec<QuotaEntry>, Status> {
        self.agent
            .subdir_list(VolumeRequest {
                name: self.volume.clone(),
            })
            .await
            .map(|r| r.into_inner().entries)
            .map_err(|s| agent_status(pool, s))
    }

    /// Directories with a limit, and the limit in bytes.
    pub async fn dirs(
        &mut self,
        pool: &(dyn Display + Sync),
    ) -> Result<Vec<(String, u64)>, Status> {
        Ok(self
            .limited(pool)
            .await?
            .into_iter()
            .filter_map(|e| {
                let dir = e.path.strip_prefix('/')?;
                (!dir.is_empty() && !dir.contains('/'))
                    .then(|| (dir.to_string(), e.hard_limit_bytes))
            })
            .collect())
    }

    /// Bytes that new volumes can still promise: the pool's free space less what existing
    /// volumes may still grow into.
    pub async fn free_bytes(&mut self, pool: &(dyn Display + Sync)) -> Result<u64, Status> {
        let status = self
            .agent
            .volume_status(VolumeRequest {
                name: self.volume.clone(),
            })
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner();
        let free = status
            .bricks
            .iter()
            .filter(|b| b.online)
            .map(|b| b.size_free_bytes)
            .min()
            .unwrap_or(0);
        let promised: u64 = self
            .limited(pool)
            .await?
            .iter()
            .map(|q| q.hard_limit_bytes.saturating_sub(q.used_bytes))
            .sum();
        Ok(free.saturating_sub(promised))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(bricks: &[&str]) -> BTreeSet<String> {
        bricks.iter().map(|b| b.to_string()).collect()
    }

    #[test]
    fn a_pv_is_held_once_a_majority_of_its_bricks_enforce_it() {
        let all = set(&["a:/b/1", "b:/b/1", "c:/b/1"]);
        assert_eq!(enforced_enough(&all, &all, &[]), Ok(()));
        // One node away: its agent's next pass catches up; two bricks refuse writes past it.
        assert_eq!(
            enforced_enough(&set(&["a:/b/1", "c:/b/1"]), &all, &[]),
            Ok(())
        );
        let e = enforced_enough(&set(&["a:/b/1"]), &all, &[]).unwrap_err();
        assert_eq!(e, NotHeld::Minority { held: 1, bricks: 3 });
        assert!(e.to_string().contains("only 1 of the 3 bricks"), "{e}");
        // No node answered the fan-out: only the answering node's own brick is known.
        assert!(enforced_enough(&set(&["a:/b/1"]), &BTreeSet::new(), &[]).is_ok());
        let e = enforced_enough(&all, &all, &["node b: xfs_quota failed".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "made, but not every brick limits it to its size: node b: xfs_quota failed; retried"
        );
        assert_eq!(
            enforced_enough(&BTreeSet::new(), &BTreeSet::new(), &[]),
            Err(NotHeld::Nowhere)
        );
    }
}
