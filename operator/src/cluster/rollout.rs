//! The rolling restart of brick pods whose StatefulSet template changed (for example the
//! image): one at a time, evicted (so the PodDisruptionBudget is honoured too) only while
//! every brick pod serves and every volume has all bricks online and nothing to heal. A
//! restarted pod that is not healthy within the rollout timeout stops the rollout with a
//! Degraded condition; nothing further is restarted until it is. The decision itself is
//! `plan::rollout_step`.

use std::time::Duration;

use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume, RolloutStatus};
use gk_api::names::{statefulset_name, ANNOTATION_NODE};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::ResourceExt;

use super::owned::Owned;
use crate::context::Context;
use crate::plan::{rollout_step, BrickPod, RolloutStep};
use crate::{events, safety, Error};

/// What the rollout did this round.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rollout {
    pub status: Option<RolloutStatus>,
    /// Set while the rollout is not done: what it waits for.
    pub waiting: Option<String>,
    /// Set when a restarted pod did not become healthy within the timeout.
    pub stalled: Option<String>,
}

/// Each storage node's brick pod as the rollout sees it, in spec order.
pub fn view(
    gc: &GlusterCluster,
    sets: &[StatefulSet],
    pods: &[Pod],
    serving: &[&str],
) -> Vec<(String, Option<BrickPod>)> {
    gc.spec
        .nodes
        .iter()
        .map(|node| {
            let sts_name = statefulset_name(&gc.name_any(), &node.name);
            let revision = sets
                .iter()
                .find(|s| s.name_any() == sts_name)
                .and_then(|s| s.status.as_ref())
                .and_then(|s| s.update_revision.clone());
            let pod = pods
                .iter()
                .find(|p| p.annotations().get(ANNOTATION_NODE) == Some(&node.name))
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .map(|p| BrickPod {
                    name: p.name_any(),
                    // Until the StatefulSet controller reports a revision, nothing is outdated.
                    current: revision.is_none()
                        || p.labels().get("controller-revision-hash") == revision.as_ref(),
                    serving: serving.contains(&node.name.as_str()),
                });
            (node.name.clone(), pod)
        })
        .collect()
}

/// Why the rollout is stalled: the pod it restarted last is not healthy `limit` after its
/// restart. None while it is within the limit.
pub fn stalled(
    status: &RolloutStatus,
    now: Timestamp,
    limit: Duration,
    why: &str,
) -> Option<String> {
    let (pod, at) = (
        status.restarted_pod.as_ref()?,
        status.restarted_at.as_ref()?,
    );
    let waited = now.duration_since(at.0).as_secs();
    (waited >= limit.as_secs() as i64).then(|| {
        format!(
            "brick pod {pod} was restarted {waited}s ago and the cluster is not healthy \
             within the rollout timeout of {}s: {why}; the rollout is stopped until \
             this is fixed",
            limit.as_secs()
        )
    })
}

