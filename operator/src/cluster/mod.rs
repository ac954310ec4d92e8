//! GlusterCluster: brick StatefulSets pinned to nodes, a headless Service, a
//! PodDisruptionBudget and the agent PKI; then the trusted pool, formed through the agents.
//!
//! One reconcile runs these stages in order, each in its own file:
//! `resources` (Kubernetes objects) → `pool` (trusted pool) → `rollout` (restarting brick
//! pods for a new template) → `retire` (nodes removed from the spec leave) → `status` (pure:
//! what status says, with each node's zone from `zones`). `cleanup` runs on deletion.

pub mod cleanup;
pub mod owned;
pub mod pool;
pub mod refused;
pub mod resources;
pub mod retire;
pub mod rollout;
pub mod status;
pub mod validate;
pub mod zones;

use std::sync::Arc;
use std::time::Duration;

use gk_api::agents::cache::Asked;
use gk_api::crd::GlusterCluster;
use gk_api::names::LABEL_CLUSTER;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;

use crate::context::Context;
use crate::{apply, tls, Error};

pub const FINALIZER: &str = "glusterkube.dev/gluster-cluster";

pub async fn reconcile(gc: Arc<GlusterCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ctx = &*ctx;
    crate::finalizer::reconcile(
        gc,
        ctx,
        FINALIZER,
        |gc| async move {
            let result = apply(&gc, ctx).await;
            if let Err(e) = &result {
                crate::apply::failure(ctx, &*gc, |o: &GlusterCluster| o.status.clone(), e).await;
            }
            result
        },
        |gc| async move {
            let done = cleanup::run(&gc, ctx).await;
            if done.is_ok() {
                let cluster = gc.name_any();
                ctx.metrics.forget_cluster(
                    &gc.namespace().unwrap_or_default(),
                    &cluster,
                    &[
                        gk_api::names::agent_tls_secret(&cluster),
                        gk_api::names::operator_tls_secret(&cluster),
                        gk_api::names::gluster_tls_secret(&cluster),
                    ],
                );
            }
            done
        },
    )
    .await
}

async fn apply(gc: &GlusterCluster, ctx: &Context) -> Result<Action, Error> {
    validate::spec(&gc.spec)?;
    let creds = tls::agent::ensure(ctx, gc).await?;
    tls::gluster::ensure(ctx, gc).await?;
    resources::apply(ctx, gc).await?;

    let (mut up, mut down) = ctx
        .agents
        .discover(&ctx.client, gc, Some(&creds), Asked::Now)
        .await?;
    refused::explain_missing(ctx, gc, &mut down).await;
    let anchor_peers = pool::form(&mut up).await?;
    let old = gc.status.clone().unwrap_or_default();
    let volumes = owned::volumes_on(ctx, gc).await?;
    let owned = owned::Owned::list(ctx, gc).await?;
    let rollout = rollout::run(ctx, gc, &owned, &mut up, &volumes, old.rollout.as_ref()).await?;
    let (retiring, still_in_pool) =
        retire::run(ctx, gc, &owned, &creds, &mut up, &volumes, &old.peers).await?;

    let zones = zones::read(ctx, gc).await?;
    let observed = status::Observed {
        nodes: gc.spec.nodes.len(),
        up: up
            .iter()
            .map(|a| status::NodeSeen {
                node: a.node.clone(),
                address: a.address.clone(),
                total_bytes: a.total_bytes(),
                free_bytes: a.free_bytes(),
                zone: zones.get(&a.node).cloned(),
                disks: a.disks.len(),
            })
            .collect(),
        down: &down,
        anchor_peers: &anchor_peers,
        rollout,
        retiring: &retiring,
        still_in_pool: &still_in_pool,
        volumes: &volumes,
    };
    let (mut new, desired) = status::compute(&old, &observed);
    new.observed_generation = gc.metadata.generation;
    ctx.metrics.rollout_stalled(
        &gc.namespace().unwrap_or_default(),
        &gc.name_any(),
        desired.iter().any(|d| d.reason == "RolloutStalled"),
    );
    apply::status_if_changed(ctx, gc, &old, new, &desired).await?;
    let settled = desired.iter().any(|d| d.type_ == "Ready" && d.status)
        && observed.rollout.waiting.is_none();
    Ok(Action::requeue(if settled {
        ctx.config.refresh
    } else {
        Duration::from_secs(3)
    }))
}

/// Brick pods wake their cluster's reconcile (a pod became ready, or lost its IP).
pub fn pod_to_cluster(pod: Pod) -> Option<ObjectRef<GlusterCluster>> {
    let cluster = pod.labels().get(LABEL_CLUSTER)?.clone();
    Some(ObjectRef::new(&cluster).within(&pod.namespace()?))
}
