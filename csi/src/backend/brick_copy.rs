//! Snapshots, restores and clones copied on the bricks by reflink, driven from here because
//! only the controller reaches every node's agent. Where a brick cannot (no reflink, no
//! agent answering, heals pending), the copy goes through the volume as before.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::time::Duration;

use gk_agent_proto::v1::subdir_fill_request::From as FillFrom;
use gk_agent_proto::v1::{
    BrickCopyPhase, BrickCopyRequest, BrickCopyResponse, CopyStage, Snapshot,
    SnapshotCreateRequest, SubdirFillRequest, VolumeBarrierRequest, VolumeRequest,
};
use tonic::Status;

use super::{agent_status, Pool, Source};

/// How long each node may take to copy its bricks' part: less than the barrier's own
/// timeout (the agent's BARRIER_TIMEOUT_SECONDS, 30 s), so the barrier still holds when
/// every copy has answered.
const COPY_WAIT: Duration = Duration::from_secs(25);
const PROBE_WAIT: Duration = Duration::from_secs(10);

/// Why a copy cannot be made on the bricks, from what every node's agent answered to a
/// probe (or why it did not) and the volume's pending heals: None when it can. A copy into
/// a PV (`into_pv`: a restore or a clone) also needs the PV sized by the bricks' project
/// quotas: gluster's quota counts only what passes through the volume, and a copy it did
/// not count would let the PV hold more than its size.
pub fn refusal(
    probes: &[Result<BrickCopyResponse, String>],
    pending_heals: Result<u64, String>,
    into_pv: bool,
) -> Option<String> {
    if probes.is_empty() {
        return Some("no agent of the pool's other nodes is known".into());
    }
    let mut answered = BTreeSet::new();
    let mut volume = BTreeSet::new();
    for p in probes {
        match p {
            Err(e) => return Some(format!("a node's agent did not answer: {e}")),
            Ok(r) if !r.reflink => {
                return Some(format!(
                    "the filesystem of brick {} cannot clone files",
                    r.bricks.join(", ")
                ))
            }
            Ok(r) => {
                answered.extend(r.bricks.iter().cloned());
                volume.extend(r.volume_bricks.iter().cloned());
            }
        }
    }
    let missing: Vec<&String> = volume.difference(&answered).collect();
    if !missing.is_empty() {
        return Some(format!("no agent answered for bricks {missing:?}"));
    }
    if into_pv && !probes.iter().flatten().all(|p| p.project_quota) {
        return Some(
            "the pool sizes its PVs with gluster's quota, which counts only what passes \
             through the volume"
                .into(),
        );
    }
    match pending_heals {
        Ok(0) => None,
        Ok(n) => Some(format!("{n} entries wait to be healed")),
        Err(e) => Some(format!("pending heals unknown: {e}")),
    }
}

/// Whether every brick of the volume copied.
pub fn all_copied(answers: &[BrickCopyResponse]) -> Result<(), String> {
    let volume: BTreeSet<&String> = answers.iter().flat_map(|a| &a.volume_bricks).collect();
    let copied: BTreeSet<&String> = answers.iter().flat_map(|a| &a.copied).collect();
    let missing: Vec<&&String> = volume.difference(&copied).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("bricks {missing:?} did not hold the source"))
    }
}

impl Pool {
    /// Asks every node whether the volume's bricks can copy `source` into a PV (`into_pv`)
    /// or a snapshot, and the volume's pending heals; the reason when they cannot.
    async fn brick_copy_refusal(&mut self, source: &str, into_pv: bool) -> Option<String> {
        let probes = self
            .ask_every_node(source, "snapshot:probe", BrickCopyPhase::All, PROBE_WAIT)
            .await;
        if let Some(why) = refusal(&probes, Ok(0), into_pv) {
            return Some(why);
        }
        let heals = self
            .agent
            .heal_count(VolumeRequest {
                name: self.volume.clone(),
            })
            .await
            .map(|r| r.into_inner())
            .map_err(|s| s.message().to_string())
            .and_then(|h| {
                if h.bricks.iter().all(|b| b.connected) {
                    Ok(h.pending_total + h.split_brain_total)
                } else {
                    Err("a brick is not connected".into())
                }
            });
        refusal(&probes, heals, into_pv)
    }

    /// Asks every node to run `phase` of the copy (a probe when `phase` is All), waiting
    /// up to `wait` for each; what each answered, in the nodes' order.
    async fn ask_every_node(
        &mut self,
        source: &str,
        target: &str,
        phase: BrickCopyPhase,
        wait: Duration,
    ) -> Vec<Result<BrickCopyResponse, String>> {
        let volume = self.volume.clone();
        futures::future::join_all(self.nodes.iter_mut().map(|n| {
            let asked = n.brick_copy(BrickCopyRequest {
                volume: volume.clone(),
                source: source.to_string(),
                target: target.to_string(),
                probe: phase == BrickCopyPhase::All,
                phase: phase as i32,
            });
            async move {
                match tokio::time::timeout(wait, asked).await {
                    Ok(Ok(r)) => Ok(r.into_inner()),
                    Ok(Err(s)) => Err(s.message().to_string()),
                    Err(_) => Err(format!("no answer in {}s", wait.as_secs())),
                }
            }
        }))
        .await
    }

