//! A storage node as planning sees it.

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
}

impl From<&gk_api::agents::NodeAgent> for NodeSlot {
    fn from(a: &gk_api::agents::NodeAgent) -> Self {
        NodeSlot {
            node: a.node.clone(),
            address: a.address.clone(),
            brick_root: a.brick_root.clone(),
            total_bytes: a.total_bytes,
        }
    }
}
