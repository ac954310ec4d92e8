//! GlusterVolume: a started, tuned gluster volume on the cluster's bricks, with status that
//! tells the truth about bricks, heal and capacity, and deletion that keeps data unless asked.
//!
//! One reconcile runs these stages in order, each in its own file: `create` (the gluster
//! volume, once) → `day2` (replacements, growing and shrinking) → `options` (profile, own
//! options, access control) → `observe` (bricks, heal, capacity; restarts dead bricks) with
//! `status` (pure: what status says). `adopt` checks a volume taken over rather than created
//! (`spec.existingVolume`) before anything else acts on it. `cleanup` runs on deletion;
//! `users` finds the PersistentVolumes on a volume.

pub mod adopt;
pub mod cleanup;
pub mod create;
pub mod day2;
pub mod lookup;
pub mod observe;
pub mod options;
pub mod pv_quota;
pub mod record;
pub mod status;
pub mod users;

use std::sync::Arc;

use gk_agent_proto::v1::VolumeStartRequest;
use gk_api::agents::cache::Asked;
use gk_api::agents::describe_down;
use gk_api::crd::GlusterVolume;
use gk_api::names::LABEL_CLUSTER;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::ResourceExt;

use crate::context::Context;
use crate::{Error, Waiting};
use lookup::{cluster_of, info};
use record::set_status;

pub const FINALIZER: &str = "glusterkube.dev/gluster-volume";

pub async fn reconcile(gv: Arc<GlusterVolume>, ctx: Arc<Context>) -> Result<Action, Error> {
    let ctx = &*ctx;
    crate::finalizer::reconcile(
        gv,
        ctx,
        FINALIZER,
        |gv| async move {
            let result = apply(&gv, ctx).await;
            if let Err(e) = &result {
                crate::apply::failure(ctx, &*gv, |o: &GlusterVolume| o.status.clone(), e).await;
            }
            result
        },
        |gv| async move {
            let done = cleanup::run(&gv, ctx).await;
            if done.is_ok() {
                // The finalizer goes next: its gauges must not outlive it.
                ctx.metrics
                    .forget_volume(&gv.namespace().unwrap_or_default(), &gv.name_any());
            }
            done
        },
    )
    .await
}

