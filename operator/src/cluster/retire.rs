//! Storage nodes removed from spec.nodes leave the trusted pool once nothing of theirs is
//! needed, and their StatefulSet goes.

use gk_agent_proto::v1::{HealthRequest, PeerRequest};
use gk_api::agents::{self, AgentCredentials, NodeAgent};
use gk_api::crd::{GlusterCluster, GlusterVolume, PeerStatus};
use gk_api::names::ANNOTATION_NODE;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::Api;
use kube::ResourceExt;

use super::owned::Owned;
use crate::context::Context;
use crate::{events, Error};

/// Why a storage node gone from spec.nodes must keep its brick pod for now, or None when it
/// can leave the trusted pool. Its bricks and a pending replacement of it still need it.
pub fn retirement_blocker(
    node: &str,
    gc: &GlusterCluster,
    volumes: &[GlusterVolume],
) -> Option<String> {
    if gc.spec.replacements.iter().any(|r| r.node == node) {
        return Some(format!(
            "{node} was removed from spec.nodes but spec.replacements still lists it; remove \
             that entry once every volume reports heal pending 0"
        ));
    }
    let holding: Vec<String> = volumes
        .iter()
        .filter(|v| {
            v.status
                .iter()
                .flat_map(|s| &s.bricks)
                .any(|b| b.node == node)
        })
        .map(|v| v.name_any())
        .collect();
    (!holding.is_empty()).then(|| {
        format!(
            "{node} was removed from spec.nodes but holds bricks of GlusterVolume(s) {}; move \
             them with spec.replacements (or lower those volumes' brickCount) first",
            holding.join(", ")
        )
    })
}

/// A storage node whose StatefulSet remains although spec.nodes no longer names it.
fn removed_node(gc: &GlusterCluster, set: &StatefulSet) -> Option<String> {
    let node = set
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(ANNOTATION_NODE)?;
    (!gc.spec.nodes.iter().any(|n| &n.name == node)).then(|| node.clone())
}

/// Storage nodes removed from spec.nodes leave once nothing of theirs is needed: the peer is
/// detached from the trusted pool (gluster itself refuses while the peer holds a brick), then
/// its StatefulSet is deleted. A node whose agent answers names its own address; one that does
/// not (a machine that is gone) is detached by force under the address `known` (the last
/// status) has for it. The node-local storage is left as it is. Returns why removed nodes
/// stay, one message each, and the nodes that stay.
pub async fn run(
    ctx: &Context,
    gc: &GlusterCluster,
    owned: &Owned,
    creds: &AgentCredentials,
    up: &mut [NodeAgent],
    volumes: &[GlusterVolume],
    known: &[PeerStatus],
) -> Result<(Vec<String>, Vec<String>), Error> {
    let removed: Vec<(String, String)> = owned
        .sets
        .iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter_map(|s| Some((removed_node(gc, s)?, s.name_any())))
        .collect();
    let sets: Api<StatefulSet> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    let mut staying = Vec::new();
    let mut kept = Vec::new();
    for (node, set) in removed {
        if let Some(why) = retirement_blocker(&node, gc, volumes) {
            staying.push(why);
            kept.push(node);
            continue;
        }
        let Some(anchor) = up.first_mut() else {
            staying.push(format!(
                "{node} waits to leave the trusted pool until a remaining node's agent answers"
            ));
            kept.push(node);
            continue;
        };
        // The peer's own agent names the address the pool knows it by.
        let ip = owned
            .pods
            .iter()
            .filter(|p| p.annotations().get(ANNOTATION_NODE) == Some(&node))
            .find_map(|p| p.status.as_ref()?.pod_ip.clone());
        let address = match ip {
            Some(ip) => match agents::connect(&ip, ctx.config.agent_port, creds)?
                .health(HealthRequest {})
                .await
            {
                Ok(h) => Some(h.into_inner().address),
                Err(_) => None,
            },
            None => None,
        };
        let (address, force) = match address {
            Some(a) => (a, false),
            None => match known.iter().find(|p| p.node == node) {
                Some(p) => (p.address.clone(), true),
                None => {
                    staying.push(format!(
                        "{node} was removed from spec.nodes but neither answers nor has a known \
                         pool address; detach it by hand with `gluster peer detach <host> force`"
                    ));
                    kept.push(node);
                    continue;
                }
            },
        };
        if let Err(s) = anchor
            .client
            .peer_detach(PeerRequest {
                host: address.clone(),
                force,
            })
            .await
        {
            staying.push(format!(
                "{node} ({address}) could not leave the trusted pool: {}",
                s.message()
            ));
            kept.push(node);
            continue;
        }
        sets.delete(&set, &Default::default()).await?;
        tracing::info!(%node, %address, "storage node left the pool");
        let note = format!(
            "storage node {node} ({address}) left the trusted pool{} and its StatefulSet \
             {set} was deleted; data on its node-local storage was left as it is",
            if force {
                " (detached by force: it did not answer)"
            } else {
                ""
            }
        );
        events::publish(
            ctx,
            gc,
            events::event(false, "NodeRetired", "RetireNode", &note),
        )
        .await;
    }
    Ok((staying, kept))
}

#[cfg(test)]
mod tests {
    use super::super::resources::build_statefulset;
    use super::super::resources::tests::cluster;
    use super::super::resources::tests::pods;
    use super::*;
    use serde_json::json;

    #[test]
    fn a_removed_node_stays_while_bricks_or_a_replacement_need_it() {
        let mut gc = cluster();
        let vol = |name: &str, nodes: &[&str]| -> GlusterVolume {
            serde_json::from_value(json!({
                "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                "metadata": {"name": name, "namespace": "storage"},
                "spec": {"cluster": "pool", "type": "Distribute", "brickCount": nodes.len()},
                "status": {"bricks": nodes.iter().map(|n| json!(
                    {"node": n, "host": "10.0.0.9", "path": "/srv/g/b", "online": true}
                )).collect::<Vec<_>>()},
            }))
            .unwrap()
        };
        let volumes = [
            vol("data", &["node-a", "node-c"]),
            vol("logs", &["node-c"]),
            vol("tmp", &["node-a"]),
        ];
        let why = retirement_blocker("node-c", &gc, &volumes).unwrap();
        assert!(why.contains("GlusterVolume(s) data, logs;"), "{why}");
        assert!(why.contains("spec.replacements"), "{why}");
        assert_eq!(retirement_blocker("node-c", &gc, &volumes[2..]), None);

        gc.spec.replacements =
            vec![
                serde_json::from_value(json!({"node": "node-c", "replacement": "node-a"})).unwrap(),
            ];
        let why = retirement_blocker("node-c", &gc, &[]).unwrap();
        assert!(why.contains("spec.replacements still lists it"), "{why}");
    }

    #[test]
    fn only_statefulsets_of_nodes_gone_from_the_spec_are_removed_nodes() {
        let gc = cluster();
        let node_a = build_statefulset(&gc, &gc.spec.nodes[0], &pods("img"));
        assert_eq!(removed_node(&gc, &node_a), None);
        let mut gone = gc.clone();
        gone.spec.nodes.remove(0);
        assert_eq!(removed_node(&gone, &node_a).as_deref(), Some("node-a"));
        // A StatefulSet without the node annotation is not ours to retire.
        let mut bare = node_a.clone();
        bare.spec.as_mut().unwrap().template.metadata = None;
        assert_eq!(removed_node(&gone, &bare), None);
    }
}
