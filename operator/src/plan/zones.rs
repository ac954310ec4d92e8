//! Failure domains: which nodes may hold bricks of one replica or disperse set. A node's
//! domain is its zone when its Node carries the cluster's zone label, else the node itself,
//! so a cluster without zone labels keeps bricks of a set on distinct nodes as before.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{spec_error, SpecError};
use super::node::NodeSlot;

/// The failure domain of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Domain<'a> {
    Zone(&'a str),
    Node(&'a str),
}

impl NodeSlot {
    pub fn domain(&self) -> Domain<'_> {
        match &self.zone {
            Some(z) => Domain::Zone(z),
            None => Domain::Node(&self.node),
        }
    }
}

/// Whether any node has a zone: without one, placement is by node alone.
pub fn any_zone(nodes: &[NodeSlot]) -> bool {
    nodes.iter().any(|n| n.zone.is_some())
}

/// The zones the nodes span, for messages: `a (n1, n2), b (n3)`; nodes without a zone are
/// listed as `n4 (no zone)`.
fn describe(nodes: &[NodeSlot]) -> String {
    let mut by: BTreeMap<Domain, Vec<&str>> = BTreeMap::new();
    for n in nodes {
        by.entry(n.domain()).or_default().push(&n.node);
    }
    by.iter()
        .map(|(d, members)| match d {
            Domain::Zone(z) => format!("{z} ({})", members.join(", ")),
            Domain::Node(n) => format!("{n} (no zone)"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Picks the nodes of one new set: `set` nodes in distinct domains, the domains holding the
/// fewest of this volume's bricks first, and in each domain its least loaded node (`load`:
/// bricks per node, same order as `nodes`). With fewer domains than `set`, refuses naming
/// `field`, or with `allow_shared` fills the set with the least loaded other nodes.
pub fn pick_set(
    nodes: &[NodeSlot],
    load: &[usize],
    set: usize,
    allow_shared: bool,
    field: &str,
) -> Result<Vec<usize>, SpecError> {
    if nodes.len() < set {
        return Err(spec_error(
            field,
            format!(
                "a set of {set} bricks needs {set} storage nodes whose agents answer, so no \
                 node holds two bricks of a set; {} do",
                nodes.len()
            ),
        ));
    }
    let mut domains: BTreeMap<Domain, (usize, usize)> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let e = domains.entry(n.domain()).or_insert((0, i));
        e.0 += load[i];
    }
    let mut order: Vec<(Domain, (usize, usize))> = domains.into_iter().collect();
    order.sort_by_key(|&(_, (bricks, first))| (bricks, first));
    if order.len() < set && !allow_shared {
        return Err(spec_error(
            field,
            format!(
                "a set of {set} bricks needs {set} zones so that losing one zone loses at most \
                 one brick of the set; the storage nodes span {}: {}. Add storage nodes in \
                 other zones, or set spec.allowSharedZones to place the set anyway",
                order.len(),
                describe(nodes)
            ),
        ));
    }
    let least_loaded = |pred: &dyn Fn(usize) -> bool| {
        (0..nodes.len())
            .filter(|&i| pred(i))
            .min_by_key(|&i| (load[i], i))
    };
    let mut chosen: Vec<usize> = order
        .iter()
        .take(set)
        .filter_map(|(d, _)| least_loaded(&|i| nodes[i].domain() == *d))
        .collect();
    while chosen.len() < set {
        let next = least_loaded(&|i| !chosen.contains(&i)).expect("enough nodes, checked above");
        chosen.push(next);
    }
    Ok(chosen)
}

/// The sets (index, zone, bricks in it) in which two or more bricks share a zone. `zones`
/// holds each brick's zone in brick order; bricks without a zone never share.
pub fn shared_sets(zones: &[Option<&str>], set: usize) -> Vec<(usize, String, usize)> {
    let mut out = Vec::new();
    for (j, group) in zones.chunks(set.max(1)).enumerate() {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for z in group.iter().flatten() {
            *count.entry(z).or_default() += 1;
        }
        out.extend(
            count
                .into_iter()
                .filter(|&(_, n)| n > 1)
                .map(|(z, n)| (j, z.to_string(), n)),
        );
    }
    out
}

/// Refuses explicitly placed sets with two bricks in one zone, unless allowed.
pub fn check_explicit(
    sets: &[Vec<&NodeSlot>],
    first_set: usize,
    allow_shared: bool,
) -> Result<(), SpecError> {
    if allow_shared {
        return Ok(());
    }
    for (j, group) in sets.iter().enumerate() {
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for n in group {
            if let Some(z) = n.zone.as_deref() {
                if !seen.insert(z) {
                    let both: Vec<&str> = group
                        .iter()
                        .filter(|m| m.zone.as_deref() == Some(z))
                        .map(|m| m.node.as_str())
                        .collect();
                    return Err(spec_error(
                        "spec.bricks",
                        format!(
                            "set {} has bricks on {} in the same zone {z}; losing that zone \
                             would lose the set. Place them in distinct zones, or set \
                             spec.allowSharedZones",
                            first_set + j,
                            both.join(" and ")
                        ),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::nodes;
    use super::*;

    fn zoned(zones: &[Option<&str>]) -> Vec<NodeSlot> {
        let mut n = nodes(zones.len());
        for (slot, z) in n.iter_mut().zip(zones) {
            slot.zone = z.map(String::from);
        }
        n
    }

    #[test]
    fn a_set_takes_one_node_per_zone_least_loaded_first() {
        let n = zoned(&[Some("a"), Some("a"), Some("b"), Some("c"), Some("c")]);
        let mut load = vec![0; 5];
        let first = pick_set(&n, &load, 3, false, "spec.brickCount").unwrap();
        assert_eq!(first, [0, 2, 3]);
        for i in &first {
            load[*i] += 1;
        }
        // Zone b has one node only, so it holds a brick of every set; a and c move on to
        // their other node.
        let second = pick_set(&n, &load, 3, false, "spec.brickCount").unwrap();
        let mut zones: Vec<&str> = second
            .iter()
            .map(|&i| n[i].zone.as_deref().unwrap())
            .collect();
        zones.sort();
        assert_eq!(zones, ["a", "b", "c"]);
        assert!(second.contains(&1) && second.contains(&4), "{second:?}");
    }

    #[test]
    fn too_few_zones_is_refused_with_the_zones_named_or_placed_when_allowed() {
        let n = zoned(&[Some("a"), Some("a"), Some("b")]);
        let e = pick_set(&n, &[0, 0, 0], 3, false, "spec.brickCount").unwrap_err();
        assert_eq!(e.field, "spec.brickCount");
        assert!(e.reason.contains("span 2: a (n1, n2), b (n3)"), "{e}");
        assert!(e.reason.contains("spec.allowSharedZones"), "{e}");
        let mut got = pick_set(&n, &[0, 0, 0], 3, true, "spec.brickCount").unwrap();
        got.sort();
        assert_eq!(got, [0, 1, 2]);
    }

    #[test]
    fn nodes_without_a_zone_are_domains_of_their_own() {
        let n = zoned(&[None, None, Some("a"), Some("a")]);
        let got = pick_set(&n, &[0; 4], 3, false, "f").unwrap();
        assert_eq!(got, [0, 1, 2]);
        assert!(pick_set(&zoned(&[None, None]), &[0, 0], 3, true, "f").is_err());
    }

    #[test]
    fn shared_sets_name_the_zone_and_count() {
        let z = [Some("a"), Some("a"), Some("b"), Some("a"), Some("b"), None];
        assert_eq!(shared_sets(&z, 3), [(0, "a".to_string(), 2)]);
        assert!(shared_sets(&[None, None, None], 3).is_empty());
    }

    #[test]
    fn explicit_sets_sharing_a_zone_are_refused_unless_allowed() {
        let n = zoned(&[Some("a"), Some("a"), Some("b")]);
        let sets = vec![vec![&n[2], &n[0]], vec![&n[0], &n[1]]];
        let e = check_explicit(&sets, 0, false).unwrap_err();
        assert!(
            e.reason
                .contains("set 1 has bricks on n1 and n2 in the same zone a"),
            "{e}"
        );
        check_explicit(&sets, 0, true).unwrap();
    }
}
