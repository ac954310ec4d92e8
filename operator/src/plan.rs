//! Pure planning: gluster names, brick placement and the options a volume should carry.

use std::collections::{BTreeMap, HashSet};

use gk_gluster::{Brick, VolumeLayout};

use crate::crd::{GlusterVolumeSpec, TuningProfile, VolumeType};

/// A spec the operator cannot act on. Becomes a condition and an event, not a retry loop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    pub field: String,
    pub reason: String,
}

fn spec_error(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// A storage node as its brick agent describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSlot {
    /// The Kubernetes node name.
    pub node: String,
    /// The address glusterd is known by in the pool.
    pub address: String,
    /// The directory, as glusterd sees it, under which this node's bricks live.
    pub brick_root: String,
}

/// The gluster volume name of a GlusterVolume: `<namespace>-<name>`, with '.' (allowed in
/// Kubernetes names, not in gluster's) turned into '_' (allowed in gluster's, not in
/// Kubernetes'), so distinct resources never share a name. Too long a name keeps a prefix and
/// gains a hash of the whole.
pub fn gluster_volume_name(namespace: &str, name: &str) -> String {
    let full = format!("{namespace}-{name}").replace('.', "_");
    if full.len() <= 64 {
        return full;
    }
    format!("{}-{:016x}", &full[..47], fnv1a(full.as_bytes()))
}

/// FNV-1a, a stable hash for names (std's hasher may change between releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

pub fn layout(spec: &GlusterVolumeSpec) -> Result<VolumeLayout, SpecError> {
    let layout = match spec.volume_type {
        VolumeType::Distribute => VolumeLayout::Distribute,
        VolumeType::Arbiter => VolumeLayout::Arbiter,
        VolumeType::Replicate => VolumeLayout::Replicate {
            replica: spec
                .replica
                .ok_or_else(|| spec_error("spec.replica", "is required for type Replicate"))?,
        },
        VolumeType::Disperse => {
            let d = spec
                .disperse
                .ok_or_else(|| spec_error("spec.disperse", "is required for type Disperse"))?;
            VolumeLayout::Disperse {
                data: d.data,
                redundancy: d.redundancy,
            }
        }
    };
    layout
        .validate()
        .map_err(|e| spec_error("spec", e.to_string()))?;
    Ok(layout)
}

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
        (None, Some(count)) => {
            if nodes.len() < set {
                return Err(spec_error(
                    "spec.brickCount",
                    format!(
                        "sets of {set} bricks need {set} storage nodes so no node holds two bricks of a set; the cluster has {}",
                        nodes.len()
                    ),
                ));
            }
            // Set j starts one node further than set j-1, spreading load round the nodes.
            (0..count as usize)
                .map(|k| &nodes[(k / set + k % set) % nodes.len()])
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
    chosen
        .iter()
        .enumerate()
        .map(|(k, n)| {
            Brick::new(
                &n.address,
                format!("{}/{volume_name}-{k}", n.brick_root.trim_end_matches('/')),
            )
            .map_err(|e| spec_error("brick", e.to_string()))
        })
        .collect()
}

/// One option of a profile and why it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileOption {
    pub key: &'static str,
    pub value: &'static str,
    pub reason: &'static str,
    /// Only for volumes with redundancy (replicate, arbiter, disperse): self-heal options.
    pub redundant_only: bool,
}

/// The Tuned profile. Seed 000's "high performance" list, applied whole, was slower than
/// gluster's defaults on every row of a first dd ladder recorded in ENVIRONMENT.md, so only
/// options with a reason that holds on any cluster are kept; the rest wait for the benchmark
/// harness to earn their place.
pub const TUNED: &[ProfileOption] = &[
    ProfileOption {
        key: "network.ping-timeout",
        value: "10",
        reason: "clients block all I/O for ping-timeout when a brick host vanishes without \
                 closing its connections; gluster's 42 s stalls pods for too long",
        redundant_only: false,
    },
    ProfileOption {
        key: "cluster.shd-max-threads",
        value: "4",
        reason: "heals after a brick returns run with more parallelism, shortening the window \
                 with one copy missing (seed 000 used 8 on large nodes)",
        redundant_only: true,
    },
    ProfileOption {
        key: "features.cache-invalidation",
        value: "on",
        reason: "brick-side upcalls tell clients when metadata changes, which makes the \
                 longer md-cache timeout below safe on RWX volumes shared by many pods",
        redundant_only: false,
    },
    ProfileOption {
        key: "performance.cache-invalidation",
        value: "on",
        reason: "clients act on those upcalls (seed 000)",
        redundant_only: false,
    },
    ProfileOption {
        key: "performance.md-cache-timeout",
        value: "600",
        reason: "stat and xattr answers are cached while invalidation keeps them correct, \
                 cutting lookups for metadata-heavy workloads (seed 000)",
        redundant_only: false,
    },
    ProfileOption {
        key: "features.cache-invalidation-timeout",
        value: "600",
        reason: "bricks remember interested clients as long as they cache (seed 000)",
        redundant_only: false,
    },
];

