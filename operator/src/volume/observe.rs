//! Reading an existing volume's bricks, heal and capacity from gluster, writing status (see
//! `status`), and acting on what it says: brick processes that died on nodes whose agent
//! answers are started again, pending heals are kicked.

use std::collections::BTreeMap;
use std::time::Duration;

use gk_agent::proto::{RejectedOption, VolumeRequest, VolumeStartRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::day2::Day2;
use super::lookup::info;
use super::record::set_status;
use super::status::{self, Next};
use crate::context::Context;
use crate::Error;

pub async fn run(
    gv: &GlusterVolume,
    ctx: &Context,
    gc: &GlusterCluster,
    name: &str,
    agents: &mut [NodeAgent],
    rejected: &[RejectedOption],
    day2: Day2,
) -> Result<Action, Error> {
    let anchor = &mut agents[0];
    let vol = info(anchor, name)
        .await?
        .ok_or_else(|| Error::NotReady(format!("volume {name} vanished")))?;
    let req = || VolumeRequest { name: name.into() };
    let st = anchor
        .client
        .volume_status(req())
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner();
    let heal = if crate::plan::layout_of(&vol).set_size() > 1 {
        anchor
            .client
            .heal_info(req())
            .await
            .ok()
            .map(|r| r.into_inner())
    } else {
        None
    };
    // Nodes whose agent is down are named from the cluster's last known peers.
    let mut nodes: BTreeMap<String, String> = gc
        .status
        .iter()
        .flat_map(|s| &s.peers)
        .map(|p| (p.address.clone(), p.node.clone()))
        .collect();
    nodes.extend(agents.iter().map(|a| (a.address.clone(), a.node.clone())));
    let live: Vec<String> = agents.iter().map(|a| a.address.clone()).collect();
    let outcome = status::compute(&status::Observed {
        name,
        volume: &vol,
        bricks: &st,
        heal: heal.as_ref(),
        nodes: &nodes,
        live: &live,
        tls: gc.spec.tls.enabled,
        day2: &day2,
        rejected,
    });

    let (ns, vname) = (gv.namespace().unwrap_or_default(), gv.name_any());
    let s = &outcome.status;
    let online = s.bricks.iter().filter(|b| b.online).count() as i64;
    ctx.metrics.volume(
        &ns,
        &vname,
        online,
        s.bricks.len() as i64,
        s.heal_pending.unwrap_or(0),
    );
    if let Some(c) = &s.capacity {
        ctx.metrics
            .capacity(&ns, &vname, c.total_bytes, c.used_bytes);
    }
    set_status(ctx, gv, outcome.status, &outcome.conditions).await?;

    let anchor = &mut agents[0];
    match outcome.next {
        Next::RestartBricks => {
            tracing::warn!(volume = %name, "restarting offline bricks");
            anchor
                .client
                .volume_start(VolumeStartRequest {
                    name: name.into(),
                    force: true,
                })
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            let _ = anchor.client.heal_start(req()).await;
            Ok(Action::requeue(Duration::from_secs(2)))
        }
        Next::Heal => {
            let _ = anchor.client.heal_start(req()).await;
            Ok(Action::requeue(Duration::from_secs(3)))
        }
        Next::Migrating => Ok(Action::requeue(Duration::from_secs(3))),
        Next::Refresh => Ok(Action::requeue(ctx.config.refresh)),
    }
}
