//! Reading an existing volume's bricks, heal and capacity from gluster, writing status (see
//! `status`), and acting on what it says: brick processes that died on nodes whose agent
//! answers are started again, pending heals are kicked.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::metrics::VolumeGauges;
use gk_agent_proto::v1::{HealthRequest, VolumeRequest, VolumeStartRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::day2::Day2;
use super::options::Applied;
use super::record::set_status;
use super::status::{self, Next};
use crate::context::Context;
use crate::Error;

/// How long gluster's brick status may take. glusterd asks every peer, and waits for one
/// that dropped off the network (no reset) until it gives the peer up, which takes minutes;
/// status must say Degraded long before.
const GLUSTER_WAIT: Duration = Duration::from_secs(15);
/// How long a reconcile waits for a heal count before going on with the last one.
const HEAL_WAIT: Duration = Duration::from_secs(10);
/// How long a brick agent may take to answer a health probe when gluster did not answer.
const PROBE_WAIT: Duration = Duration::from_secs(3);

/// Quota limits set by the agents that glusterd has not registered yet, over every agent
/// that answers in time (the CSI controller may have asked any of them). Run on a task of
/// its own after status is written, so that it never delays status.
fn count_quota_backlog(ctx: &Context, agents: &[NodeAgent], ns: &str, volume: &str, name: &str) {
    let clients: Vec<_> = agents.iter().map(|a| a.client.clone()).collect();
    let (metrics, ns, volume, name) = (
        ctx.metrics.clone(),
        ns.to_string(),
        volume.to_string(),
        name.to_string(),
    );
    tokio::spawn(async move {
        let pending = quota_backlog(clients, &name).await;
        metrics.quota_backlog(&ns, &volume, pending);
    });
}

async fn quota_backlog(
    clients: Vec<
        gk_agent_proto::v1::brick_agent_client::BrickAgentClient<tonic::transport::Channel>,
    >,
    name: &str,
) -> i64 {
    let asks = clients.into_iter().map(|mut client| {
        let req = VolumeRequest { name: name.into() };
        async move {
            match tokio::time::timeout(PROBE_WAIT, client.quota_backlog(req)).await {
                Ok(Ok(r)) => i64::from(r.into_inner().pending),
                _ => 0,
            }
        }
    });
    futures::future::join_all(asks).await.into_iter().sum()
}

/// `applied` holds the volume as gluster described it after its options were set.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    gv: &GlusterVolume,
    ctx: &Context,
    gc: &GlusterCluster,
    name: &str,
    agents: &mut [NodeAgent],
    applied: &Applied,
    day2: Day2,
    pv_quota: gk_api::crd::PvQuotaStatus,
) -> Result<Action, Error> {
    let (vol, rejected) = (&applied.volume, applied.rejected.as_slice());
    let anchor = &mut agents[0];
    let req = || VolumeRequest { name: name.into() };
    // A refusal counts as no answer: while one glusterd waits for a peer lost without a
    // reset, the next status of the volume is refused at once (its lock is held), and
    // status must still say Degraded from the agents that stopped answering.
    let (st, status_error) = match tokio::time::timeout(
        GLUSTER_WAIT,
        anchor.client.volume_status(req()),
    )
    .await
    {
        Ok(Ok(r)) => (Some(r.into_inner()), None),
        Ok(Err(s)) => {
            tracing::warn!(volume = %name, error = %s.message(), "gluster volume status failed");
            (None, Some(s.message().to_string()))
        }
        Err(_) => {
            tracing::warn!(volume = %name, "gluster volume status did not answer in time");
            (None, None)
        }
    };
    // Heal counts (see `heal`): skipped when gluster's status did not answer (a node is
    // lost, the count would wait for it); otherwise waited for a while, then the last count
    // stands in while this one goes on, unless a brick was offline since (then none does).
    let whole = st
        .as_ref()
        .is_some_and(|s| s.bricks.len() == vol.bricks.len() && s.bricks.iter().all(|b| b.online));
    if !whole {
        ctx.heals.clear_last(name);
    }
    let heal = if st.is_some() && crate::plan::layout_of(vol).set_size() > 1 {
        let mut client = anchor.client.clone();
        let volume = name.to_string();
        // The daemons' index count (HealCount) is cheap but is a glusterd transaction that
        // holds the volume's lock until every self-heal daemon answers; it is asked only of a
        // whole volume whose daemons all run. Otherwise (just started, a brick or daemon
        // down) the summary, a glfsheal client that takes no glusterd lock.
        let counted = whole && st.as_ref().is_some_and(|s| s.self_heal_daemons_online);
        ctx.heals
            .get(name, HEAL_WAIT, move || async move {
                let req = VolumeRequest { name: volume };
                let asked = if counted {
                    client.heal_count(req).await
                } else {
                    client.heal_info(req).await
                };
                asked.ok().map(|r| r.into_inner())
            })
            .await
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
    let mut live: Vec<String> = Vec::new();
    for a in agents.iter_mut() {
        // Gluster did not answer: the agents that answered at the start of this reconcile
        // may have dropped off since, so they are asked again.
        let answers = st.is_some()
            || tokio::time::timeout(PROBE_WAIT, a.client.health(HealthRequest {}))
                .await
                .is_ok_and(|r| r.is_ok());
        if answers {
            live.push(a.address.clone());
        }
    }
    let previous = gv.status.clone().unwrap_or_default();
    let mut outcome = status::compute(&status::Observed {
        name,
        volume: vol,
        bricks: st.as_ref(),
        status_error: status_error.as_deref(),
        previous: &previous,
        heal: heal.as_ref(),
        nodes: &nodes,
        zones: &super::lookup::zones_of(gc),
        live: &live,
        tls: gc.spec.tls.enabled,
        day2: &day2,
        rejected,
    });

    outcome.status.pv_quota = Some(pv_quota);
    let (ns, vname) = (gv.namespace().unwrap_or_default(), gv.name_any());
    let s = &outcome.status;
    let gauges = VolumeGauges {
        bricks_online: s.bricks.iter().filter(|b| b.online).count() as i64,
        bricks: s.bricks.len() as i64,
        heal_pending: s.heal_pending.unwrap_or(0),
        split_brain: s.split_brain.unwrap_or(0),
        migration_stalled: s.resize.as_ref().is_some_and(|r| {
            crate::plan::migration::stalled_since(r, Timestamp::now(), ctx.config.migration_stall)
        }) as i64,
    };
    if let Some(c) = &s.capacity {
        ctx.metrics
            .capacity(&ns, &vname, c.total_bytes, c.used_bytes);
    }
    let restart_on = status::restart_on(&outcome.status.bricks, &live);
    // The gauges first: once the status says so (stalled, degraded), the scrape does too.
    ctx.metrics.volume(&ns, &vname, &gauges);
    set_status(ctx, gv, outcome.status, &outcome.conditions).await?;
    count_quota_backlog(ctx, agents, &ns, &vname, name);

    match outcome.next {
        Next::RestartBricks => {
            tracing::warn!(volume = %name, nodes = ?restart_on, "restarting offline bricks");
            // Each node holding an offline brick starts it, having killed its hung brick
            // processes; with none known (a peer that missed the start), the anchor does.
            let force = || VolumeStartRequest {
                name: name.into(),
                force: true,
            };
            let mut on: Vec<usize> = (0..agents.len())
                .filter(|&i| restart_on.contains(&agents[i].address))
                .collect();
            if on.is_empty() {
                on.push(0);
            }
            for i in on {
                let a = &mut agents[i];
                a.client
                    .volume_start(force())
                    .await
                    .map_err(|s| Error::agent(&a.node, s))?;
            }
            let anchor = &mut agents[0];
            let _ = anchor.client.heal_start(req()).await;
            Ok(Action::requeue(Duration::from_secs(2)))
        }
        Next::Heal => {
            let _ = agents[0].client.heal_start(req()).await;
            Ok(Action::requeue(Duration::from_secs(3)))
        }
        Next::Migrating => Ok(Action::requeue(Duration::from_secs(3))),
        Next::Refresh => Ok(Action::requeue(ctx.config.refresh)),
    }
}
