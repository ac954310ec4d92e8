//! What day-two steps carry from one reconcile to the next: the resize under way and the
//! bricks that left the volume, recorded in status before gluster is asked to act.

use gk_agent_proto::v1::RebalanceStatusResponse;
use gk_api::crd::{GlusterVolume, GlusterVolumeStatus, ResizeStatus};
use gk_gluster::Brick;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;
use tonic::Code;

use crate::context::Context;
use crate::{plan, Error};

/// What the day-two step leaves for status.
#[derive(Debug, Default)]
pub struct Day2 {
    pub resize: Option<ResizeStatus>,
    pub retired: Vec<String>,
    /// A replacement or resize that cannot go on, and why (reason, message).
    pub blocked: Option<(&'static str, String)>,
}

/// Gluster's status of a migration run, its overall word as [`plan::overall`] reads it.
/// Gluster answers a status query for a migration that never ran with an error ("Rebalance
/// not started for volume v.", "remove-brick not started ..."): that is the status "not
/// started", not a failure.
pub fn run_status(
    answer: Result<tonic::Response<RebalanceStatusResponse>, tonic::Status>,
    node: &str,
) -> Result<RebalanceStatusResponse, Error> {
    match answer {
        Ok(r) => {
            let mut r = r.into_inner();
            let overall = plan::overall(&r.status, r.nodes.iter().map(|n| n.status.as_str()));
            r.status = overall.to_string();
            Ok(r)
        }
        Err(s) if s.code() == Code::FailedPrecondition && s.message().contains("not started") => {
            Ok(RebalanceStatusResponse {
                status: "not started".into(),
                nodes: Vec::new(),
                task_id: String::new(),
            })
        }
        Err(s) => Err(Error::agent(node, s)),
    }
}

/// The volume's status as the apiserver holds it now. The controller's cache can still
/// hold the status from before the last reconcile's write, and a step of a migration must
/// not be taken twice (a finished check run read again as the end of the first run loses
/// the first run's counts and starts the checks anew). The case seen had another cause, a
/// reconcile that failed after a start and before writing status, which [`record`] closes;
/// a lagging cache would do the same.
pub async fn fresh(ctx: &Context, gv: &GlusterVolume) -> Result<GlusterVolumeStatus, Error> {
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    Ok(api.get(&gv.name_any()).await?.status.unwrap_or_default())
}

pub fn parse_bricks(list: &[String]) -> Vec<Brick> {
    list.iter().filter_map(|b| Brick::parse(b).ok()).collect()
}

/// Records a step before gluster is asked to take it, so an operator restarted in between
/// still knows a migration is owed (a rebalance after add-brick, say).
pub async fn save(
    ctx: &Context,
    gv: &GlusterVolume,
    resize: &ResizeStatus,
    retired: &[String],
) -> Result<(), Error> {
    patch(
        ctx,
        gv,
        json!({"status": {"resize": resize, "retiredBricks": retired}}),
    )
    .await
}

/// Records a run before gluster is asked to start it (its start time, which run it is): a
/// start whose answer is lost, or a reconcile that fails after it, must not leave the next
/// reconcile reading the new run as the end of the last one (seen: a check run's result
/// taken for the first run's, whose counts were lost).
pub async fn record(ctx: &Context, gv: &GlusterVolume, resize: &ResizeStatus) -> Result<(), Error> {
    patch(ctx, gv, json!({"status": {"resize": resize}})).await
}

async fn patch(ctx: &Context, gv: &GlusterVolume, patch: serde_json::Value) -> Result<(), Error> {
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    api.patch_status(
        &gv.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}