    /// Asks every node to run `phase` of the copy; what each answered, or the first failure.
    async fn on_every_node(
        &mut self,
        pool: &(dyn Display + Sync),
        source: &str,
        target: &str,
        phase: BrickCopyPhase,
    ) -> Result<Vec<BrickCopyResponse>, Status> {
        let answers: Vec<BrickCopyResponse> = self
            .ask_every_node(source, target, phase, COPY_WAIT)
            .await
            .into_iter()
            .collect::<Result<_, String>>()
            .map_err(|e| Status::unavailable(format!("pool {pool}: copying on the bricks: {e}")))?;
        all_copied(&answers).map_err(|e| {
            Status::unavailable(format!("pool {pool}: copying {source} on the bricks: {e}"))
        })?;
        Ok(answers)
    }

    /// The copy itself: the barrier on while `source` is live and every node clones its
    /// bricks' part, the barrier off whatever happened, then every node gives its clones
    /// their own gfids and moves them into `target`.
    async fn copy_on_bricks(
        &mut self,
        pool: &(dyn Display + Sync),
        source: &str,
        target: &str,
        live: bool,
    ) -> Result<(), Status> {
        let volume = self.volume.clone();
        let barrier = |enable| VolumeBarrierRequest {
            volume: volume.clone(),
            enable,
        };
        if live {
            self.agent
                .volume_barrier(barrier(true))
                .await
                .map_err(|s| agent_status(pool, s))?;
        }
        let cloned = self
            .on_every_node(pool, source, target, BrickCopyPhase::Clone)
            .await;
        // Refused when the barrier's timeout lifted it first: the clones may then hold
        // changes made on some bricks and not others, so they are not used.
        let lifted = match live {
            false => Ok(()),
            true => self
                .agent
                .volume_barrier(barrier(false))
                .await
                .map(|_| ())
                .map_err(|s| {
                    Status::unavailable(format!(
                        "pool {pool}: lifting gluster's barrier after copying {source} failed \
                         ({}); its timeout may have lifted it before the bricks copied, so \
                         the copy is made again",
                        s.message()
                    ))
                }),
        };
        let finished = match (cloned, lifted) {
            (Ok(_), Ok(())) => self
                .on_every_node(pool, source, target, BrickCopyPhase::Finish)
                .await
                .map(|_| ()),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        if finished.is_err() {
            // Best effort: what a node staged and will not finish goes; a node that does not
            // answer now removes it when the same copy is tried again.
            let _ = self
                .on_every_node(pool, source, target, BrickCopyPhase::Discard)
                .await;
        }
        finished
    }

    /// A snapshot of `dir` made on the bricks; Err(why) when it must be copied through the
    /// volume instead.
    pub(super) async fn snapshot_on_bricks(
        &mut self,
        pool: &(dyn Display + Sync),
        name: &str,
        dir: &str,
    ) -> Result<Result<Snapshot, String>, Status> {
        let source = format!("/{dir}");
        if let Some(why) = self.brick_copy_refusal(&source, false).await {
            tracing::info!(%pool, snapshot = name, why, "snapshot copied through the volume");
            return Ok(Err(why));
        }
        let volume = self.volume.clone();
        let request = |stage: CopyStage| SnapshotCreateRequest {
            volume: volume.clone(),
            name: name.to_string(),
            source: source.clone(),
            wait_seconds: 0,
            stage: stage as i32,
        };
        let prepared = match self
            .agent
            .snapshot_create(request(CopyStage::Prepare))
            .await
        {
            Ok(r) => r.into_inner().snapshot,
            // A copy through the volume already runs: it finishes the snapshot.
            Err(s) if s.code() == tonic::Code::Unavailable => {
                return Ok(Err(format!(
                    "a copy through the volume already runs ({})",
                    s.message()
                )))
            }
            Err(s) => return Err(agent_status(pool, s)),
        };
        if let Some(s) = prepared.filter(|s| s.ready) {
            return Ok(Ok(s));
        }
        if let Err(e) = self
            .copy_on_bricks(pool, &source, &format!("snapshot:{name}"), true)
            .await
        {
            tracing::warn!(%pool, snapshot = name, error = %e.message(), "copying on the bricks failed; copying through the volume");
            return Ok(Err(format!(
                "copying on the bricks failed: {}",
                e.message()
            )));
        }
        self.agent
            .snapshot_create(request(CopyStage::Seal))
            .await
            .map_err(|s| agent_status(pool, s))?
            .into_inner()
            .snapshot
            .map(Ok)
            .ok_or_else(|| Status::internal(format!("pool {pool}: the agent sent no snapshot")))
    }

    /// `dir` filled on the bricks; false when it must be filled through the volume instead.
    pub(super) async fn fill_on_bricks(
        &mut self,
        pool: &(dyn Display + Sync),
        dir: &str,
        from: &Source,
    ) -> Result<bool, Status> {
        let (source, fill_from, live) = match from {
            Source::Snapshot(n) => (
                format!("snapshot:{n}"),
                FillFrom::Snapshot(n.clone()),
                false,
            ),
            Source::Dir(d) => (format!("/{d}"), FillFrom::Subdir(format!("/{d}")), true),
        };
        if let Some(why) = self.brick_copy_refusal(&source, true).await {
            tracing::info!(%pool, dir, why, "filled through the volume");
            return Ok(false);
        }
        let volume = self.volume.clone();
        let request = |stage: CopyStage| SubdirFillRequest {
            volume: volume.clone(),
            path: format!("/{dir}"),
            from: Some(fill_from.clone()),
            wait_seconds: 0,
            stage: stage as i32,
        };
        match self.agent.subdir_fill(request(CopyStage::Prepare)).await {
            Ok(r) if r.get_ref().ready => return Ok(true),
            Ok(_) => {}
            // A fill through the volume already runs: it finishes the directory.
            Err(s) if s.code() == tonic::Code::Unavailable => return Ok(false),
            Err(s) => return Err(agent_status(pool, s)),
        }
        if let Err(e) = self
            .copy_on_bricks(pool, &source, &format!("/{dir}"), live)
            .await
        {
            tracing::warn!(%pool, dir, error = %e.message(), "filling on the bricks failed; filling through the volume");
            // Whatever the bricks copied goes first: the fill through the volume must not
            // find entries its source no longer has.
            self.agent
                .subdir_fill(request(CopyStage::Prepare))
                .await
                .map_err(|s| agent_status(pool, s))?;
            return Ok(false);
        }
        self.agent
            .subdir_fill(request(CopyStage::Seal))
            .await
            .map(|r| r.into_inner().ready)
            .map_err(|s| agent_status(pool, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(bricks: &[&str], all: &[&str], reflink: bool) -> Result<BrickCopyResponse, String> {
        Ok(BrickCopyResponse {
            volume_bricks: all.iter().map(|s| s.to_string()).collect(),
            bricks: bricks.iter().map(|s| s.to_string()).collect(),
            copied: bricks.iter().map(|s| s.to_string()).collect(),
            reflink,
            entries: 0,
            project_quota: false,
        })
    }

    const ALL: [&str; 3] = ["a:/b", "b:/b", "c:/b"];

    #[test]
    fn bricks_copy_only_when_every_brick_can_and_nothing_waits_to_heal() {
        let every = vec![
            node(&["a:/b"], &ALL, true),
            node(&["b:/b"], &ALL, true),
            node(&["c:/b"], &ALL, true),
        ];
        assert_eq!(refusal(&every, Ok(0), false), None);
        assert!(refusal(&every, Ok(3), false).unwrap().contains("3 entries"));
        assert!(refusal(&every, Err("x".into()), false)
            .unwrap()
            .contains("unknown"));
        assert!(refusal(&[], Ok(0), false).is_some());
        // Into a PV only where the bricks' project quotas size it.
        assert!(refusal(&every, Ok(0), true)
            .unwrap()
            .contains("gluster's quota"));
        let projects: Vec<_> = every
            .iter()
            .cloned()
            .map(|p| {
                p.map(|mut r| {
                    r.project_quota = true;
                    r
                })
            })
            .collect();
        assert_eq!(refusal(&projects, Ok(0), true), None);
        let no_reflink = vec![
            node(&["a:/b"], &ALL, false),
            every[1].clone(),
            every[2].clone(),
        ];
        assert!(refusal(&no_reflink, Ok(0), false)
            .unwrap()
            .contains("cannot clone files"));
        let silent = vec![
            every[0].clone(),
            Err("unavailable".into()),
            every[2].clone(),
        ];
        assert!(refusal(&silent, Ok(0), false)
            .unwrap()
            .contains("did not answer"));
        let unknown = vec![every[0].clone(), every[2].clone()];
        assert!(refusal(&unknown, Ok(0), false).unwrap().contains("b:/b"));
    }

    #[test]
    fn a_copy_counts_only_when_every_brick_copied() {
        let done: Vec<_> = [
            node(&["a:/b"], &ALL, true),
            node(&["b:/b"], &ALL, true),
            node(&["c:/b"], &ALL, true),
        ]
        .into_iter()
        .map(Result::unwrap)
        .collect();
        assert_eq!(all_copied(&done), Ok(()));
        let mut short = done.clone();
        short[1].copied.clear();
        assert!(all_copied(&short).unwrap_err().contains("b:/b"));
    }
}