async fn apply(gv: &GlusterVolume, ctx: &Context) -> Result<Action, Error> {
    let ns = gv.namespace().unwrap_or_default();
    let name = gv.gluster_name();
    let keep = gv.status.clone().unwrap_or_default();
    let Some(gc) = cluster_of(ctx, gv).await? else {
        let wait = Waiting::ClusterNotFound {
            cluster: gv.spec.cluster.clone(),
            namespace: ns.to_string(),
        };
        set_status(
            ctx,
            gv,
            keep,
            &status::waiting("ClusterNotFound", wait.to_string()),
        )
        .await?;
        return Err(wait.into());
    };
    // Read-only: certificates are issued by the cluster reconcile alone.
    let (mut agents, down) = ctx
        .agents
        .discover(&ctx.client, &gc, None, Asked::Recently)
        .await?;
    if agents.is_empty() {
        let wait = Waiting::NoAgent {
            cluster: gc.name_any(),
        };
        set_status(
            ctx,
            gv,
            keep,
            &status::waiting("WaitingForCluster", wait.to_string()),
        )
        .await?;
        return Err(wait.into());
    }

    // Who may mount: set with the volume's creation (before its bricks first start, as
    // server.ssl needs) and kept afterwards. A volume's own options may not loosen it.
    let access = match options::access(gv, &gc) {
        Ok(a) => a,
        Err(e) => {
            set_status(ctx, gv, keep, &status::invalid_spec(e.to_string())).await?;
            return Err(e.into());
        }
    };

    // Gluster is the source of truth: an existing volume is never re-planned.
    let existing = info(&mut agents[0], &name).await?;
    if gv.spec.existing_volume.is_some() {
        let addresses: Vec<String> = agents.iter().map(|a| a.address.clone()).collect();
        match adopt::check(ctx, gv, &gc, existing.as_ref(), &addresses).await {
            Ok(()) => {}
            Err(Error::Spec(e)) => {
                set_status(ctx, gv, keep, &status::invalid_spec(e.to_string())).await?;
                return Err(e.into());
            }
            Err(other) => return Err(other),
        }
    }
    let disks: Vec<(String, Vec<gk_api::agents::AgentDisk>)> = agents
        .iter()
        .map(|a| (a.address.clone(), a.disks.clone()))
        .collect();
    let adopted = gv.spec.existing_volume.is_some();
    let decide = |v: &gk_agent_proto::v1::Volume| {
        let nodes: Vec<crate::plan::pv_quota::NodeDisks> = disks
            .iter()
            .map(|(a, d)| (a.as_str(), d.as_slice()))
            .collect();
        crate::plan::pv_quota::decide(v, &nodes, adopted)
    };
    let mut pv_quota = existing.as_ref().and_then(|v| decide(v).set);
    match &existing {
        None => {
            if !down.is_empty() {
                let wait = Waiting::NodesDown {
                    down: describe_down(&down),
                };
                set_status(
                    ctx,
                    gv,
                    keep,
                    &status::waiting("WaitingForNodes", wait.to_string()),
                )
                .await?;
                return Err(wait.into());
            }
            create::run(ctx, gv, &gc, &name, &mut agents, &access).await?;
            pv_quota = info(&mut agents[0], &name)
                .await?
                .and_then(|v| decide(&v).set);
        }
        Some(v) if v.status != "Started" => {
            // A create cut short (the operator stopped while the agent was at it) leaves the
            // volume created, perhaps without its access options: they go on before the
            // bricks first start, since a brick reads server.ssl only when it starts (one
            // started without it serves clients without TLS). A refused access option stops
            // here, as it does below.
            let lookups = options::lookups(gv, keep.resize.as_ref());
            options::apply(
                ctx,
                gv,
                &gc,
                &name,
                &mut agents[0],
                access.clone(),
                lookups,
                pv_quota,
            )
            .await?;
            agents[0]
                .client
                .volume_start(VolumeStartRequest {
                    name: name.clone(),
                    force: false,
                })
                .await
                .map_err(|s| Error::agent("volume start", s))?;
        }
        Some(_) => {}
    }
    let day2 = match &existing {
        Some(vol) if vol.status == "Started" => {
            day2::run(ctx, gv, &gc, &mut agents, vol, &keep).await?
        }
        _ => day2::Day2 {
            resize: keep.resize.clone(),
            retired: keep.retired_bricks.clone(),
            blocked: None,
        },
    };
    let lookups = options::lookups(gv, day2.resize.as_ref());
    let applied = options::apply(
        ctx,
        gv,
        &gc,
        &name,
        &mut agents[0],
        access,
        lookups,
        pv_quota,
    )
    .await?;
    let decided = decide(&applied.volume);
    let pv_quota = if decided.moving && !agents.is_empty() {
        pv_quota::step(&mut agents, &down, &name).await
    } else {
        decided.status
    };
    observe::run(gv, ctx, &gc, &name, &mut agents, &applied, day2, pv_quota).await
}

/// The volumes of the cluster a brick pod belongs to.
pub fn pod_to_volumes(
    volumes: &[Arc<GlusterVolume>],
    pod: &k8s_openapi::api::core::v1::Pod,
) -> Vec<ObjectRef<GlusterVolume>> {
    let (Some(cluster), Some(ns)) = (pod.labels().get(LABEL_CLUSTER), pod.namespace()) else {
        return Vec::new();
    };
    volumes
        .iter()
        .filter(|v| &v.spec.cluster == cluster && v.namespace().as_deref() == Some(ns.as_str()))
        .map(|v| ObjectRef::from_obj(v.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_brick_pod_wakes_the_volumes_of_its_cluster_only() {
        let vol = |ns: &str, name: &str, cluster: &str| -> Arc<GlusterVolume> {
            Arc::new(
                serde_json::from_value(serde_json::json!({
                    "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"cluster": cluster, "type": "Distribute", "size": "1Gi"},
                }))
                .unwrap(),
            )
        };
        let volumes = [
            vol("storage", "pool", "c1"),
            vol("storage", "other", "c2"),
            vol("elsewhere", "same-name-cluster", "c1"),
            vol("storage", "scratch", "c1"),
        ];
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c1-node-a-0", "namespace": "storage",
                         "labels": {LABEL_CLUSTER: "c1"}},
        }))
        .unwrap();
        let woken: Vec<String> = pod_to_volumes(&volumes, &pod)
            .into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap(), r.name))
            .collect();
        assert_eq!(woken, ["storage/pool", "storage/scratch"]);

        let unlabelled: k8s_openapi::api::core::v1::Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "x", "namespace": "storage"}}),
        )
        .unwrap();
        assert!(pod_to_volumes(&volumes, &unlabelled).is_empty());
    }
}
