//! Which nodes take a new volume's bricks: whole sets over distinct nodes (distinct zones
//! where nodes carry zones), spreading the load round the nodes. Planning of bricks and of
//! the brick count a size needs both follow it.

use super::error::{spec_error, SpecError};
use super::node::NodeSlot;
use super::zones;

/// For each of `count` bricks in set order, the index in `nodes` of the node that takes it.
pub fn spread(
    nodes: &[NodeSlot],
    count: usize,
    set: usize,
    allow_shared_zones: bool,
) -> Result<Vec<usize>, SpecError> {
    let set = set.max(1);
    if nodes.len() < set {
        return Err(spec_error(
            "spec.brickCount",
            format!(
                "sets of {set} bricks need {set} storage nodes so no node holds two bricks of a set; the cluster has {}",
                nodes.len()
            ),
        ));
    }
    if !zones::any_zone(nodes) {
        // Set j takes the next `set` nodes round the ring, so no node holds more than one
        // brick more than another at any count (each brick then has a disk of its own while
        // disks last); within the set, positions rotate with j so that an arbiter, the last
        // brick of a set, does not always land on the same node.
        return Ok((0..count)
            .map(|k| {
                let j = k / set;
                (j * set + (k % set + j) % set) % nodes.len()
            })
            .collect());
    }
    // Whole sets, each over distinct zones, the emptiest zones first.
    let mut load = vec![0; nodes.len()];
    let mut chosen = Vec::with_capacity(count);
    for _ in 0..count / set {
        for i in zones::pick_set(nodes, &load, set, allow_shared_zones, "spec.brickCount")? {
            load[i] += 1;
            chosen.push(i);
        }
    }
    Ok(chosen)
}

/// How many of `chosen` (node indices) each node takes.
pub fn per_node(nodes: &[NodeSlot], chosen: &[usize]) -> Vec<usize> {
    let mut load = vec![0; nodes.len()];
    for &i in chosen {
        load[i] += 1;
    }
    load
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::nodes;
    use super::*;

    #[test]
    fn sets_rotate_round_the_nodes_and_never_repeat_a_node_within_a_set() {
        let four = nodes(4);
        let chosen = spread(&four, 12, 3, false).unwrap();
        assert_eq!(chosen, [0, 1, 2, 0, 1, 3, 0, 2, 3, 1, 2, 3]);
        assert_eq!(per_node(&four, &chosen), [3, 3, 3, 3]);
        let e = spread(&nodes(2), 3, 3, false).unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
    }
}
