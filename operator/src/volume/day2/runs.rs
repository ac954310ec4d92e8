//! A gluster migration run as the day-two steps read and steer it: its counts summed over
//! nodes, the nodes that lost track of it, and stopping it. Resizing and settling both use
//! these; neither owns them.

use gk_agent_proto::v1::{RebalanceNode, RebalanceStatusResponse, VolumeRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterVolume, ResizeStatus};
use k8s_openapi::jiff::Timestamp;

use super::state::run_status;
use crate::context::Context;
use crate::{events, plan, Error};

/// A node of gluster's answer by its pool address: gluster calls the node it was asked on
/// (`local`) `localhost`.
pub fn host<'a>(n: &'a RebalanceNode, local: &'a str) -> &'a str {
    if n.host == "localhost" {
        local
    } else {
        &n.host
    }
}

/// Sums over nodes and gluster's words per node, named by pool address.
pub fn totals(r: &RebalanceStatusResponse, local: &str) -> (i64, i64, i64, i64, String) {
    let sum = |f: fn(&RebalanceNode) -> u64| r.nodes.iter().map(f).sum::<u64>() as i64;
    let per_node = r
        .nodes
        .iter()
        .map(|n| {
            format!(
                "{}: {} ({} files, {} failures, {} skipped)",
                host(n, local),
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

/// Why the run is to be stopped and started again, when gluster reports nodes in progress
/// whose run stopped (see [`plan::lost`]); nodes are named by pool address.
pub fn lost(st: &RebalanceStatusResponse, local: &str, r: &ResizeStatus) -> Option<String> {
    let nodes = st
        .nodes
        .iter()
        .map(|n| (host(n, local), n.status.as_str(), n.run_time_secs));
    plan::lost(nodes, r.run_started_at.as_ref(), Timestamp::now())
}

/// Gluster's id of the run `st` reports; None when it gives none.
pub fn task(st: &RebalanceStatusResponse) -> Option<String> {
    Some(st.task_id.trim())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// Whether the run recorded as started (see [`ResizeStatus::run_replaces`]) never reached
/// gluster: gluster still reports the run it was to replace, whose result was counted
/// already. Once gluster reports another run (or none), the old one is forgotten.
pub fn unstarted(r: &mut ResizeStatus, st: &RebalanceStatusResponse) -> bool {
    match (&r.run_replaces, task(st)) {
        (Some(old), Some(now)) if *old == now => true,
        (Some(_), _) => {
            r.run_replaces = None;
            false
        }
        (None, _) => false,
    }
}

/// Gluster's status of volume `name`'s rebalance run (see [`run_status`]).
pub async fn rebalance_status(
    anchor: &mut NodeAgent,
    name: &str,
) -> Result<RebalanceStatusResponse, Error> {
    let answer = anchor
        .client
        .rebalance_status(VolumeRequest { name: name.into() })
        .await;
    run_status(answer, &anchor.node)
}

/// Starts a rebalance run of volume `name` (one already running counts as started), with
/// gluster's status of it, which may still show the last run's end.
pub async fn start_rebalance(
    anchor: &mut NodeAgent,
    name: &str,
) -> Result<RebalanceStatusResponse, Error> {
    Ok(anchor
        .client
        .rebalance_start(VolumeRequest { name: name.into() })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner())
}

/// Ends volume `name`'s rebalance run; gluster forgets it and a new start may follow.
pub async fn stop_rebalance(anchor: &mut NodeAgent, name: &str) -> Result<(), Error> {
    anchor
        .client
        .rebalance_stop(VolumeRequest { name: name.into() })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?;
    Ok(())
}

/// Says `note` in the operator's log and in a Warning event with `reason` on the volume:
/// how a run started again, another run owed, or a migration given up is told.
pub async fn warn(ctx: &Context, gv: &GlusterVolume, name: &str, reason: &str, note: &str) {
    tracing::warn!(volume = %name, "{note}");
    events::publish(ctx, gv, events::event(true, reason, "Reconcile", note)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_api::crd::{MigrationPhase, ResizeOperation};

    fn status(task_id: &str) -> RebalanceStatusResponse {
        RebalanceStatusResponse {
            status: "completed".into(),
            nodes: Vec::new(),
            task_id: task_id.into(),
        }
    }

    #[test]
    fn a_start_that_never_reached_gluster_is_told_by_the_old_runs_id() {
        let mut r = crate::volume::day2::status::tests::resize(
            ResizeOperation::Expand,
            MigrationPhase::InProgress,
        );
        // Nothing recorded: every answer is the run's own.
        assert!(!unstarted(&mut r, &status("a")));
        r.run_replaces = Some("a".into());
        // Gluster still reports run a: the start recorded after it never reached gluster,
        // and asking again changes nothing.
        assert!(unstarted(&mut r, &status("a")));
        assert!(unstarted(&mut r, &status(" a ")));
        assert_eq!(r.run_replaces.as_deref(), Some("a"));
        // Run b is the new one: a is forgotten, and b's answers count from now on.
        assert!(!unstarted(&mut r, &status("b")));
        assert_eq!(r.run_replaces, None);
        assert!(!unstarted(&mut r, &status("a")));
        // Gluster reporting no run (a glusterd that restarted) is not the old run either.
        r.run_replaces = Some("a".into());
        assert!(!unstarted(&mut r, &status("")));
        assert_eq!(r.run_replaces, None);
        assert_eq!(task(&status("")), None);
    }
}
