//! A storage node as planning sees it.

use std::collections::BTreeMap;

/// A storage node as its brick agent describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlot {
    /// The Kubernetes node name.
    pub node: String,
    /// The address glusterd is known by in the pool.
    pub address: String,
    /// The directory, as glusterd sees it, under which this node's bricks live.
    pub brick_root: String,
    /// Size of the filesystem holding `brick_root`; 0 when unknown.
    pub total_bytes: u64,
    /// The node's zone (its Node's zone label), when it has one.
    pub zone: Option<String>,
}

impl NodeSlot {
    /// The slot of an agent's node, in the zone `zones` (Kubernetes node name to zone) gives.
    pub fn of(a: &gk_api::agents::NodeAgent, zones: &BTreeMap<String, String>) -> Self {
        NodeSlot {
            zone: zones.get(&a.node).cloned(),
            ..NodeSlot::from(a)
        }
    }
}

impl From<&gk_api::agents::NodeAgent> for NodeSlot {
    fn from(a: &gk_api::agents::NodeAgent) -> Self {
        NodeSlot {
            node: a.node.clone(),
            address: a.address.clone(),
            brick_root: a.brick_root.clone(),
            total_bytes: a.total_bytes,
            zone: None,
        }
    }
}
