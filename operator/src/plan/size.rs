//! How many bricks a volume gets: its brick count, raised to what `spec.size` needs.

use super::error::{spec_error, SpecError};
use super::layout::layout;
use super::node::NodeSlot;
use crate::crd::GlusterVolumeSpec;

/// The most bricks one volume may have (the CRD's brickCount maximum).
pub const MAX_BRICKS: usize = 1024;

/// The brick count `spec.size` asks for (with brickCount; explicit bricks are the user's own
/// placement): the fewest whole sets that hold `size`. Bricks on one node share its
/// filesystem, so a volume holds more only by spreading over more nodes: each node it spans
/// adds the smallest node's size times the share of a set that holds data. None without a
/// size, or while a node's size is unknown. A size the cluster's nodes cannot hold is refused
/// naming spec.size.
pub fn size_bricks(
    spec: &GlusterVolumeSpec,
    nodes: &[NodeSlot],
) -> Result<Option<usize>, SpecError> {
    let Some(size) = &spec.size else {
        return Ok(None);
    };
    if spec.bricks.is_some() || nodes.is_empty() || nodes.iter().any(|n| n.total_bytes == 0) {
        return Ok(None);
    }
    let bytes = gk_api::units::quantity_bytes("spec.size", &size.0)?;
    let layout = layout(spec)?;
    let set = layout.set_size() as u128;
    let data = layout.data_bricks() as u128;
    let smallest = nodes.iter().map(|n| n.total_bytes).min().unwrap_or(0) as u128;
    let per_node = smallest * data / set;
    let needed = (bytes as u128 * set).div_ceil((smallest * data).max(1));
    if needed > nodes.len() as u128 {
        return Err(spec_error(
            "spec.size",
            format!(
                "{} needs the volume spread over {needed} nodes of {smallest} bytes; the \
                 cluster's {} nodes hold at most {} bytes for it: add storage nodes or lower \
                 spec.size",
                size.0,
                nodes.len(),
                per_node * nodes.len() as u128
            ),
        ));
    }
    Ok(Some((needed.div_ceil(set) * set) as usize))
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
        assert!(e.reason.contains("add storage nodes"), "{}", e.reason);
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
        unknown[0].total_bytes = 0;
        assert_eq!(size_bricks(&r3("150Gi"), &unknown).unwrap(), None);
        // Explicit placement is the user's own.
        let placed = spec("cluster: c\ntype: Distribute\nbricks: [{node: n1}]\nsize: 1Ti\n");
        assert_eq!(size_bricks(&placed, &six).unwrap(), None);
    }
}
