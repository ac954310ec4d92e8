//! Replacing every brick of a storage node named in the GlusterCluster's spec.replacements:
//! replace-brick onto a new, empty brick that self-heal fills. The old bricks' directories are
//! left alone (and listed as retired).

use std::collections::BTreeMap;

use gk_agent_proto::v1::{ReplaceBrickRequest, Volume as AgentVolume, VolumeRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume};

use super::state::{parse_bricks, Day2};
use crate::context::Context;
use crate::plan::{self, layout_of, NodeSlot};
use crate::{events, Error, Waiting};

/// Replaces every brick on a node named in spec.replacements. Returns whether any brick
/// was replaced. The old bricks' directories are left alone (and listed as retired).
pub async fn run(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    agents: &mut [NodeAgent],
    vol: &AgentVolume,
    out: &mut Day2,
) -> Result<bool, Error> {
    let known = gc
        .status
        .as_ref()
        .map(|s| s.peers.as_slice())
        .unwrap_or(&[]);
    let zones = crate::volume::lookup::zones_of(gc);
    let mut map: BTreeMap<String, (String, NodeSlot)> = BTreeMap::new();
    for r in &gc.spec.replacements {
        let old = agents
            .iter()
            .find(|a| a.node == r.node)
            .map(|a| a.address.clone())
            .or_else(|| {
                known
                    .iter()
                    .find(|p| p.node == r.node)
                    .map(|p| p.address.clone())
            });
        let Some(old) = old else {
            out.blocked = Some((
                "ReplacementBlocked",
                format!(
                    "the pool address of node {} is not known (it never joined, or its status \
                     was lost); its bricks cannot be matched",
                    r.node
                ),
            ));
            continue;
        };
        if !vol
            .bricks
            .iter()
            .any(|b| b.split_once(':').is_some_and(|(h, _)| h == old))
        {
            continue;
        }
        let Some(slot) = agents.iter().find(|a| a.node == r.replacement) else {
            out.blocked = Some((
                "ReplacementBlocked",
                format!(
                    "waiting for the brick agent of {} to take over the bricks of {}",
                    r.replacement, r.node
                ),
            ));
            continue;
        };
        map.insert(old, (r.node.clone(), NodeSlot::of(slot, &zones)));
    }
    if map.is_empty() {
        return Ok(false);
    }
    let pairs = match plan::replacements(
        &vol.name,
        layout_of(vol).set_size() as usize,
        &parse_bricks(&vol.bricks),
        &map,
        &parse_bricks(&out.retired),
    ) {
        Ok(p) => p,
        Err(e) => {
            out.blocked = Some(("ReplacementRefused", e.to_string()));
            return Ok(false);
        }
    };
    for (old, new) in &pairs {
        // Any agent but the replaced node's own (it is usually dead).
        let anchor = agents
            .iter_mut()
            .find(|a| a.address != old.host)
            .ok_or(Waiting::NoOtherAgent)?;
        tracing::info!(volume = %vol.name, %old, %new, "replacing brick");
        out.retired.push(old.to_string());
        anchor
            .client
            .replace_brick(ReplaceBrickRequest {
                name: vol.name.clone(),
                old_brick: old.to_string(),
                new_brick: new.to_string(),
            })
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?;
        let _ = anchor
            .client
            .heal_start(VolumeRequest {
                name: vol.name.clone(),
            })
            .await;
        let note = format!(
            "replaced brick {old} by {new}; self-heal fills the new brick (see healPending); \
             the old brick's directory is kept"
        );
        events::publish(
            ctx,
            gv,
            events::event(false, "BrickReplaced", "Reconcile", &note),
        )
        .await;
    }
    Ok(!pairs.is_empty())
}
