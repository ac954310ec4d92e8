//! A storage node as planning sees it.

use std::collections::BTreeMap;

use gk_gluster::Brick;

/// A storage node as its brick agent describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlot {
    /// The Kubernetes node name.
    pub node: String,
    /// The address glusterd is known by in the pool.
    pub address: String,
    /// The node's disks, at least one. Bricks of a volume spread over them.
    pub disks: Vec<DiskSlot>,
    /// The node's zone (its Node's zone label), when it has one.
    pub zone: Option<String>,
}

/// One disk of a storage node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSlot {
    /// The directory, as glusterd sees it, under which this disk's bricks live.
    pub brick_root: String,
    /// Size of the filesystem; 0 when unknown.
    pub total_bytes: u64,
}

impl DiskSlot {
    fn root(&self) -> &str {
        self.brick_root.trim_end_matches('/')
    }

    /// Whether `brick` lives on this disk.
    fn holds(&self, brick: &Brick) -> bool {
        brick
            .path
            .strip_prefix(self.root())
            .is_some_and(|rest| rest.starts_with('/'))
    }
}

impl NodeSlot {
    /// The slot of an agent's node, in the zone `zones` (Kubernetes node name to zone) gives.
    pub fn of(a: &gk_api::agents::NodeAgent, zones: &BTreeMap<String, String>) -> Self {
        NodeSlot {
            zone: zones.get(&a.node).cloned(),
            ..NodeSlot::from(a)
        }
    }

    /// The brick root of a new brick on this node: the disk holding the fewest of `bricks`
    /// (the volume's bricks so far, including any that left it), the first listed on a tie.
    pub fn brick_root_for(&self, bricks: &[Brick]) -> &str {
        self.disks
            .iter()
            .enumerate()
            .min_by_key(|&(i, d)| {
                let here = bricks
                    .iter()
                    .filter(|b| b.host == self.address && d.holds(b))
                    .count();
                (here, i)
            })
            .map(|(_, d)| d.root())
            .unwrap_or_default()
    }

    /// The smallest disk's size; 0 when any is unknown.
    pub fn smallest_disk(&self) -> u64 {
        self.disks.iter().map(|d| d.total_bytes).min().unwrap_or(0)
    }
}

impl From<&gk_api::agents::NodeAgent> for NodeSlot {
    fn from(a: &gk_api::agents::NodeAgent) -> Self {
        NodeSlot {
            node: a.node.clone(),
            address: a.address.clone(),
            disks: a
                .disks
                .iter()
                .map(|d| DiskSlot {
                    brick_root: d.brick_root.clone(),
                    total_bytes: d.total_bytes,
                })
                .collect(),
            zone: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{brick, nodes};
    use super::*;

    #[test]
    fn a_new_brick_goes_to_the_disk_with_the_fewest_bricks_of_the_volume() {
        let mut n = nodes(1).remove(0);
        n.disks = vec![
            DiskSlot {
                brick_root: "/s/disks/a/bricks/".into(),
                total_bytes: 1,
            },
            DiskSlot {
                brick_root: "/s/disks/b/bricks".into(),
                total_bytes: 1,
            },
        ];
        assert_eq!(n.brick_root_for(&[]), "/s/disks/a/bricks");
        let on_a = brick(&n.address, "/s/disks/a/bricks/v-0");
        assert_eq!(
            n.brick_root_for(std::slice::from_ref(&on_a)),
            "/s/disks/b/bricks"
        );
        // Another node's brick, or a path that merely shares a prefix, is not on this disk.
        let elsewhere = brick("10.9.9.9", "/s/disks/b/bricks/v-1");
        let prefix = brick(&n.address, "/s/disks/b/bricks2/v-1");
        assert_eq!(
            n.brick_root_for(&[on_a, elsewhere, prefix]),
            "/s/disks/b/bricks"
        );
        assert_eq!(n.smallest_disk(), 1);
    }
}
