//! Day-two changes to an existing gluster volume: bricks replaced (GlusterCluster
//! spec.replacements), and the brick count raised (add-brick, then rebalance) or lowered
//! (remove-brick start, status, commit only once every file has moved).

use std::collections::BTreeMap;

use gk_agent::proto::{
    AddBrickRequest, RebalanceStatusResponse, RemoveBrickRequest, ReplaceBrickRequest,
    Volume as AgentVolume, VolumeRequest,
};
use gk_gluster::Brick;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;
use tonic::Code;

use crate::cluster::NodeAgent;
use crate::conditions::Desired;
use crate::controller::Context;
use crate::crd::{
    GlusterCluster, GlusterVolume, GlusterVolumeStatus, MigrationPhase, ResizeOperation,
    ResizeStatus,
};
use crate::plan::{self, Migration, NodeSlot, Resize};
use crate::Error;

/// What the day-two step leaves for status.
#[derive(Debug, Default)]
pub struct Day2 {
    pub resize: Option<ResizeStatus>,
    pub retired: Vec<String>,
    /// A replacement or resize that cannot go on, and why (reason, message).
    pub blocked: Option<(&'static str, String)>,
}

/// Gluster answers a status query for a migration that never ran with an error ("Rebalance
/// not started for volume v.", "remove-brick not started ..."): that is the status "not
/// started", not a failure.
fn not_started(
    answer: Result<tonic::Response<RebalanceStatusResponse>, tonic::Status>,
    node: &str,
) -> Result<RebalanceStatusResponse, Error> {
    match answer {
        Ok(r) => Ok(r.into_inner()),
        Err(s) if s.code() == Code::FailedPrecondition && s.message().contains("not started") => {
            Ok(RebalanceStatusResponse {
                status: "not started".into(),
                nodes: Vec::new(),
            })
        }
        Err(s) => Err(Error::agent(node, s)),
    }
}

fn parse_bricks(list: &[String]) -> Vec<Brick> {
    list.iter().filter_map(|b| Brick::parse(b).ok()).collect()
}

fn set_size(v: &AgentVolume) -> usize {
    if v.disperse_count > 0 {
        v.disperse_count as usize
    } else {
        v.replica_count.max(1) as usize
    }
}

async fn event(ctx: &Context, gv: &GlusterVolume, warn: bool, reason: &str, note: String) {
    let ev = Event {
        type_: if warn {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note.chars().take(1000).collect()),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&ev, &gv.object_ref(&())).await {
        tracing::warn!(error = %e, "publishing an event failed");
    }
}

/// Records a step before gluster is asked to take it, so an operator restarted in between
/// still knows a migration is owed (a rebalance after add-brick, say).
async fn save(
    ctx: &Context,
    gv: &GlusterVolume,
    resize: &ResizeStatus,
    retired: &[String],
) -> Result<(), Error> {
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    let patch = json!({"status": {"resize": resize, "retiredBricks": retired}});
    api.patch_status(
        &gv.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Every brick online and nothing to heal; Err says what is not.
async fn bricks_safe(
    anchor: &mut NodeAgent,
    vol: &AgentVolume,
) -> Result<Result<(), String>, Error> {
    let req = || VolumeRequest {
        name: vol.name.clone(),
    };
    let st = anchor
        .client
        .volume_status(req())
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner();
    let offline: Vec<&String> = vol
        .bricks
        .iter()
        .filter(|b| !st.bricks.iter().any(|s| &s.brick == *b && s.online))
        .collect();
    if !offline.is_empty() {
        return Ok(Err(format!(
            "{} of {} bricks are offline",
            offline.len(),
            vol.bricks.len()
        )));
    }
    if vol.replica_count > 1 || vol.disperse_count > 0 {
        let h = anchor
            .client
            .heal_info(req())
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?
            .into_inner();
        if h.pending_total > 0 || h.split_brain_total > 0 {
            return Ok(Err(format!(
                "{} entries wait for self-heal and {} are in split-brain",
                h.pending_total, h.split_brain_total
            )));
        }
    }
    Ok(Ok(()))
}

/// Runs replacements, then resizing, on the existing volume `vol`.
pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    keep: &GlusterVolumeStatus,
) -> Result<Day2, Error> {
    let mut out = Day2 {
        resize: keep.resize.clone(),
        retired: keep.retired_bricks.clone(),
        blocked: None,
    };
    if replace(ctx, gv, gc, agents, vol, &mut out).await? {
        // The volume changed under us; resizing waits for the next round and the heal.
        return Ok(out);
    }
    // spec.size is weighed against every node's size; with a node missing, the smaller
    // cluster could read as a shrink, so nothing is resized until all answer.
    let all_answer = gc.spec.nodes.len() <= agents.len();
    if out.blocked.is_none() && (all_answer || gv.spec.size.is_none()) {
        resize(ctx, gv, agents, vol, keep, &mut out).await?;
    }
    Ok(out)
}

/// Replaces every brick on a node named in spec.replacements. Returns whether any brick
/// was replaced. The old bricks' directories are left alone (and listed as retired).
async fn replace(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    out: &mut Day2,
) -> Result<bool, Error> {
    let known = gc
        .status
        .as_ref()
        .map(|s| s.peers.as_slice())
        .unwrap_or(&[]);
    let mut map: BTreeMap<String, (String, NodeSlot)> = BTreeMap::new();
    for r in &gc.spec.replacements {
        let old = agents
            .iter()
            .find(|a| a.node == r.node)
            .map(|a| a.address.clone())
            .or_else(|| {
                known
                    .iter()
                    .find(|p| p.node == r.node)
                    .map(|p| p.address.clone())
            });
        let Some(old) = old else {
            out.blocked = Some((
                "ReplacementBlocked",
                format!(
                    "the pool address of node {} is not known (it never joined, or its status \
                     was lost); its bricks cannot be matched",
                    r.node
                ),
            ));
            continue;
        };
        if !vol
            .bricks
            .iter()
            .any(|b| b.split_once(':').is_some_and(|(h, _)| h == old))
        {
            continue;
        }
        let Some(slot) = agents.iter().find(|a| a.node == r.replacement) else {
            out.blocked = Some((
                "ReplacementBlocked",
                format!(
                    "waiting for the brick agent of {} to take over the bricks of {}",
                    r.replacement, r.node
                ),
            ));
            continue;
        };
        map.insert(old, (r.node.clone(), slot.slot()));
    }
    if map.is_empty() {
        return Ok(false);
    }
    let pairs = match plan::replacements(
        &vol.name,
        set_size(vol),
        &parse_bricks(&vol.bricks),
        &map,
        &parse_bricks(&out.retired),
    ) {
        Ok(p) => p,
        Err(e) => {
            out.blocked = Some(("ReplacementRefused", e.to_string()));
            return Ok(false);
        }
    };
    for (old, new) in &pairs {
        // Any agent but the replaced node's own (it is usually dead).
        let anchor = agents
            .iter_mut()
            .find(|a| a.address != old.host)
            .ok_or_else(|| Error::NotReady("no other brick agent answers".into()))?;
        tracing::info!(volume = %vol.name, %old, %new, "replacing brick");
        out.retired.push(old.to_string());
        anchor
            .client
            .replace_brick(ReplaceBrickRequest {
                name: vol.name.clone(),
                old_brick: old.to_string(),
                new_brick: new.to_string(),
            })
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?;
        let _ = anchor
            .client
            .heal_start(VolumeRequest {
                name: vol.name.clone(),
            })
            .await;
        event(
            ctx,
            gv,
            false,
            "BrickReplaced",
            format!(
                "replaced brick {old} by {new}; self-heal fills the new brick (see healPending); \
                 the old brick's directory is kept"
            ),
        )
        .await;
    }
    Ok(!pairs.is_empty())
}

/// Sums over nodes and gluster's words per node; gluster calls the node it asked `localhost`,
/// shown here by its pool address.
fn totals(r: &RebalanceStatusResponse, local: &str) -> (i64, i64, i64, i64, String) {
    let sum =
        |f: fn(&gk_agent::proto::RebalanceNode) -> u64| r.nodes.iter().map(f).sum::<u64>() as i64;
    let per_node = r
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{}: {} ({} files, {} failures, {} skipped)",
                if n.host == "localhost" {
                    local
                } else {
                    &n.host
                },
                n.status,
                n.files,
                n.failures,
                n.skipped
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    (
        sum(|n| n.files),
        sum(|n| n.size_bytes),
        sum(|n| n.failures),
        sum(|n| n.skipped),
        per_node,
    )
}

/// Copies gluster's progress into `r` and says what to do next.
fn progress(r: &mut ResizeStatus, st: &RebalanceStatusResponse, local: &str) -> Migration {
    let (files, bytes, failures, skipped, per_node) = totals(st, local);
    r.files_moved = files;
    r.bytes_moved = bytes;
    r.failures = failures;
    r.skipped = skipped;
    let verdict = plan::migration(
        &st.status,
        failures as u64,
        skipped as u64,
        r.operation == ResizeOperation::Shrink,
    );
    r.message = match &verdict {
        Migration::Failed(why) => Some(format!("{why}. Per node: {per_node}")),
        _ if per_node.is_empty() => None,
        _ => Some(per_node),
    };
    verdict
}

/// A resize decided and not started yet.
fn pending(operation: ResizeOperation, bricks: &[Brick]) -> ResizeStatus {
    ResizeStatus {
        operation,
        phase: MigrationPhase::Pending,
        bricks: bricks.iter().map(|b| b.to_string()).collect(),
        files_moved: 0,
        bytes_moved: 0,
        failures: 0,
        skipped: 0,
        message: None,
    }
}

fn in_flight(r: &Option<ResizeStatus>, op: ResizeOperation) -> bool {
    r.as_ref().is_some_and(|r| {
        r.operation == op
            && matches!(
                r.phase,
                MigrationPhase::Pending | MigrationPhase::InProgress
            )
    })
}

async fn resize(
    ctx: &Context,
    gv: &GlusterVolume,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    keep: &GlusterVolumeStatus,
    out: &mut Day2,
) -> Result<(), Error> {
    let spec_changed = keep.observed_generation != gv.metadata.generation;
    let existing = parse_bricks(&vol.bricks);
    let slots: Vec<NodeSlot> = agents.iter().map(NodeAgent::slot).collect();
    // A shrink under way is finished first, whatever the spec says meanwhile.
    let planned = if in_flight(&out.resize, ResizeOperation::Shrink) {
        Resize::Shrink(parse_bricks(
            &out.resize.as_ref().expect("in flight").bricks,
        ))
    } else {
        match plan::resize(
            &gv.spec,
            &vol.name,
            &slots,
            &existing,
            &parse_bricks(&out.retired),
        ) {
            Ok(p) => p,
            Err(e) => {
                out.blocked = Some(("ResizeRefused", e.to_string()));
                return Ok(());
            }
        }
    };
    let anchor = &mut agents[0];
    let name = vol.name.clone();
    match planned {
        Resize::Keep => {
            if in_flight(&out.resize, ResizeOperation::Expand) {
                let r = out.resize.as_mut().expect("in flight");
                rebalance(anchor, &name, r).await?;
            }
        }
        Resize::Expand(bricks) => {
            let same_refused = out.resize.as_ref().is_some_and(|r| {
                r.operation == ResizeOperation::Expand
                    && r.phase == MigrationPhase::Refused
                    && !spec_changed
            });
            if same_refused {
                return Ok(());
            }
            let mut r = pending(ResizeOperation::Expand, &bricks);
            if let Err(why) = bricks_safe(anchor, vol).await? {
                r.message = Some(format!("waiting before adding bricks: {why}"));
                out.resize = Some(r);
                return Ok(());
            }
            save(ctx, gv, &r, &out.retired).await?;
            tracing::info!(volume = %name, bricks = ?r.bricks, "adding bricks");
            match anchor
                .client
                .add_brick(AddBrickRequest {
                    name: name.clone(),
                    bricks: r.bricks.clone(),
                    force: false,
                })
                .await
            {
                Ok(_) => {}
                Err(s) if matches!(s.code(), Code::FailedPrecondition | Code::InvalidArgument) => {
                    r.phase = MigrationPhase::Refused;
                    r.message = Some(format!(
                        "gluster refused to add {}: {}",
                        r.bricks.join(" "),
                        s.message()
                    ));
                    out.resize = Some(r);
                    return Ok(());
                }
                Err(s) => return Err(Error::agent(&anchor.node, s)),
            }
            event(
                ctx,
                gv,
                false,
                "BricksAdded",
                format!("added {}; rebalancing", r.bricks.join(" ")),
            )
            .await;
            rebalance(anchor, &name, &mut r).await?;
            out.resize = Some(r);
        }
        Resize::Shrink(bricks) => {
            let same_failed = out.resize.as_ref().is_some_and(|r| {
                r.operation == ResizeOperation::Shrink
                    && matches!(r.phase, MigrationPhase::Failed | MigrationPhase::Refused)
                    && !spec_changed
            });
            if same_failed {
                return Ok(());
            }
            let mut r = out
                .resize
                .clone()
                .filter(|_| in_flight(&out.resize, ResizeOperation::Shrink))
                .unwrap_or_else(|| pending(ResizeOperation::Shrink, &bricks));
            shrink(ctx, gv, anchor, vol, &mut r, &mut out.retired).await?;
            out.resize = Some(r);
        }
    }
    Ok(())
}

async fn rebalance(anchor: &mut NodeAgent, name: &str, r: &mut ResizeStatus) -> Result<(), Error> {
    let req = || VolumeRequest { name: name.into() };
    let mut st = not_started(anchor.client.rebalance_status(req()).await, &anchor.node)?;
    if progress(r, &st, &anchor.address) == Migration::Start {
        tracing::info!(volume = %name, "starting rebalance");
        st = anchor
            .client
            .rebalance_start(req())
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?
            .into_inner();
    }
    r.phase = match progress(r, &st, &anchor.address) {
        Migration::Start => MigrationPhase::Pending,
        Migration::Running => MigrationPhase::InProgress,
        Migration::Done => MigrationPhase::Completed,
        Migration::Failed(_) => MigrationPhase::Failed,
    };
    Ok(())
}

/// Whether the data on the bricks being removed fits in the free space of the rest; Err
/// says how much does not.
fn fits(
    vol: &AgentVolume,
    st: &gk_agent::proto::VolumeStatusResponse,
    removed: &[Brick],
) -> Result<(), String> {
    let set = set_size(vol);
    let data = if vol.disperse_count > 0 {
        u64::from(vol.disperse_count - vol.redundancy_count)
    } else {
        1
    };
    let (mut moving, mut room) = (0u64, 0u64);
    for group in vol.bricks.chunks(set) {
        let sizes: Vec<(u64, u64)> = group
            .iter()
            .filter_map(|b| st.bricks.iter().find(|s| &s.brick == b))
            .map(|s| (s.size_total_bytes, s.size_free_bytes))
            .collect();
        let leaving = group
            .iter()
            .any(|b| removed.iter().any(|r| &r.to_string() == b));
        if leaving {
            // Bricks of a set may share a filesystem with other volumes: count what is used
            // on the fullest one, an upper bound of this set's data.
            moving += sizes.iter().map(|(t, f)| t - f).max().unwrap_or(0) * data;
        } else {
            room += sizes.iter().map(|(_, f)| *f).min().unwrap_or(0) * data;
        }
    }
    if moving > room / 10 * 9 {
        return Err(format!(
            "the bricks being removed hold up to {} and the remaining bricks have {} free \
             (keeping a tenth spare); add space or keep the bricks",
            crate::volume::human_bytes(moving),
            crate::volume::human_bytes(room)
        ));
    }
    Ok(())
}

async fn shrink(
    ctx: &Context,
    gv: &GlusterVolume,
    anchor: &mut NodeAgent,
    vol: &AgentVolume,
    r: &mut ResizeStatus,
    retired: &mut Vec<String>,
) -> Result<(), Error> {
    let name = vol.name.clone();
    if !r.bricks.iter().any(|b| vol.bricks.contains(b)) {
        r.phase = MigrationPhase::Completed;
        return Ok(());
    }
    let req = RemoveBrickRequest {
        name: name.clone(),
        bricks: r.bricks.clone(),
    };
    let st = not_started(
        anchor.client.remove_brick_status(req.clone()).await,
        &anchor.node,
    )?;
    match progress(r, &st, &anchor.address) {
        Migration::Start => {
            if let Err(why) = bricks_safe(anchor, vol).await? {
                r.phase = MigrationPhase::Pending;
                r.message = Some(format!("waiting before moving data off the bricks: {why}"));
                return Ok(());
            }
            let sizes = anchor
                .client
                .volume_status(VolumeRequest { name: name.clone() })
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?
                .into_inner();
            if let Err(why) = fits(vol, &sizes, &parse_bricks(&r.bricks)) {
                r.phase = MigrationPhase::Refused;
                r.message = Some(format!("shrink refused: {why}"));
                return Ok(());
            }
            r.phase = MigrationPhase::Pending;
            save(ctx, gv, r, retired).await?;
            tracing::info!(volume = %name, bricks = ?r.bricks, "starting remove-brick");
            match anchor.client.remove_brick_start(req).await {
                Ok(st) => {
                    progress(r, &st.into_inner(), &anchor.address);
                    r.phase = MigrationPhase::InProgress;
                }
                Err(s) if s.code() == Code::FailedPrecondition => {
                    r.phase = MigrationPhase::Refused;
                    r.message = Some(format!("gluster refused remove-brick: {}", s.message()));
                }
                Err(s) => return Err(Error::agent(&anchor.node, s)),
            }
        }
        Migration::Running => r.phase = MigrationPhase::InProgress,
        Migration::Failed(_) => r.phase = MigrationPhase::Failed,
        Migration::Done => {
            tracing::info!(volume = %name, bricks = ?r.bricks, "committing remove-brick");
            anchor
                .client
                .remove_brick_commit(req)
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            retired.extend(r.bricks.iter().cloned());
            r.phase = MigrationPhase::Completed;
            event(
                ctx,
                gv,
                false,
                "BricksRemoved",
                format!(
                    "every file moved off {}; removed them from the volume (their directories \
                     are kept on their nodes)",
                    r.bricks.join(" ")
                ),
            )
            .await;
        }
    }
    Ok(())
}

/// The Progressing condition and any Degraded reason a resize or replacement implies.
pub fn conditions(day2: &Day2) -> (Option<Desired>, Option<(&'static str, String)>) {
    if let Some((reason, msg)) = &day2.blocked {
        return (
            Some(Desired::new("Progressing", false, reason, msg.clone())),
            None,
        );
    }
    let Some(r) = &day2.resize else {
        return (None, None);
    };
    let (verb, refused, failed) = match r.operation {
        ResizeOperation::Expand => ("Expanding", "ExpandRefused", "RebalanceFailed"),
        ResizeOperation::Shrink => ("Shrinking", "ShrinkRefused", "ShrinkFailed"),
    };
    let msg = r.message.clone().unwrap_or_default();
    match r.phase {
        MigrationPhase::Pending | MigrationPhase::InProgress => (
            Some(Desired::new(
                "Progressing",
                true,
                verb,
                format!(
                    "{} files ({}) moved so far; {msg}",
                    r.files_moved,
                    crate::volume::human_bytes(r.bytes_moved.max(0) as u64)
                ),
            )),
            None,
        ),
        MigrationPhase::Refused => (Some(Desired::new("Progressing", false, refused, msg)), None),
        MigrationPhase::Failed => (
            Some(Desired::new("Progressing", false, failed, msg.clone())),
            Some((failed, msg)),
        ),
        MigrationPhase::Completed => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(op: ResizeOperation, phase: MigrationPhase) -> Day2 {
        Day2 {
            resize: Some(ResizeStatus {
                operation: op,
                phase,
                bricks: vec![],
                files_moved: 3,
                bytes_moved: 3 << 20,
                failures: 1,
                skipped: 0,
                message: Some("10.0.0.1: failed".into()),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_rebalance_is_degraded_never_success() {
        let (p, d) = conditions(&status(ResizeOperation::Expand, MigrationPhase::Failed));
        let p = p.unwrap();
        assert!(!p.status);
        assert_eq!(p.reason, "RebalanceFailed");
        assert_eq!(
            d.unwrap(),
            ("RebalanceFailed", "10.0.0.1: failed".to_string())
        );
        let (p, d) = conditions(&status(ResizeOperation::Shrink, MigrationPhase::InProgress));
        assert!(p.as_ref().unwrap().status && p.unwrap().message.contains("3 files (3.0Mi)"));
        assert!(d.is_none());
        let (p, d) = conditions(&status(ResizeOperation::Shrink, MigrationPhase::Refused));
        assert_eq!(p.unwrap().reason, "ShrinkRefused");
        assert!(d.is_none());
        assert_eq!(
            conditions(&status(ResizeOperation::Expand, MigrationPhase::Completed)),
            (None, None)
        );
    }

    #[test]
    fn progress_sums_nodes_and_names_the_local_one() {
        let node = |host: &str, files, failures| gk_agent::proto::RebalanceNode {
            host: host.into(),
            files,
            size_bytes: files * 10,
            failures,
            status: "completed".into(),
            ..Default::default()
        };
        let st = RebalanceStatusResponse {
            status: "completed".into(),
            nodes: vec![node("localhost", 3, 0), node("10.0.0.2", 4, 1)],
        };
        let mut r = status(ResizeOperation::Expand, MigrationPhase::InProgress)
            .resize
            .unwrap();
        let verdict = progress(&mut r, &st, "10.0.0.1");
        assert!(matches!(verdict, Migration::Failed(_)), "{verdict:?}");
        assert_eq!((r.files_moved, r.bytes_moved, r.failures), (7, 70, 1));
        let msg = r.message.unwrap();
        assert!(
            msg.contains("10.0.0.1: completed (3 files") && !msg.contains("localhost"),
            "{msg}"
        );
    }

    #[test]
    fn a_shrink_must_fit_in_the_remaining_space() {
        let vol = AgentVolume {
            name: "v".into(),
            replica_count: 2,
            bricks: vec![
                "h1:/b/0".into(),
                "h2:/b/1".into(),
                "h1:/b/2".into(),
                "h2:/b/3".into(),
            ],
            ..Default::default()
        };
        let brick = |b: &str, total: u64, free: u64| gk_agent::proto::BrickStatus {
            brick: b.into(),
            online: true,
            size_total_bytes: total,
            size_free_bytes: free,
            ..Default::default()
        };
        let removed = parse_bricks(&vol.bricks[2..]);
        let roomy = gk_agent::proto::VolumeStatusResponse {
            bricks: vec![
                brick("h1:/b/0", 100, 80),
                brick("h2:/b/1", 100, 90),
                brick("h1:/b/2", 100, 50),
                brick("h2:/b/3", 100, 60),
            ],
        };
        assert!(fits(&vol, &roomy, &removed).is_ok());
        let tight = gk_agent::proto::VolumeStatusResponse {
            bricks: vec![
                brick("h1:/b/0", 100, 30),
                brick("h2:/b/1", 100, 90),
                brick("h1:/b/2", 100, 50),
                brick("h2:/b/3", 100, 60),
            ],
        };
        let e = fits(&vol, &tight, &removed).unwrap_err();
        assert!(e.contains("hold up to 50") && e.contains("30 free"), "{e}");
    }
}
