//! Creating the gluster volume of a GlusterVolume, once: bricks planned on the nodes whose
//! agents answer, access control and the profile's options set before the bricks first
//! start, then started.

use gk_agent_proto::v1::{
    BrickReleaseRequest, VolumeCreateRequest, VolumeSpec as AgentSpec, VolumeType as AgentType,
};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume, VolumeType};
use gk_gluster::VolumeLayout;

use super::record::set_status;
use super::status;
use crate::context::Context;
use crate::plan::{self, NodeSlot};
use crate::Error;

fn agent_type(t: VolumeType) -> AgentType {
    match t {
        VolumeType::Distribute => AgentType::Distribute,
        VolumeType::Replicate => AgentType::Replicate,
        VolumeType::Arbiter => AgentType::Arbiter,
        VolumeType::Disperse => AgentType::Disperse,
    }
}

/// Creates and starts gluster volume `name` through the first agent. A spec that cannot be
/// placed is InvalidSpec; a create gluster refuses is reported and retried.
pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    name: &str,
    agents: &mut [NodeAgent],
    access: &[(String, String)],
) -> Result<(), Error> {
    let keep = gv.status.clone().unwrap_or_default();
    let zones = super::lookup::zones_of(gc);
    let slots: Vec<NodeSlot> = agents.iter().map(|a| NodeSlot::of(a, &zones)).collect();
    let planned = match plan::bricks(&gv.spec, name, &slots) {
        Ok(b) => b,
        Err(e) => {
            let mut d = status::invalid_spec(e.to_string());
            d.push(crate::conditions::Desired::new(
                "Degraded",
                false,
                "NotCreated",
                "",
            ));
            set_status(ctx, gv, keep, &d).await?;
            return Err(e.into());
        }
    };
    let layout = plan::layout(&gv.spec)?;
    let (replica, data, redundancy) = match layout {
        VolumeLayout::Replicate { replica } => (replica, 0, 0),
        VolumeLayout::Disperse { data, redundancy } => (0, data, redundancy),
        _ => (0, 0, 0),
    };
    tracing::info!(volume = %name, bricks = planned.len(), "creating gluster volume");
    set_status(
        ctx,
        gv,
        keep.clone(),
        &status::waiting("Creating", format!("creating gluster volume {name}")),
    )
    .await?;
    let spec = AgentSpec {
        name: name.to_string(),
        r#type: agent_type(gv.spec.volume_type) as i32,
        replica,
        disperse_data: data,
        disperse_redundancy: redundancy,
        bricks: planned.iter().map(|b| b.to_string()).collect(),
        options: plan::options_at_create(plan::profile_of(&gv.spec, &gc.spec), layout, access)
            .into_iter()
            .collect(),
        force: false,
    };
    let anchor = &mut agents[0];
    if let Err(s) = anchor
        .client
        .volume_create(VolumeCreateRequest {
            spec: Some(spec),
            start: true,
        })
        .await
    {
        let e = Error::agent(&anchor.node, s);
        release_leftovers(agents, &planned).await;
        set_status(
            ctx,
            gv,
            keep,
            &status::waiting("CreateFailed", e.to_string()),
        )
        .await?;
        return Err(e);
    }
    Ok(())
}

/// glusterd marks the new brick directories on every peer while it stages a create; one
/// that then fails on another peer (a peer not connected for a moment, say) leaves them
/// marked, and every retry would fail with "already part of a volume". Each node's agent
/// releases what is only such a mark (an empty directory of a volume that does not exist);
/// anything holding data is kept. Failures are only logged: the retry reports its own.
async fn release_leftovers(agents: &mut [NodeAgent], planned: &[gk_gluster::Brick]) {
    for b in planned {
        let Some(a) = agents.iter_mut().find(|a| a.address == b.host) else {
            continue;
        };
        let req = BrickReleaseRequest {
            path: b.path.clone(),
            only_if_empty: true,
        };
        match a.client.brick_release(req).await {
            Ok(r) if r.get_ref().released => {
                tracing::info!(node = %a.node, brick = %b.path, "released a brick directory a failed create left")
            }
            Ok(_) => {}
            Err(s) => {
                tracing::warn!(node = %a.node, brick = %b.path, error = %s.message(), "releasing a failed create's brick directory")
            }
        }
    }
}
