//! How many bricks a volume gets: its brick count, raised to what `spec.size` needs.

use super::error::{spec_error, SpecError};
use super::layout::layout;
use super::node::NodeSlot;
use super::spread::{per_node, spread};
use crate::crd::GlusterVolumeSpec;

/// The most bricks one volume may have (the CRD's brickCount maximum).
pub const MAX_BRICKS: usize = 1024;

/// The brick count `spec.size` asks for (with brickCount; explicit bricks are the user's own
/// placement): the fewest whole sets that hold `size`, each brick on a disk of its own, every
/// brick counted at the smallest disk's size times the share of a set that holds data. A
/// node takes as many of a volume's bricks as it has disks: the nodes a volume spreads over
/// (see `spread`) must have a disk free for each. None without a size, or while a disk's size
/// is unknown. A size the cluster's disks cannot hold is refused naming spec.size.
pub fn size_bricks(
    spec: &GlusterVolumeSpec,
    nodes: &[NodeSlot],
) -> Result<Option<usize>, SpecError> {
    let Some(size) = &spec.size else {
        return Ok(None);
    };
    if spec.bricks.is_some() || nodes.is_empty() || nodes.iter().any(|n| n.smallest_disk() == 0) {
        return Ok(None);
    }
    let bytes = gk_api::units::quantity_bytes("spec.size", &size.0)?;
    let layout = layout(spec)?;
    let set = layout.set_size() as u128;
    let data = layout.data_bricks() as u128;
    let smallest = nodes.iter().map(|n| n.smallest_disk()).min().unwrap_or(0) as u128;
    let needed = (bytes as u128 * set).div_ceil((smallest * data).max(1));
    let disks: usize = nodes.iter().map(|n| n.disks.len()).sum();
    let refuse = |why: String| {
        spec_error(
            "spec.size",
            format!(
                "{} needs {needed} bricks, each on a disk of its own holding {smallest} bytes \
                 (the smallest disk); {why}: add disks or storage nodes, or lower spec.size",
                size.0
            ),
        )
    };
    if needed > disks as u128 || needed > MAX_BRICKS as u128 {
        return Err(refuse(format!(
            "the cluster's {} nodes have {disks} disks",
            nodes.len()
        )));
    }
    let count = (needed.div_ceil(set) * set) as usize;
    let load = per_node(
        nodes,
        &spread(nodes, count, set as usize, spec.allow_shared_zones)?,
    );
    if let Some((n, l)) = nodes.iter().zip(load).find(|(n, l)| *l > n.disks.len()) {
        return Err(refuse(format!(
            "spread over the nodes (no two bricks of a set on one node or zone), {l} of them \
             fall on {}, which has {} disks",
            n.node,
            n.disks.len()
        )));
    }
    Ok(Some(count))
}

/// The bricks the volume gets: what the spec asks for, raised to what `spec.size` needs.
pub(super) fn brick_count(
    spec: &GlusterVolumeSpec,
    nodes: &[NodeSlot],
) -> Result<usize, SpecError> {
    Ok(wanted_bricks(spec)?.max(size_bricks(spec, nodes)?.unwrap_or(0)))
}

