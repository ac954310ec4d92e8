//! Growing and shrinking a volume by whole sets: add-brick then rebalance, or remove-brick
//! start, status, and commit only once every file has moved.

use gk_agent_proto::v1::{
    AddBrickRequest, LogKind, LogTailRequest, RebalanceStatusResponse, RemoveBrickRequest,
    Volume as AgentVolume, VolumeRequest,
};
use gk_api::agents::NodeAgent;
use gk_api::crd::{
    GlusterCluster, GlusterVolume, GlusterVolumeStatus, MigrationPhase, ResizeOperation,
    ResizeStatus,
};
use gk_api::units::human_bytes;
use gk_gluster::Brick;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tonic::Code;

use super::runs::{self, totals};
use super::settle;
use super::state::{self, parse_bricks, run_status, save, Day2};
use crate::context::Context;
use crate::plan::{self, layout_of, Migration, NodeSlot, Resize};
use crate::{events, safety, Error};

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
        reruns: 0,
        progressed_at: None,
        checks: 0,
        run_started_at: None,
        run_replaces: None,
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

pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    keep: &GlusterVolumeStatus,
    out: &mut Day2,
) -> Result<(), Error> {
    if let Some(r) = out
        .resize
        .as_mut()
        .filter(|r| r.phase == MigrationPhase::Verifying)
    {
        // Every file has moved: the check runs end first, whatever the spec says meanwhile.
        return settle::run(ctx, gv, agents, &vol.name, r).await;
    }
    let spec_changed = keep.observed_generation != gv.metadata.generation;
    let existing = parse_bricks(&vol.bricks);
    let zones = crate::volume::lookup::zones_of(gc);
    let slots: Vec<NodeSlot> = agents.iter().map(|a| NodeSlot::of(a, &zones)).collect();
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
    if let Resize::Expand(bricks) = &planned {
        if let Some(why) = plan::pv_quota::refuses_growth(vol, bricks.len()) {
            out.blocked = Some(("ResizeRefused", why));
            return Ok(());
        }
    }
    let name = vol.name.clone();
    match planned {
        Resize::Keep => {
            if in_flight(&out.resize, ResizeOperation::Expand) {
                let r = out.resize.as_mut().expect("in flight");
                rebalance(ctx, gv, agents, &name, r).await?;
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
            let anchor = &mut agents[0];
            if let Err(why) = safety::check(anchor, vol).await {
                r.message = Some(format!("waiting before adding bricks: {why}"));
                out.resize = Some(r);
                return Ok(());
            }
            save(ctx, gv, &r, &out.retired).await?;
            settle::lookups_everywhere(anchor, &name).await?;
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
            let note = format!("added {}; rebalancing", r.bricks.join(" "));
            events::publish(
                ctx,
                gv,
                events::event(false, "BricksAdded", "Reconcile", &note),
            )
            .await;
            rebalance(ctx, gv, agents, &name, &mut r).await?;
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
            shrink(ctx, gv, agents, vol, &mut r, &mut out.retired).await?;
            out.resize = Some(r);
        }
    }
    Ok(())
}

/// Starts the rebalance an expansion owes, or reads how it goes; one that left files
/// unmoved runs again (see [`plan::rerun`]).
async fn rebalance(
    ctx: &Context,
    gv: &GlusterVolume,
    agents: &mut [NodeAgent],
    name: &str,
    r: &mut ResizeStatus,
) -> Result<(), Error> {
    let anchor = &mut agents[0];
    let mut st = runs::rebalance_status(anchor, name).await?;
    let before = r.clone();
    // A start recorded and never taken by gluster: the old run's result is not read again.
    let mut verdict = match runs::unstarted(r, &st) {
        true => Migration::Start,
        false => progress(r, &st, &anchor.address),
    };
    if let Migration::Failed(_) = &verdict {
        let why = failed_files(agents, name, &st).await;
        if plan::rerun(plan::unmoved(&st.status, r.failures as u64), r.reruns) {
            r.reruns += 1;
            let note = format!(
                "rebalance run {} of {} ended {} and left {} files unmoved;{why} Running it again",
                r.reruns,
                plan::MIGRATION_RUNS,
                st.status,
                r.failures
            );
            runs::warn(ctx, gv, name, "MigrationRerun", &note).await;
            verdict = Migration::Start;
        } else {
            append(r, &why);
        }
    }
    let anchor = &mut agents[0];
    if verdict == Migration::Running {
        if let Some(lost) = runs::lost(&st, &anchor.address, r) {
            let Some(note) = rerun_lost(lost, r, "") else {
                return Ok(());
            };
            runs::stop_rebalance(anchor, name).await?;
            runs::warn(ctx, gv, name, "MigrationLost", &note).await;
            verdict = Migration::Start;
        }
    }
    if verdict == Migration::Start {
        tracing::info!(volume = %name, "starting rebalance");
        r.run_started_at = Some(Time(Timestamp::now()));
        r.run_replaces = runs::task(&st);
        state::record(ctx, gv, r).await?;
        let anchor = &mut agents[0];
        st = runs::start_rebalance(anchor, name).await?;
        runs::unstarted(r, &st);
        verdict = match progress(r, &st, &anchor.address) {
            // The run just started can still show the last one's end.
            Migration::Failed(_) | Migration::Done => Migration::Running,
            v => v,
        };
        plan::stalled(None, r, Timestamp::now(), ctx.config.migration_stall);
    } else if verdict == Migration::Running {
        report_stall(ctx, gv, &before, r).await;
    }
    r.phase = match verdict {
        Migration::Start => MigrationPhase::Pending,
        Migration::Running => MigrationPhase::InProgress,
        Migration::Done => return settle::begin(ctx, gv, agents, name, r).await,
        Migration::Failed(_) => MigrationPhase::Failed,
    };
    Ok(())
}

/// What gluster's rebalance logs say about the files that failed to move, for each node
/// that counted failures: ` Gluster's log on NODE: ...`, or nothing when no log answers.
async fn failed_files(
    agents: &mut [NodeAgent],
    name: &str,
    st: &RebalanceStatusResponse,
) -> String {
    let local = agents[0].address.clone();
    let mut out = String::new();
    for n in st.nodes.iter().filter(|n| n.failures > 0) {
        let host = runs::host(n, &local);
        let Some(agent) = agents.iter_mut().find(|a| a.address == host) else {
            continue;
        };
        let logs = match agent
            .client
            .log_tail(LogTailRequest {
                kind: LogKind::Rebalance as i32,
                max_bytes: 256 << 10,
                volume: name.into(),
            })
            .await
        {
            Ok(l) => l.into_inner(),
            Err(s) => {
                tracing::warn!(node = %agent.node, error = %s, "could not read the rebalance log");
                continue;
            }
        };
        let file = format!("{name}-rebalance.log");
        let errors: Vec<String> = logs
            .files
            .iter()
            // An agent older than the `volume` field answers with every volume's log.
            .filter(|f| f.path == file)
            .flat_map(|f| plan::migration_errors(&f.text, 3))
            .collect();
        if !errors.is_empty() {
            out.push_str(&format!(
                " Gluster's log on {host} ({file}): {}.",
                errors.join(" | ")
            ));
        }
    }
    out
}

/// Counts a run nodes lost track of (`note` says which) as a rerun and returns why it runs
/// again, or, once the runs are used up, fails the resize saying so (`tail` ends the
/// message) and returns none.
fn rerun_lost(note: String, r: &mut ResizeStatus, tail: &str) -> Option<String> {
    if !plan::rerun(1, r.reruns) {
        r.phase = MigrationPhase::Failed;
        r.message = Some(format!(
            "{note}; that was run {} of {}{tail}",
            r.reruns + 1,
            plan::MIGRATION_RUNS
        ));
        return None;
    }
    r.reruns += 1;
    Some(note)
}

/// Keeps the time gluster's counts last changed and, once they have stayed still for the
/// operator's migration stall time, says so in the status (the Progressing condition) and
/// in a Warning event. Nothing is stopped: gluster gives up a request it never answers
/// after the frame timeout and counts the file as failed, and the run is then repeated
/// like any run with failures; a large file may simply still be copying.
async fn report_stall(
    ctx: &Context,
    gv: &GlusterVolume,
    before: &ResizeStatus,
    r: &mut ResizeStatus,
) {
    let limit = ctx.config.migration_stall;
    let Some(still) = plan::stalled(Some(before), r, Timestamp::now(), limit) else {
        return;
    };
    let what = match r.operation {
        ResizeOperation::Expand => "the rebalance",
        ResizeOperation::Shrink => "moving data off the bricks being removed",
    };
    let advice = "A large file counts only once it is copied; a request gluster never \
                  answers is given up after the volume's network.frame-timeout (1800 s by \
                  default), counted as a failed file, and the run is repeated. The rebalance \
                  log under /var/log/glusterfs on the nodes still in progress names the file";
    let note = format!(
        "gluster's counts for {what} have not changed for {} s or more. {advice}",
        limit.as_secs()
    );
    tracing::warn!(volume = %gv.name_any(), stalled_for = ?still, "{note}");
    events::publish(
        ctx,
        gv,
        events::event(true, "MigrationStalled", "Reconcile", &note),
    )
    .await;
    let per_node = r.message.take().unwrap_or_default();
    r.message = Some(format!(
        "stalled: no change for {} s. {advice}. Per node: {per_node}",
        still.as_secs()
    ));
}

fn append(r: &mut ResizeStatus, why: &str) {
    if let Some(m) = r.message.as_mut().filter(|_| !why.is_empty()) {
        m.push('.');
        m.push_str(why);
    }
}

/// A shrink that would not fit: what the removed bricks may hold against the room left on
/// the others (a tenth of it kept spare).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the bricks being removed hold up to {} and the remaining bricks have {} free (keeping a \
     tenth spare); add space or keep the bricks",
    human_bytes(*.moving),
    human_bytes(*.room)
)]
struct DoesNotFit {
    moving: u64,
    room: u64,
}