/// The options a volume should carry: its profile, then its own options over them.
pub fn options(
    profile: TuningProfile,
    layout: VolumeLayout,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let redundant = layout != VolumeLayout::Distribute;
    let mut out: BTreeMap<String, String> = match profile {
        TuningProfile::Tuned => TUNED
            .iter()
            .filter(|o| redundant || !o.redundant_only)
            .map(|o| (o.key.to_string(), o.value.to_string()))
            .collect(),
        TuningProfile::GlusterDefaults => BTreeMap::new(),
    };
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BrickPlacement;

    fn spec(yaml: &str) -> GlusterVolumeSpec {
        let v: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
        serde_json::from_value(v).unwrap()
    }

    fn nodes(n: usize) -> Vec<NodeSlot> {
        (1..=n)
            .map(|i| NodeSlot {
                node: format!("n{i}"),
                address: format!("10.0.0.{i}"),
                brick_root: "/var/lib/glusterkube/bricks/".into(),
            })
            .collect()
    }

    fn hosts(bricks: &[Brick]) -> Vec<&str> {
        bricks.iter().map(|b| b.host.as_str()).collect()
    }

    #[test]
    fn names_are_gluster_safe_and_distinct() {
        assert_eq!(gluster_volume_name("default", "pool"), "default-pool");
        assert_eq!(gluster_volume_name("a", "b.c"), "a-b_c");
        assert_ne!(
            gluster_volume_name("a-b", "c"),
            gluster_volume_name("a", "b-c.x")
        );
        let long = gluster_volume_name(&"n".repeat(63), &"v".repeat(63));
        assert_eq!(long.len(), 64);
        gk_gluster::validate_volume_name(&long).unwrap();
        assert_ne!(long, gluster_volume_name(&"n".repeat(63), &"v".repeat(62)));
    }

    #[test]
    fn sets_span_distinct_nodes_and_rotate() {
        let s = spec("cluster: c\ntype: Replicate\nreplica: 3\nbrickCount: 6\n");
        let b = bricks(&s, "ns-v", &nodes(4)).unwrap();
        assert_eq!(
            hosts(&b),
            ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.2", "10.0.0.3", "10.0.0.4"]
        );
        assert_eq!(b[4].path, "/var/lib/glusterkube/bricks/ns-v-4");
        let s =
            spec("cluster: c\ntype: Disperse\ndisperse: {data: 2, redundancy: 1}\nbrickCount: 3\n");
        assert_eq!(bricks(&s, "v", &nodes(3)).unwrap().len(), 3);
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
    fn the_profile_doc_lists_every_option() {
        let doc = include_str!("../../docs/profiles.md");
        for o in TUNED {
            let row = format!("| `{}` | {} |", o.key, o.value);
            assert!(doc.contains(&row), "docs/profiles.md lacks {row}");
        }
    }

    #[test]
    fn own_options_override_the_profile() {
        let own = BTreeMap::from([("network.ping-timeout".to_string(), "20".to_string())]);
        let r3 = VolumeLayout::Replicate { replica: 3 };
        let o = options(TuningProfile::Tuned, r3, &own);
        assert_eq!(o["network.ping-timeout"], "20");
        assert_eq!(o.len(), TUNED.len());
        let dist = options(TuningProfile::Tuned, VolumeLayout::Distribute, &own);
        assert!(!dist.contains_key("cluster.shd-max-threads"));
        assert_eq!(options(TuningProfile::GlusterDefaults, r3, &own).len(), 1);
        for opt in TUNED {
            assert!(opt.key.contains('.') && !opt.reason.is_empty());
        }
    }
}
