//! Settling a migration (see [`plan::settle`]): lookups search every set before gluster
//! moves a file, and once every file has moved, check runs (rebalance again) repeat until
//! one moves nothing. Only then is the resize Completed, and lookups optimised again.

use gk_agent::proto::{VolumeRequest, VolumeSetRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterVolume, MigrationPhase, ResizeStatus};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::resize::{lost_nodes, lost_note, publish_lost, stop_rebalance, totals};
use super::state::not_started;
use crate::context::Context;
use crate::plan::{self, Check, Migration};
use crate::{events, Error};

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
        return Err(Error::NotReady(format!(
            "gluster refused {}=off on volume {name} ({}); no files are moved until lookups \
             search every set",
            r.key, r.reason
        )));
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
    let req = || VolumeRequest { name: name.into() };
    let anchor = &mut agents[0];
    if r.checks > 0 {
        let st = not_started(anchor.client.rebalance_status(req()).await, &anchor.node)?;
        let (moved, bytes, failures, skipped, per_node) = totals(&st, &anchor.address);
        let verdict = plan::migration(&st.status, failures as u64, skipped as u64, false);
        let failures = match verdict {
            Migration::Running => {
                let lost = lost_nodes(&st, &anchor.address, r);
                if lost.is_empty() {
                    r.message = Some(format!(
                        "check run {} of {}: {per_node}",
                        r.checks,
                        plan::CHECK_RUNS
                    ));
                    return Ok(());
                }
                let note = lost_note(&lost, r);
                if r.checks >= plan::CHECK_RUNS {
                    r.phase = MigrationPhase::Failed;
                    r.message = Some(format!(
                        "{note}; that was check run {} of {}. Lookups keep searching every \
                         set, so every file stays readable; set the brick count again to run \
                         the migration anew",
                        r.checks,
                        plan::CHECK_RUNS
                    ));
                    return Ok(());
                }
                stop_rebalance(anchor, name).await?;
                publish_lost(ctx, gv, name, &note).await;
                r.checks += 1;
                None
            }
            // Gluster forgot the run (a glusterd restarted): it starts again below.
            Migration::Start => None,
            // A run that failed or was stopped as a whole settles nothing.
            Migration::Failed(_) if st.status != "completed" => Some(failures.max(1)),
            Migration::Failed(_) | Migration::Done => Some(failures),
        };
        if let Some(failures) = failures {
            r.files_moved += moved;
            r.bytes_moved += bytes;
            let check = plan::after_check(moved as u64, failures as u64, skipped as u64, r.checks);
            match check {
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
                    r.failures = failures;
                    r.skipped = skipped;
                    r.message = Some(format!("{why}. Per node: {per_node}"));
                    events::publish(
                        ctx,
                        gv,
                        events::event(true, "MigrationUnsettled", "Reconcile", &why),
                    )
                    .await;
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
                    tracing::warn!(volume = %name, "{note}");
                    events::publish(
                        ctx,
                        gv,
                        events::event(true, "MigrationCheckMoved", "Reconcile", &note),
                    )
                    .await;
                    r.checks += 1;
                }
            }
        }
    } else {
        r.checks = 1;
    }
    tracing::info!(volume = %name, check = r.checks, "starting a check run");
    let anchor = &mut agents[0];
    anchor
        .client
        .rebalance_start(req())
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?;
    r.run_started_at = Some(Time(Timestamp::now()));
    r.message = Some(format!(
        "check run {} of {} started: a rebalance that moves files still off the set gluster \
         looks them up on first",
        r.checks,
        plan::CHECK_RUNS
    ));
    Ok(())
}
