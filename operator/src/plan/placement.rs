//! Where bricks go: a new volume's bricks, whole sets added or removed, and the bricks that
//! take over from a replaced node. Never two bricks of one set on one node, nor, where nodes
//! carry zones, in one zone unless the volume allows it (see `zones`).

use std::collections::{BTreeMap, HashSet};

use gk_gluster::Brick;

use super::error::{spec_error, SpecError};
use super::layout::layout;
use super::node::NodeSlot;
use super::size::brick_count;
use super::spread::spread;
use super::zones;
use crate::crd::GlusterVolumeSpec;

/// The bricks of a volume, in set order, each set on distinct nodes.
pub fn bricks(
    spec: &GlusterVolumeSpec,
    volume_name: &str,
    nodes: &[NodeSlot],
) -> Result<Vec<Brick>, SpecError> {
    let set = layout(spec)?.set_size() as usize;
    let chosen: Vec<&NodeSlot> = match (&spec.bricks, spec.brick_count) {
        (Some(list), None) => list
            .iter()
            .enumerate()
            .map(|(i, b)| {
                nodes.iter().find(|n| n.node == b.node).ok_or_else(|| {
                    spec_error(
                        format!("spec.bricks[{i}].node"),
                        format!("{} is not a storage node of the cluster", b.node),
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        (None, Some(_)) => {
            // Refuses a count past MAX_BRICKS (wanted_bricks): the CRD caps brickCount too, but
            // a spec stored under an older CRD must not make the operator plan billions.
            let count = brick_count(spec, nodes)?;
            spread(nodes, count, set, spec.allow_shared_zones)?
                .into_iter()
                .map(|i| &nodes[i])
                .collect()
        }
        _ => {
            return Err(spec_error(
                "spec.brickCount",
                "set exactly one of bricks or brickCount",
            ))
        }
    };
    if chosen.is_empty() || !chosen.len().is_multiple_of(set) {
        return Err(spec_error(
            "spec.bricks",
            format!("{} bricks do not make whole sets of {set}", chosen.len()),
        ));
    }
    for (j, group) in chosen.chunks(set).enumerate() {
        let mut seen = HashSet::new();
        for n in group {
            if !seen.insert(&n.node) {
                return Err(spec_error(
                    "spec.bricks",
                    format!(
                        "set {j} has two bricks on node {}; losing that node would lose the set",
                        n.node
                    ),
                ));
            }
        }
    }
    if spec.bricks.is_some() {
        let sets: Vec<Vec<&NodeSlot>> = chosen.chunks(set).map(|g| g.to_vec()).collect();
        zones::check_explicit(&sets, 0, spec.allow_shared_zones)?;
    }
    let mut out: Vec<Brick> = Vec::with_capacity(chosen.len());
    for (k, n) in chosen.iter().enumerate() {
        let path = format!("{}/{volume_name}-{k}", n.brick_root_for(&out));
        out.push(Brick::new(&n.address, path).map_err(|e| spec_error("brick", e.to_string()))?);
    }
    Ok(out)
}

/// What a volume's brick count asks of gluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resize {
    Keep,
    /// add-brick these (whole sets, in set order), then rebalance.
    Expand(Vec<Brick>),
    /// remove-brick these (the last whole sets), migrating their data first.
    Shrink(Vec<Brick>),
}

/// A brick on `slot` for position `index`, on the slot's disk holding the fewest of `taken`,
/// whose path no existing brick uses: a brick that left the volume may still hold data under
/// the plain name, and it must stay untouched.
fn fresh_brick(
    slot: &NodeSlot,
    volume_name: &str,
    index: usize,
    taken: &[Brick],
) -> Result<Brick, SpecError> {
    let plain = format!("{}/{volume_name}-{index}", slot.brick_root_for(taken));
    let mut path = plain.clone();
    let mut n = 1;
    while taken
        .iter()
        .any(|b| b.host == slot.address && b.path == path)
    {
        path = format!("{plain}-r{n}");
        n += 1;
    }
    Brick::new(&slot.address, path).map_err(|e| spec_error("brick", e.to_string()))
}

/// Compares the spec's brick count with the volume's bricks in gluster (`existing`, set
/// order) and says which whole sets to add or remove. New sets go to the nodes holding the
/// fewest bricks of this volume, never two bricks of a set on one node; explicit placement
/// (spec.bricks) takes its new entries as written. Shrinking removes the last sets.
pub fn resize(
    spec: &GlusterVolumeSpec,
    volume_name: &str,
    nodes: &[NodeSlot],
    existing: &[Brick],
    retired: &[Brick],
) -> Result<Resize, SpecError> {
    let set = layout(spec)?.set_size() as usize;
    let want = brick_count(spec, nodes)?;
    let have = existing.len();
    let field = if spec.bricks.is_some() {
        "spec.bricks"
    } else {
        "spec.brickCount"
    };
    if !want.is_multiple_of(set) || want == 0 {
        return Err(spec_error(
            field,
            format!("{want} bricks do not make whole sets of {set}"),
        ));
    }
    if !have.is_multiple_of(set) {
        return Err(spec_error(
            field,
            format!("gluster holds {have} bricks, not whole sets of {set}; fix the volume by hand"),
        ));
    }
    if want < have {
        return Ok(Resize::Shrink(existing[want..].to_vec()));
    }
    if want == have {
        return Ok(Resize::Keep);
    }
    let mut taken: Vec<Brick> = existing.iter().chain(retired).cloned().collect();
    let mut added = Vec::new();
    if let Some(list) = &spec.bricks {
        for (i, b) in list.iter().enumerate().skip(have) {
            let slot = nodes.iter().find(|n| n.node == b.node).ok_or_else(|| {
                spec_error(
                    format!("spec.bricks[{i}].node"),
                    format!(
                        "{} is not a storage node of the cluster whose agent answers",
                        b.node
                    ),
                )
            })?;
            let brick = fresh_brick(slot, volume_name, i, &taken)?;
            taken.push(brick.clone());
            added.push(brick);
        }
        let new_sets: Vec<Vec<&NodeSlot>> = added
            .chunks(set)
            .map(|g| {
                g.iter()
                    .filter_map(|b| nodes.iter().find(|n| n.address == b.host))
                    .collect()
            })
            .collect();
        zones::check_explicit(&new_sets, have / set, spec.allow_shared_zones)?;
        for (j, group) in added.chunks(set).enumerate() {
            let mut hosts = HashSet::new();
            if let Some(dup) = group.iter().find(|b| !hosts.insert(&b.host)) {
                return Err(spec_error(
                    "spec.bricks",
                    format!(
                        "new set {j} has two bricks on {}; losing that node would lose the set",
                        dup.host
                    ),
                ));
            }
        }
        return Ok(Resize::Expand(added));
    }
    let mut load: Vec<usize> = nodes
        .iter()
        .map(|n| existing.iter().filter(|b| b.host == n.address).count())
        .collect();
    for k in (have..want).step_by(set) {
        let picked = zones::pick_set(
            nodes,
            &load,
            set,
            spec.allow_shared_zones,
            "spec.brickCount",
        )?;
        for (pos, &i) in picked.iter().enumerate() {
            let brick = fresh_brick(&nodes[i], volume_name, k + pos, &taken)?;
            taken.push(brick.clone());
            added.push(brick);
            load[i] += 1;
        }
    }
    Ok(Resize::Expand(added))
}

/// For every brick on a replaced node (`replaced` maps its pool address to the node that
/// takes over), the new brick that takes its place. The new node must not already hold a
/// brick of the same set: that would put two copies behind one disk.
pub fn replacements(
    volume_name: &str,
    set: usize,
    existing: &[Brick],
    replaced: &BTreeMap<String, (String, NodeSlot)>,
    retired: &[Brick],
) -> Result<Vec<(Brick, Brick)>, SpecError> {
    let set = set.max(1);
    let mut taken: Vec<Brick> = existing.iter().chain(retired).cloned().collect();
    let mut out = Vec::new();
    for (k, old) in existing.iter().enumerate() {
        let Some((old_node, slot)) = replaced.get(&old.host) else {
            continue;
        };
        let group = &existing[k / set * set..(k / set + 1) * set];
        if group.iter().any(|b| b.host == slot.address) {
            return Err(spec_error(
                "spec.replacements",
                format!(
                    "{} already holds a brick of set {} of volume {volume_name}, so it cannot \
                     also take {old_node}'s brick {old}; pick another replacement node",
                    slot.node,
                    k / set
                ),
            ));
        }
        let new = fresh_brick(slot, volume_name, k, &taken)?;
        taken.push(new.clone());
        out.push((old.clone(), new));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{brick, hosts, nodes, spec};
    use super::super::MAX_BRICKS;
    use super::*;
    use crate::crd::BrickPlacement;

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        #[test]
        fn brick_count_beyond_the_maximum_is_refused_not_planned() {
            // Found by the property below: the planner tried to build u32::MAX bricks.
            let s = spec("cluster: c\ntype: Distribute\nbrickCount: 4294967295\n");
            let e = bricks(&s, "v", &nodes(3)).unwrap_err();
            assert_eq!(e.field, "spec.brickCount");
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// Whatever a stored spec says (values the CEL rules would refuse included),
            /// planning never panics: it refuses with a field named, or gives whole sets with
            /// no node twice in a set, and distinct brick paths under each node's root.
            #[test]
            fn planning_any_spec_gives_safe_bricks_or_a_named_error(
                ty in prop_oneof![Just("Distribute"), Just("Replicate"), Just("Arbiter"), Just("Disperse")],
                replica in proptest::option::of(0u32..6),
                disperse in proptest::option::of((0u32..20, 0u32..10)),
                count in proptest::option::of(prop_oneof![0u32..64, 1000u32..1100, Just(u32::MAX)]),
                listed in proptest::option::of(proptest::collection::vec(1usize..10, 0..12)),
                node_count in 0usize..8,
            ) {
                let mut v = serde_json::json!({"cluster": "c", "type": ty});
                if let Some(r) = replica { v["replica"] = r.into(); }
                if let Some((d, r)) = disperse { v["disperse"] = serde_json::json!({"data": d, "redundancy": r}); }
                if let Some(c) = count { v["brickCount"] = c.into(); }
                if let Some(l) = &listed {
                    v["bricks"] = l.iter().map(|i| serde_json::json!({"node": format!("n{i}")})).collect();
                }
                let spec: GlusterVolumeSpec = serde_json::from_value(v).unwrap();
                let nodes = nodes(node_count);
                match bricks(&spec, "ns-vol", &nodes) {
                    Ok(b) => {
                        let set = layout(&spec).unwrap().set_size() as usize;
                        prop_assert!(!b.is_empty() && b.len() % set == 0);
                        prop_assert!(b.len() <= MAX_BRICKS);
                        for group in b.chunks(set) {
                            let hosts: HashSet<&str> = group.iter().map(|x| x.host.as_str()).collect();
                            prop_assert_eq!(hosts.len(), set);
                        }
                        let paths: HashSet<&str> = b.iter().map(|x| x.path.as_str()).collect();
                        prop_assert_eq!(paths.len(), b.len());
                        prop_assert!(b.iter().all(|x| x.path.starts_with("/var/lib/glusterkube/bricks/ns-vol-")));
                    }
                    Err(e) => prop_assert!(e.field.starts_with("spec") || e.field == "brick", "{e:?}"),
                }
            }
        }
    }

    #[test]
    fn sets_span_distinct_nodes_and_rotate() {
        let s = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 6\n");
        let b = bricks(&s, "ns-v", &nodes(4)).unwrap();
        assert_eq!(
            hosts(&b),
            ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1", "10.0.0.2", "10.0.0.4"]
        );
        assert_eq!(b[4].path, "/var/lib/glusterkube/bricks/ns-v-4");
        let s =
            spec("cluster: c\ntype: Disperse\ndisperse: {data: 2, redundancy: 1}\nbrickCount: 3\n");
        assert_eq!(bricks(&s, "v", &nodes(3)).unwrap().len(), 3);
    }

    #[test]
    fn with_zones_every_set_spans_distinct_zones_or_is_refused() {
        let mut n = nodes(4);
        for (slot, z) in n.iter_mut().zip(["a", "a", "b", "c"]) {
            slot.zone = Some(z.into());
        }
        let s = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 6\n");
        let b = bricks(&s, "v", &n).unwrap();
        for set in b.chunks(3) {
            let mut zones: Vec<&str> = set
                .iter()
                .map(|x| n.iter().find(|m| m.address == x.host).unwrap())
                .map(|m| m.zone.as_deref().unwrap())
                .collect();
            zones.sort();
            assert_eq!(zones, ["a", "b", "c"], "{b:?}");
        }
        // Both nodes of zone a take a brick.
        assert!(hosts(&b).contains(&"10.0.0.1") && hosts(&b).contains(&"10.0.0.2"));
        // Two zones for sets of three: refused, or placed with the sets sharing.
        n[3].zone = Some("b".into());
        let e = bricks(&s, "v", &n).unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
        let mut allowed = s.clone();
        allowed.allow_shared_zones = true;
        assert_eq!(bricks(&allowed, "v", &n).unwrap().len(), 6);
        // Explicit bricks in one zone.
        let mut s = spec("cluster: c\ntype: Replicate\nreplica: 2\nbrickCount: 2\n");
        s.brick_count = None;
        s.bricks = Some(vec![
            BrickPlacement { node: "n1".into() },
            BrickPlacement { node: "n2".into() },
        ]);
        let e = bricks(&s, "v", &n).unwrap_err();
        assert!(e.reason.contains("same zone a"), "{e}");
    }

    #[test]
    fn refuses_what_cannot_be_placed_safely() {
        let s = spec("cluster: c\ntype: Arbiter\nbrickCount: 3\n");
        let e = bricks(&s, "v", &nodes(2)).unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
        assert!(e.reason.contains("the cluster has 2"), "{e}");
        let mut s = spec("cluster: c\ntype: Replicate\nreplica: 2\nbrickCount: 2\n");
        s.brick_count = None;
        s.bricks = Some(vec![
            BrickPlacement { node: "n1".into() },
            BrickPlacement { node: "n1".into() },
        ]);
        let e = bricks(&s, "v", &nodes(3)).unwrap_err();
        assert!(e.reason.contains("two bricks on node n1"), "{e}");
        s.bricks = Some(vec![
            BrickPlacement { node: "n1".into() },
            BrickPlacement { node: "n9".into() },
        ]);
        assert_eq!(
            bricks(&s, "v", &nodes(3)).unwrap_err().field,
            "spec.bricks[1].node"
        );
    }

    #[test]
    fn expansion_adds_whole_sets_on_the_least_loaded_nodes() {
        let root = "/var/lib/glusterkube/bricks";
        let have: Vec<Brick> = (0..3)
            .map(|i| brick(&format!("10.0.0.{}", i + 1), &format!("{root}/v-{i}")))
            .collect();
        let s = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 6\n");
        let Resize::Expand(add) = resize(&s, "v", &nodes(4), &have, &[]).unwrap() else {
            panic!("expected an expansion")
        };
        assert_eq!(hosts(&add), ["10.0.0.4", "10.0.0.1", "10.0.0.2"]);
        assert_eq!(add[0].path, format!("{root}/v-3"));
        // A path still holding a retired brick is never reused.
        let retired = [brick("10.0.0.4", &format!("{root}/v-3"))];
        let Resize::Expand(add) = resize(&s, "v", &nodes(4), &have, &retired).unwrap() else {
            panic!()
        };
        assert_eq!(add[0].path, format!("{root}/v-3-r1"));
        // Three nodes: the new set spans all three again.
        let Resize::Expand(add) = resize(&s, "v", &nodes(3), &have, &[]).unwrap() else {
            panic!()
        };
        assert_eq!(hosts(&add), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
        // Too few nodes for a set.
        let e = resize(&s, "v", &nodes(2), &have, &[]).unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
        // Same count: nothing to do.
        let s3 = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 3\n");
        assert_eq!(
            resize(&s3, "v", &nodes(3), &have, &[]).unwrap(),
            Resize::Keep
        );
    }

    #[test]
    fn shrinking_removes_the_last_sets_and_refuses_partial_sets() {
        let have: Vec<Brick> = (0..6)
            .map(|i| brick(&format!("10.0.0.{}", i % 3 + 1), &format!("/b/v-{i}")))
            .collect();
        let s = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 3\n");
        assert_eq!(
            resize(&s, "v", &nodes(3), &have, &[]).unwrap(),
            Resize::Shrink(have[3..].to_vec())
        );
        let bad = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 4\n");
        let e = resize(&bad, "v", &nodes(3), &have, &[]).unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
        assert!(e.reason.contains("whole sets of 3"), "{e}");
        let huge = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 4294967295\n");
        let e = resize(&huge, "v", &nodes(3), &have, &[]).unwrap_err();
        assert!(e.reason.contains("more than the 1024"), "{e}");
    }

    #[test]
    fn explicit_placement_expands_with_its_new_entries() {
        let have: Vec<Brick> = (0..2)
            .map(|i| brick(&format!("10.0.0.{}", i + 1), &format!("/b/v-{i}")))
            .collect();
        let mut s = spec("cluster: c\ntype: Replicate\nreplica: 2\nbrickCount: 2\n");
        s.brick_count = None;
        let place = |n: &[&str]| {
            Some(
                n.iter()
                    .map(|n| BrickPlacement {
                        node: n.to_string(),
                    })
                    .collect(),
            )
        };
        s.bricks = place(&["n1", "n2", "n3", "n1"]);
        let Resize::Expand(add) = resize(&s, "v", &nodes(3), &have, &[]).unwrap() else {
            panic!()
        };
        assert_eq!(hosts(&add), ["10.0.0.3", "10.0.0.1"]);
        s.bricks = place(&["n1", "n2", "n3", "n3"]);
        let e = resize(&s, "v", &nodes(3), &have, &[]).unwrap_err();
        assert!(e.reason.contains("two bricks on 10.0.0.3"), "{e}");
        s.bricks = place(&["n1", "n2", "n9", "n1"]);
        assert_eq!(
            resize(&s, "v", &nodes(3), &have, &[]).unwrap_err().field,
            "spec.bricks[2].node"
        );
    }

    #[test]
    fn replacement_moves_bricks_of_the_replaced_node_only() {
        let have: Vec<Brick> = (0..6)
            .map(|i| brick(&format!("10.0.0.{}", i % 3 + 1), &format!("/b/v-{i}")))
            .collect();
        let n = nodes(4);
        let map = BTreeMap::from([("10.0.0.3".to_string(), ("n3".to_string(), n[3].clone()))]);
        let pairs = replacements("v", 3, &have, &map, &[]).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[0].0, have[2]);
        assert_eq!(pairs[0].1.host, "10.0.0.4");
        assert_eq!(pairs[1].1.path, "/var/lib/glusterkube/bricks/v-5");
        // The replacement already holds a brick of the set: refused, naming the field.
        let onto_member =
            BTreeMap::from([("10.0.0.3".to_string(), ("n3".to_string(), n[0].clone()))]);
        let e = replacements("v", 3, &have, &onto_member, &[]).unwrap_err();
        assert_eq!(e.field, "spec.replacements");
        assert!(e.reason.contains("set 0"), "{e}");
        assert!(replacements("v", 3, &have, &BTreeMap::new(), &[])
            .unwrap()
            .is_empty());
    }
}