/// One round of the rollout.
pub async fn run(
    ctx: &Context,
    gc: &GlusterCluster,
    owned: &Owned,
    up: &mut [NodeAgent],
    volumes: &[GlusterVolume],
    old: Option<&RolloutStatus>,
) -> Result<Rollout, Error> {
    let serving: Vec<&str> = up.iter().map(|a| a.node.as_str()).collect();
    let view = view(gc, &owned.sets, &owned.pods, &serving);
    let total = view.len() as i32;
    let updated = view
        .iter()
        .filter(|(_, p)| p.as_ref().is_some_and(|p| p.current))
        .count() as i32;
    let mut status = RolloutStatus {
        updated,
        total,
        restarted_pod: old.and_then(|o| o.restarted_pod.clone()),
        restarted_at: old.and_then(|o| o.restarted_at.clone()),
        waiting_for: None,
    };
    let outdated = view
        .iter()
        .any(|(_, p)| p.as_ref().is_some_and(|p| !p.current));
    let safe = match (outdated, up.is_empty()) {
        (false, _) => Ok(()),
        (true, true) => Err(crate::plan::NotSafe::NoAgent),
        (true, false) => match super::pool::all_connected(up).await {
            Ok(()) => {
                let names: Vec<String> = volumes.iter().map(|v| v.gluster_name()).collect();
                safety::check_all(&mut up[0], &names).await?
            }
            waiting => waiting,
        },
    };
    let mut stall = None;
    let waiting = match rollout_step(&view, safe) {
        RolloutStep::Done => {
            status.restarted_pod = None;
            status.restarted_at = None;
            None
        }
        RolloutStep::Restart(pod) => {
            let pods: Api<Pod> =
                Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
            // kube's client retries a 429 (the PDB refusing) for minutes; a refusal here is
            // just "not yet", so the reconcile does not wait on it.
            let evicted = tokio::time::timeout(
                Duration::from_secs(10),
                pods.evict(&pod, &Default::default()),
            )
            .await;
            match evicted {
                Err(_) => Some(format!(
                    "the eviction of {pod} was not granted within 10s (a PodDisruptionBudget \
                     refuses it while another brick pod is down)"
                )),
                Ok(Ok(_)) => {
                    tracing::info!(%pod, "restarting brick pod for its new template");
                    let note = format!(
                        "restarting brick pod {pod} for its new template ({updated} of {total} \
                         updated): every brick is online and nothing is left to heal"
                    );
                    events::publish(
                        ctx,
                        gc,
                        events::event(false, "RestartingBrickPod", "Rollout", &note),
                    )
                    .await;
                    status.restarted_pod = Some(pod.clone());
                    status.restarted_at = Some(Time(Timestamp::now()));
                    Some(format!(
                        "restarted brick pod {pod}; waiting for it to serve"
                    ))
                }
                Ok(Err(kube::Error::Api(e))) if e.code == 429 => Some(format!(
                    "the PodDisruptionBudget does not allow restarting {pod} yet: {}",
                    e.message
                )),
                Ok(Err(e)) => return Err(e.into()),
            }
        }
        RolloutStep::Wait(why) => {
            stall = stalled(&status, Timestamp::now(), ctx.config.rollout_timeout, &why);
            Some(why)
        }
    };
    status.waiting_for = waiting.clone();
    let show = outdated || old.is_some();
    Ok(Rollout {
        status: show.then_some(status),
        waiting,
        stalled: stall,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_stalls_only_past_its_timeout() {
        let at = Timestamp::from_second(1_000).unwrap();
        let status = RolloutStatus {
            updated: 1,
            total: 3,
            restarted_pod: Some("p1".into()),
            restarted_at: Some(Time(at)),
            waiting_for: None,
        };
        let limit = Duration::from_secs(30);
        let now = |s: i64| Timestamp::from_second(1_000 + s).unwrap();
        assert_eq!(stalled(&status, now(29), limit, "heal"), None);
        let msg = stalled(&status, now(30), limit, "2 entries to heal").unwrap();
        assert!(
            msg.contains("p1 was restarted 30s ago") && msg.contains("2 entries to heal"),
            "{msg}"
        );
        let none = RolloutStatus {
            restarted_pod: None,
            ..status
        };
        assert_eq!(stalled(&none, now(999), limit, "x"), None);
    }

    #[test]
    fn pods_are_outdated_only_once_their_set_reports_a_revision() {
        let gc = super::super::resources::tests::cluster();
        let set = |name: &str, rev: Option<&str>| -> StatefulSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "status": {"replicas": 1, "updateRevision": rev},
            }))
            .unwrap()
        };
        let pod = |name: &str, node: &str, rev: &str| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "annotations": {ANNOTATION_NODE: node},
                             "labels": {"controller-revision-hash": rev}},
            }))
            .unwrap()
        };
        let b = statefulset_name("pool", "node.b");
        let sets = [set("pool-node-a", Some("r2")), set(&b, None)];
        let pods = [pod("pa", "node-a", "r1"), pod("pb", "node.b", "r1")];
        let v = view(&gc, &sets, &pods, &["node-a"]);
        let a = v[0].1.as_ref().unwrap();
        assert!(!a.current && a.serving);
        let b = v[1].1.as_ref().unwrap();
        assert!(b.current && !b.serving);
        assert!(view(&gc, &sets, &[], &[]).iter().all(|(_, p)| p.is_none()));
    }
}