/// Whether the data on the bricks being removed fits in the free space of the rest; Err
/// says how much does not.
fn fits(
    vol: &AgentVolume,
    st: &gk_agent_proto::v1::VolumeStatusResponse,
    removed: &[Brick],
) -> Result<(), DoesNotFit> {
    let layout = layout_of(vol);
    let set = layout.set_size() as usize;
    let data = u64::from(layout.data_bricks());
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
        return Err(DoesNotFit { moving, room });
    }
    Ok(())
}

async fn shrink(
    ctx: &Context,
    gv: &GlusterVolume,
    agents: &mut [NodeAgent],
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
    let anchor = &mut agents[0];
    let st = run_status(
        anchor.client.remove_brick_status(req.clone()).await,
        &anchor.node,
    )?;
    let before = r.clone();
    // A start recorded and never taken by gluster: the old run's result is not read again.
    let verdict = match runs::unstarted(r, &st) {
        true => Migration::Start,
        false => progress(r, &st, &anchor.address),
    };
    match verdict {
        Migration::Start => {
            if let Err(why) = safety::check(anchor, vol).await {
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
            r.run_started_at = Some(Time(Timestamp::now()));
            r.run_replaces = runs::task(&st);
            save(ctx, gv, r, retired).await?;
            settle::lookups_everywhere(anchor, &name).await?;
            tracing::info!(volume = %name, bricks = ?r.bricks, "starting remove-brick");
            match anchor.client.remove_brick_start(req).await {
                Ok(st) => {
                    let st = st.into_inner();
                    runs::unstarted(r, &st);
                    progress(r, &st, &anchor.address);
                    r.phase = MigrationPhase::InProgress;
                    plan::stalled(None, r, Timestamp::now(), ctx.config.migration_stall);
                }
                Err(s) if s.code() == Code::FailedPrecondition => {
                    r.phase = MigrationPhase::Refused;
                    r.message = Some(format!("gluster refused remove-brick: {}", s.message()));
                }
                Err(s) => return Err(Error::agent(&anchor.node, s)),
            }
        }
        Migration::Running => {
            let Some(lost) = runs::lost(&st, &anchor.address, r) else {
                r.phase = MigrationPhase::InProgress;
                report_stall(ctx, gv, &before, r).await;
                return Ok(());
            };
            let Some(note) = rerun_lost(lost, r, ", not committed") else {
                return Ok(());
            };
            // Started again by the next reconcile, after the same checks as the first.
            anchor
                .client
                .remove_brick_stop(req)
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            r.phase = MigrationPhase::Pending;
            runs::warn(ctx, gv, &name, "MigrationLost", &note).await;
            r.message = Some(note);
            save(ctx, gv, r, retired).await?;
        }
        Migration::Failed(_) => {
            let why = failed_files(agents, &name, &st).await;
            if !plan::rerun(plan::unmoved(&st.status, r.failures as u64), r.reruns) {
                r.phase = MigrationPhase::Failed;
                append(r, &why);
                return Ok(());
            }
            // Gluster starts a remove-brick again only once the last one is stopped; the
            // files it moved stay where they went, and the next reconcile starts it anew.
            let anchor = &mut agents[0];
            anchor
                .client
                .remove_brick_stop(req)
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            r.reruns += 1;
            r.phase = MigrationPhase::Pending;
            let note = format!(
                "run {} of {} left {} files on {}, not committed;{why} Stopped it to start it \
                 again",
                r.reruns,
                plan::MIGRATION_RUNS,
                r.failures,
                r.bricks.join(" ")
            );
            runs::warn(ctx, gv, &name, "MigrationRerun", &note).await;
            r.message = Some(note);
            save(ctx, gv, r, retired).await?;
        }
        Migration::Done => {
            tracing::info!(volume = %name, bricks = ?r.bricks, "committing remove-brick");
            let anchor = &mut agents[0];
            anchor
                .client
                .remove_brick_commit(req)
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            retired.extend(r.bricks.iter().cloned());
            r.phase = MigrationPhase::Completed;
            let note = format!(
                "every file moved off {}; removed them from the volume (their directories \
                 are kept on their nodes)",
                r.bricks.join(" ")
            );
            events::publish(
                ctx,
                gv,
                events::event(false, "BricksRemoved", "Reconcile", &note),
            )
            .await;
            // Files moved between the remaining sets settle as after an expansion; a single
            // set holds every file where gluster looks first.
            let set = layout_of(vol).set_size() as usize;
            if vol.bricks.len().saturating_sub(r.bricks.len()) / set.max(1) > 1 {
                settle::begin(ctx, gv, agents, &name, r).await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_sums_nodes_and_names_the_local_one() {
        let node = |host: &str, files, failures| gk_agent_proto::v1::RebalanceNode {
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
            task_id: String::new(),
        };
        let mut r = super::super::status::tests::resize(
            ResizeOperation::Expand,
            MigrationPhase::InProgress,
        );
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
        let brick = |b: &str, total: u64, free: u64| gk_agent_proto::v1::BrickStatus {
            brick: b.into(),
            online: true,
            size_total_bytes: total,
            size_free_bytes: free,
            ..Default::default()
        };
        let removed = parse_bricks(&vol.bricks[2..]);
        let roomy = gk_agent_proto::v1::VolumeStatusResponse {
            bricks: vec![
                brick("h1:/b/0", 100, 80),
                brick("h2:/b/1", 100, 90),
                brick("h1:/b/2", 100, 50),
                brick("h2:/b/3", 100, 60),
            ],
            ..Default::default()
        };
        assert!(fits(&vol, &roomy, &removed).is_ok());
        let tight = gk_agent_proto::v1::VolumeStatusResponse {
            bricks: vec![
                brick("h1:/b/0", 100, 30),
                brick("h2:/b/1", 100, 90),
                brick("h1:/b/2", 100, 50),
                brick("h2:/b/3", 100, 60),
            ],
            ..Default::default()
        };
        let e = fits(&vol, &tight, &removed).unwrap_err().to_string();
        assert!(e.contains("hold up to 50") && e.contains("30 free"), "{e}");
    }
}