/// How many bricks the spec asks for. A count past the CRD's maximum (a spec stored under an
/// older CRD, say) is refused rather than planned.
pub fn wanted_bricks(spec: &GlusterVolumeSpec) -> Result<usize, SpecError> {
    let (field, want) = match (&spec.bricks, spec.brick_count) {
        (Some(list), None) => ("spec.bricks", list.len()),
        (None, Some(count)) => ("spec.brickCount", count as usize),
        _ => {
            return Err(spec_error(
                "spec.brickCount",
                "set exactly one of bricks or brickCount",
            ))
        }
    };
    if want > MAX_BRICKS {
        return Err(spec_error(
            field,
            format!("{want} bricks are more than the {MAX_BRICKS} a volume may have"),
        ));
    }
    Ok(want)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{nodes, spec};
    use super::super::{bricks, resize, Resize};
    use super::*;

    #[test]
    fn size_spreads_a_volume_over_more_nodes_and_never_past_them() {
        // 6 nodes of 100 GiB: a replica-3 volume on 3 of them holds 100 GiB (3 nodes x 100 GiB / 3).
        let six = nodes(6);
        let r3 = |size: &str| {
            spec(&format!(
                "cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 3\nsize: {size}\n"
            ))
        };
        assert_eq!(size_bricks(&r3("100Gi"), &six).unwrap(), Some(3));
        assert_eq!(size_bricks(&r3("150Gi"), &six).unwrap(), Some(6));
        let e = size_bricks(&r3("201Gi"), &six).unwrap_err();
        assert_eq!(e.field, "spec.size");
        assert!(
            e.reason.contains("add disks or storage nodes"),
            "{}",
            e.reason
        );
        // Disperse 2+1: two thirds of each node hold data.
        let ec = spec("cluster: c\ntype: Disperse\ndisperse: {data: 2, redundancy: 1}\nbrickCount: 3\nsize: 300Gi\n");
        assert_eq!(size_bricks(&ec, &six).unwrap(), Some(6));
        // The brick count is a floor too; size only adds.
        let b = bricks(&r3("150Gi"), "v", &six).unwrap();
        assert_eq!(b.len(), 6);
        // Growth by size: whole sets added.
        let have = bricks(&r3("1Gi"), "v", &six).unwrap();
        match resize(&r3("150Gi"), "v", &six, &have, &[]).unwrap() {
            Resize::Expand(added) => assert_eq!(added.len(), 3),
            other => panic!("{other:?}"),
        }
        // A node of unknown size: no decision from size.
        let mut unknown = six.clone();
        unknown[0].disks[0].total_bytes = 0;
        assert_eq!(size_bricks(&r3("150Gi"), &unknown).unwrap(), None);
        // Explicit placement is the user's own.
        let placed = spec("cluster: c\ntype: Distribute\nbricks: [{node: n1}]\nsize: 1Ti\n");
        assert_eq!(size_bricks(&placed, &six).unwrap(), None);
    }

    /// `n` nodes with `disks[i]` disks of 100 GiB each.
    fn with_disks(disks: &[usize]) -> Vec<NodeSlot> {
        let mut slots = nodes(disks.len());
        for (slot, &d) in slots.iter_mut().zip(disks) {
            slot.disks = (0..d)
                .map(|i| crate::plan::DiskSlot {
                    brick_root: format!("/var/lib/glusterkube/disks/d{i}/bricks"),
                    total_bytes: 100 << 30,
                })
                .collect();
        }
        slots
    }

    #[test]
    fn several_disks_per_node_hold_a_brick_each() {
        let r3 = |size: &str| {
            spec(&format!(
                "cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 3\nsize: {size}\n"
            ))
        };
        // Three nodes of two disks: a replica-3 volume of 200 GiB takes two sets, one brick
        // per disk, never two bricks of a set on one node.
        let three = with_disks(&[2, 2, 2]);
        assert_eq!(size_bricks(&r3("200Gi"), &three).unwrap(), Some(6));
        let b = bricks(&r3("200Gi"), "v", &three).unwrap();
        let mut per_disk = std::collections::BTreeMap::new();
        for x in &b {
            let disk = x.path.rsplit_once('/').unwrap().0.to_string();
            *per_disk.entry((x.host.clone(), disk)).or_insert(0) += 1;
        }
        assert_eq!(per_disk.len(), 6, "{b:?}");
        assert!(per_disk.values().all(|&n| n == 1), "{b:?}");
        // More than the disks hold is refused naming spec.size.
        let e = size_bricks(&r3("201Gi"), &three).unwrap_err();
        assert_eq!(e.field, "spec.size");
        assert!(e.reason.contains("6 disks"), "{}", e.reason);
        // A node with fewer disks limits what the spread gives it: refused, naming the node.
        let uneven = with_disks(&[3, 3, 1]);
        let e = size_bricks(&r3("200Gi"), &uneven).unwrap_err();
        assert!(
            e.reason.contains("fall on n3, which has 1 disks"),
            "{}",
            e.reason
        );
        assert_eq!(size_bricks(&r3("100Gi"), &uneven).unwrap(), Some(3));
        // Growth puts the new set on the disks the volume does not use yet.
        let have = bricks(&r3("100Gi"), "v", &three).unwrap();
        match resize(&r3("200Gi"), "v", &three, &have, &[]).unwrap() {
            Resize::Expand(added) => {
                for a in &added {
                    let old = have.iter().find(|h| h.host == a.host).unwrap();
                    assert_ne!(
                        old.path.rsplit_once('/').unwrap().0,
                        a.path.rsplit_once('/').unwrap().0,
                        "{a} shares a disk with {old}"
                    );
                }
            }
            other => panic!("{other:?}"),
        }
    }
}
