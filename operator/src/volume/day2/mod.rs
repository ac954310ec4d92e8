//! Day-two changes to an existing gluster volume, each in its own file: bricks replaced
//! (`replace`, from the GlusterCluster's spec.replacements), then the brick count raised or
//! lowered (`resize`), whose migrations are settled by check runs (`settle`); both read and
//! steer gluster's runs through `runs`. `status` says what they mean for the volume's
//! conditions.

pub mod replace;
pub mod resize;
pub mod runs;
pub mod settle;
pub mod state;
pub mod status;

use gk_agent_proto::v1::Volume as AgentVolume;
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume, GlusterVolumeStatus};

pub use state::Day2;

use crate::context::Context;
use crate::Error;

/// Runs replacements, then resizing, on the existing volume `vol`.
pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    keep: &GlusterVolumeStatus,
) -> Result<Day2, Error> {
    let fresh;
    let keep = if crate::plan::migrating(keep.resize.as_ref()) {
        fresh = state::fresh(ctx, gv).await?;
        &fresh
    } else {
        keep
    };
    let mut out = Day2 {
        resize: keep.resize.clone(),
        retired: keep.retired_bricks.clone(),
        blocked: None,
    };
    if replace::run(ctx, gv, gc, agents, vol, &mut out).await? {
        // The volume changed under us; resizing waits for the next round and the heal.
        return Ok(out);
    }
    // spec.size is weighed against every node's size; with a node missing, the smaller
    // cluster could read as a shrink, so nothing is resized until all answer.
    let all_answer = gc.spec.nodes.len() <= agents.len();
    if out.blocked.is_none() && (all_answer || gv.spec.size.is_none()) {
        resize::run(ctx, gv, gc, agents, vol, keep, &mut out).await?;
    }
    Ok(out)
}
