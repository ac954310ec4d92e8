//! Settling a migration (see [`plan::settle`]): lookups search every set before gluster
//! moves a file, and once every file has moved, check runs (rebalance again) repeat until
//! one moves nothing. Only then is the resize Completed, and lookups optimised again.

use gk_agent_proto::v1::{RebalanceStatusResponse, VolumeSetRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterVolume, MigrationPhase, ResizeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::runs::{self, totals};
use super::state;
use crate::context::Context;
use crate::plan::{self, Check, Migration};
use crate::{Error, Waiting};

/// Makes lookups of volume `name` search every set (`cluster.lookup-optimize off`) before
/// gluster starts moving files, so none can vanish from clients while they move.
pub async fn lookups_everywhere(anchor: &mut NodeAgent, name: &str) -> Result<(), Error> {
    let set = anchor
        .client
        .volume_set(VolumeSetRequest {
            name: name.into(),
            options: [(plan::LOOKUP_OPTIMIZE.to_string(), "off".to_string())].into(),
        })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner();
    if let Some(r) = set.rejected.first() {
        return Err(Waiting::LookupsNotWide {
            key: r.key.clone(),
            volume: name.to_string(),
            reason: r.reason.clone(),
        }
        .into());
    }
    Ok(())
}

/// Enters the check runs of a resize whose files have all moved.
pub async fn begin(
    ctx: &Context,
    gv: &GlusterVolume,
    agents: &mut [NodeAgent],
    name: &str,
    r: &mut ResizeStatus,
) -> Result<(), Error> {
    r.phase = MigrationPhase::Verifying;
    r.checks = 0;
    run(ctx, gv, agents, name, r).await
}

/// Starts the next check run, or reads the one under way and says what follows.
pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    agents: &mut [NodeAgent],
    name: &str,
    r: &mut ResizeStatus,
) -> Result<(), Error> {
    let anchor = &mut agents[0];
    let st = runs::rebalance_status(anchor, name).await?;
    if r.checks == 0 {
        r.checks = 1;
        return start(ctx, gv, anchor, name, r, &st).await;
    }
    // A check run recorded and never taken by gluster: the run before it is not counted
    // again; the same check starts.
    if runs::unstarted(r, &st) {
        return start(ctx, gv, anchor, name, r, &st).await;
    }
    let (moved, bytes, failures, skipped, per_node) = totals(&st, &anchor.address);
    match plan::migration(&st.status, failures as u64, skipped as u64, false) {
        Migration::Running => {
            let Some(note) = runs::lost(&st, &anchor.address, r) else {
                r.message = Some(format!(
                    "check run {} of {}: {per_node}",
                    r.checks,
                    plan::CHECK_RUNS
                ));
                return Ok(());
            };
            if r.checks >= plan::CHECK_RUNS {
                r.phase = MigrationPhase::Failed;
                r.message = Some(format!(
                    "{note}; that was check run {} of {}. Lookups keep searching every set, \
                     so every file stays readable; set the brick count again to run the \
                     migration anew",
                    r.checks,
                    plan::CHECK_RUNS
                ));
                return Ok(());
            }
            runs::stop_rebalance(anchor, name).await?;
            runs::warn(ctx, gv, name, "MigrationLost", &note).await;
            r.checks += 1;
        }
        // Gluster forgot the run (a glusterd restarted): it starts again.
        Migration::Start => {}
        Migration::Done | Migration::Failed(_) => {
            // A run that failed or was stopped as a whole settles nothing.
            let failures = plan::unmoved(&st.status, failures as u64);
            r.files_moved += moved;
            r.bytes_moved += bytes;
            match plan::after_check(moved as u64, failures, skipped as u64, r.checks) {
                Check::Settled => {
                    r.phase = MigrationPhase::Completed;
                    r.message = Some(format!(
                        "check run {} moved nothing: every file sits on the set gluster \
                         looks it up on first. Per node: {per_node}",
                        r.checks
                    ));
                    return Ok(());
                }
                Check::Unsettled(why) => {
                    r.phase = MigrationPhase::Failed;
                    r.failures = failures as i64;
                    r.skipped = skipped;
                    r.message = Some(format!("{why}. Per node: {per_node}"));
                    runs::warn(ctx, gv, name, "MigrationUnsettled", &why).await;
                    return Ok(());
                }
                Check::Again => {
                    let note = format!(
                        "check run {} of {} moved {moved} files ({failures} failed, {skipped} \
                         skipped) that gluster's rebalance processes had left off the set \
                         their names hash to; running another",
                        r.checks,
                        plan::CHECK_RUNS
                    );
                    runs::warn(ctx, gv, name, "MigrationCheckMoved", &note).await;
                    r.checks += 1;
                }
            }
        }
    }
    start(ctx, gv, anchor, name, r, &st).await
}

/// Starts check run `r.checks`, recorded first with the run gluster reports now (`last`).
async fn start(
    ctx: &Context,
    gv: &GlusterVolume,
    anchor: &mut NodeAgent,
    name: &str,
    r: &mut ResizeStatus,
    last: &RebalanceStatusResponse,
) -> Result<(), Error> {
    tracing::info!(volume = %name, check = r.checks, "starting a check run");
    r.run_started_at = Some(Time(Timestamp::now()));
    r.run_replaces = runs::task(last);
    r.message = Some(format!(
        "check run {} of {} started: a rebalance that moves files still off the set gluster \
         looks them up on first",
        r.checks,
        plan::CHECK_RUNS
    ));
    state::record(ctx, gv, r).await?;
    let started = runs::start_rebalance(anchor, name).await?;
    runs::unstarted(r, &started);
    Ok(())
}
