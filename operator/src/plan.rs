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
    /// Size of the filesystem holding `brick_root`; 0 when unknown.
    pub total_bytes: u64,
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

/// The most bricks one volume may have (the CRD's brickCount maximum).
pub const MAX_BRICKS: usize = 1024;

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
            (0..count)
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

/// Bytes in a Kubernetes quantity such as `100Gi`, `1.5T` or `1073741824`.
pub fn quantity_bytes(field: &str, q: &str) -> Result<u64, SpecError> {
    let bad = || {
        spec_error(
            field,
            format!("{q:?} is not a size such as 100Gi, 500M or 1073741824"),
        )
    };
    let split = q.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(q.len());
    let (number, suffix) = q.split_at(split);
    let unit: f64 = match suffix {
        "" => 1.0,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return Err(bad()),
    };
    let n: f64 = number
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)
        .ok_or_else(bad)?;
    let bytes = (n * unit).ceil();
    if bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

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
    let bytes = quantity_bytes("spec.size", &size.0)?;
    let layout = layout(spec)?;
    let set = layout.set_size() as u128;
    // Bricks of a set that hold distinct data: replicas and arbiters hold copies or metadata.
    let data = match layout {
        VolumeLayout::Disperse { data, .. } => data as u128,
        _ => 1,
    };
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
fn brick_count(spec: &GlusterVolumeSpec, nodes: &[NodeSlot]) -> Result<usize, SpecError> {
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

/// What a volume's brick count asks of gluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resize {
    Keep,
    /// add-brick these (whole sets, in set order), then rebalance.
    Expand(Vec<Brick>),
    /// remove-brick these (the last whole sets), migrating their data first.
    Shrink(Vec<Brick>),
}

fn brick_path(slot: &NodeSlot, volume_name: &str, index: usize) -> String {
    format!(
        "{}/{volume_name}-{index}",
        slot.brick_root.trim_end_matches('/')
    )
}

/// A brick on `slot` for position `index` whose path no existing brick uses: a brick that
/// left the volume may still hold data under the plain name, and it must stay untouched.
fn fresh_brick(
    slot: &NodeSlot,
    volume_name: &str,
    index: usize,
    taken: &[Brick],
) -> Result<Brick, SpecError> {
    let plain = brick_path(slot, volume_name, index);
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
    if nodes.len() < set {
        return Err(spec_error(
            "spec.brickCount",
            format!(
                "a new set of {set} bricks needs {set} storage nodes whose agents answer; {} do",
                nodes.len()
            ),
        ));
    }
    let mut load: Vec<usize> = nodes
        .iter()
        .map(|n| existing.iter().filter(|b| b.host == n.address).count())
        .collect();
    for k in (have..want).step_by(set) {
        let mut order: Vec<usize> = (0..nodes.len()).collect();
        order.sort_by_key(|&i| (load[i], i));
        for (pos, &i) in order[..set].iter().enumerate() {
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

/// A brick pod as the rollout sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickPod {
    pub name: String,
    /// The pod runs the StatefulSet's current template.
    pub current: bool,
    /// Running, ready and its agent answers.
    pub serving: bool,
}

/// The next step of a rolling restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RolloutStep {
    /// Every pod runs the current template and serves.
    Done,
    /// Restart this pod now.
    Restart(String),
    /// Do nothing yet, for this reason.
    Wait(String),
}

/// One pod at a time, in spec order, and only while every pod serves and the data is safe
/// (`data_safe` is Err with the reason when a brick is offline or heal is pending).
/// `pods` holds one entry per storage node; `None` is a pod that does not exist (yet).
///
/// An outdated pod that does not serve is restarted first, without those checks: its brick is
/// down already, so restarting it takes nothing more offline, and its new template may be the
/// fix (a pod stuck pulling a mistyped image, after the image is corrected). Waiting for it to
/// serve would wait for ever.
pub fn rollout_step(
    pods: &[(String, Option<BrickPod>)],
    data_safe: Result<(), String>,
) -> RolloutStep {
    let stuck = pods
        .iter()
        .filter_map(|(_, p)| p.as_ref())
        .find(|p| !p.current && !p.serving);
    if let Some(p) = stuck {
        return RolloutStep::Restart(p.name.clone());
    }
    let mut outdated = None;
    for (node, pod) in pods {
        match pod {
            None => {
                return RolloutStep::Wait(format!("the brick pod of {node} does not exist yet"))
            }
            Some(p) if !p.serving => {
                return RolloutStep::Wait(format!("brick pod {} is not serving yet", p.name))
            }
            Some(p) if !p.current && outdated.is_none() => outdated = Some(p.name.clone()),
            Some(_) => {}
        }
    }
    let Some(next) = outdated else {
        return RolloutStep::Done;
    };
    match data_safe {
        Ok(()) => RolloutStep::Restart(next),
        Err(why) => RolloutStep::Wait(why),
    }
}

/// What to do next with a migration, from gluster's status of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    /// Gluster never ran it: start it.
    Start,
    Running,
    /// Every file moved: for a shrink, commit now.
    Done,
    /// It ended without moving every file; the reason says what is left where.
    Failed(String),
}

/// Reads gluster's status of a rebalance or remove-brick migration. A migration that
/// "completed" with failures is a failure: heketi reported such runs as success. For a
/// shrink, skipped files (gluster skips a file when the remaining bricks lack space) are a
/// failure too: they are still only on the bricks being removed.
pub fn migration(status: &str, failures: u64, skipped: u64, shrink: bool) -> Migration {
    let what = if shrink {
        "moving data off the bricks being removed"
    } else {
        "rebalance"
    };
    match status {
        "not started" => Migration::Start,
        "completed" if failures == 0 && (!shrink || skipped == 0) => Migration::Done,
        "completed" => Migration::Failed(format!(
            "gluster finished {what} with {failures} failed and {skipped} skipped files{}",
            if shrink {
                "; those files are still only on the bricks being removed, so the commit \
                 is refused: free space on the remaining bricks, then set the brick count \
                 again (or back)"
            } else {
                "; the files stay readable where they are"
            }
        )),
        s if s.contains("failed") || s.contains("stopped") => Migration::Failed(format!(
            "gluster reports {what} as {s:?} with {failures} failed and {skipped} skipped \
             files; see the {}rebalance log under /var/log/glusterfs on the brick nodes",
            if shrink { "remove-brick " } else { "" }
        )),
        _ => Migration::Running,
    }
}

/// One option of a profile and why it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileOption {
    pub key: &'static str,
    pub value: &'static str,
    pub reason: &'static str,
    /// Which layouts take the option: gluster refuses replicate's self-heal options on
    /// disperse volumes and the other way round.
    pub applies: Applies,
}

/// The layouts a profile option is set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    All,
    /// Replicate and arbiter (AFR).
    Replicated,
    /// Disperse (EC).
    Dispersed,
}

impl Applies {
    fn matches(self, layout: VolumeLayout) -> bool {
        match self {
            Applies::All => true,
            Applies::Replicated => {
                matches!(
                    layout,
                    VolumeLayout::Replicate { .. } | VolumeLayout::Arbiter
                )
            }
            Applies::Dispersed => matches!(layout, VolumeLayout::Disperse { .. }),
        }
    }
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
        applies: Applies::All,
    },
    ProfileOption {
        key: "cluster.shd-max-threads",
        value: "4",
        reason: "heals after a brick returns run with more parallelism, shortening the window \
                 with one copy missing (seed 000 used 8 on large nodes)",
        applies: Applies::Replicated,
    },
    ProfileOption {
        key: "disperse.shd-max-threads",
        value: "4",
        reason: "the same for disperse volumes, which refuse cluster.shd-max-threads \
                 (measured: \"Cannot set cluster.shd-max-threads for a non-replicate volume\")",
        applies: Applies::Dispersed,
    },
    ProfileOption {
        key: "features.cache-invalidation",
        value: "on",
        reason: "brick-side upcalls tell clients when metadata changes, which makes the \
                 longer md-cache timeout below safe on RWX volumes shared by many pods",
        applies: Applies::All,
    },
    ProfileOption {
        key: "performance.cache-invalidation",
        value: "on",
        reason: "clients act on those upcalls (seed 000)",
        applies: Applies::All,
    },
    ProfileOption {
        key: "performance.md-cache-timeout",
        value: "600",
        reason: "stat and xattr answers are cached while invalidation keeps them correct, \
                 cutting lookups for metadata-heavy workloads (seed 000)",
        applies: Applies::All,
    },
    ProfileOption {
        key: "features.cache-invalidation-timeout",
        value: "600",
        reason: "bricks remember interested clients as long as they cache (seed 000)",
        applies: Applies::All,
    },
];

/// The options a volume should carry: its profile, then its own options over them.
pub fn options(
    profile: TuningProfile,
    layout: VolumeLayout,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = match profile {
        TuningProfile::Tuned => TUNED
            .iter()
            .filter(|o| o.applies.matches(layout))
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
                total_bytes: 100 << 30,
            })
            .collect()
    }

    fn hosts(bricks: &[Brick]) -> Vec<&str> {
        bricks.iter().map(|b| b.host.as_str()).collect()
    }

    #[test]
    fn quantities_in_bytes() {
        assert_eq!(quantity_bytes("f", "1Gi").unwrap(), 1 << 30);
        assert_eq!(quantity_bytes("f", "1.5Ki").unwrap(), 1536);
        assert_eq!(quantity_bytes("f", "2G").unwrap(), 2_000_000_000);
        assert_eq!(quantity_bytes("f", "1073741824").unwrap(), 1 << 30);
        for bad in ["", "Gi", "1Qi", "-1Gi", "1e9", "99999999999Ei"] {
            assert_eq!(
                quantity_bytes("spec.size", bad).unwrap_err().field,
                "spec.size",
                "{bad}"
            );
        }
    }

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

    fn brick(host: &str, path: &str) -> Brick {
        Brick::new(host, path).unwrap()
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

    #[test]
    fn rollout_restarts_one_pod_at_a_time_and_only_when_data_is_safe() {
        let pod = |name: &str, current: bool, serving: bool| {
            Some(BrickPod {
                name: name.into(),
                current,
                serving,
            })
        };
        let all = |a: bool, b: bool, c: bool| {
            vec![
                ("n1".to_string(), pod("p1", a, true)),
                ("n2".to_string(), pod("p2", b, true)),
                ("n3".to_string(), pod("p3", c, true)),
            ]
        };
        assert_eq!(
            rollout_step(&all(true, true, true), Ok(())),
            RolloutStep::Done
        );
        // Done even when data is unsafe: nothing left to restart.
        assert_eq!(
            rollout_step(&all(true, true, true), Err("heal".into())),
            RolloutStep::Done
        );
        assert_eq!(
            rollout_step(&all(false, false, false), Ok(())),
            RolloutStep::Restart("p1".into())
        );
        assert_eq!(
            rollout_step(&all(true, false, false), Ok(())),
            RolloutStep::Restart("p2".into())
        );
        assert_eq!(
            rollout_step(&all(true, false, false), Err("3 entries to heal".into())),
            RolloutStep::Wait("3 entries to heal".into())
        );
        let mut restarting = all(true, false, false);
        restarting[0].1 = pod("p1", true, false);
        assert!(matches!(
            rollout_step(&restarting, Ok(())),
            RolloutStep::Wait(w) if w.contains("p1")
        ));
        restarting[0].1 = None;
        assert!(matches!(
            rollout_step(&restarting, Ok(())),
            RolloutStep::Wait(w) if w.contains("n1")
        ));

        // A pod stuck on an old template (an image that cannot be pulled, since corrected) is
        // restarted at once, data safe or not: it serves nothing already.
        let mut stuck = all(true, true, false);
        stuck[2].1 = pod("p3", false, false);
        assert_eq!(
            rollout_step(&stuck, Err("brick p3 offline".into())),
            RolloutStep::Restart("p3".into())
        );
        // Once restarted on the current template it is waited for like any other.
        stuck[2].1 = pod("p3", true, false);
        assert!(matches!(
            rollout_step(&stuck, Ok(())),
            RolloutStep::Wait(w) if w.contains("p3")
        ));
    }

    #[test]
    fn migrations_succeed_only_when_every_file_moved() {
        assert_eq!(migration("not started", 0, 0, false), Migration::Start);
        assert_eq!(migration("in progress", 3, 0, true), Migration::Running);
        assert_eq!(
            migration("fix-layout in progress", 0, 0, false),
            Migration::Running
        );
        assert_eq!(migration("completed", 0, 0, true), Migration::Done);
        // Skipped files are fine for a rebalance (they stay put), not for a shrink.
        assert_eq!(migration("completed", 0, 4, false), Migration::Done);
        let Migration::Failed(why) = migration("completed", 0, 4, true) else {
            panic!("a shrink with skipped files must not commit")
        };
        assert!(why.contains("4 skipped") && why.contains("commit"), "{why}");
        let Migration::Failed(why) = migration("completed", 2, 0, false) else {
            panic!("failures are never success")
        };
        assert!(why.contains("2 failed"), "{why}");
        assert!(matches!(
            migration("failed", 0, 0, false),
            Migration::Failed(w) if w.contains("\"failed\"")
        ));
        assert!(matches!(
            migration("stopped", 0, 0, true),
            Migration::Failed(_)
        ));
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
        assert_eq!(o.len(), TUNED.len() - 1);
        assert!(!o.contains_key("disperse.shd-max-threads"));
        let dist = options(TuningProfile::Tuned, VolumeLayout::Distribute, &own);
        assert!(!dist.keys().any(|k| k.contains("shd-max-threads")));
        let ec = VolumeLayout::Disperse {
            data: 2,
            redundancy: 1,
        };
        let ec = options(TuningProfile::Tuned, ec, &own);
        assert_eq!(ec["disperse.shd-max-threads"], "4");
        assert!(!ec.contains_key("cluster.shd-max-threads"));
        assert_eq!(options(TuningProfile::GlusterDefaults, r3, &own).len(), 1);
        for opt in TUNED {
            assert!(opt.key.contains('.') && !opt.reason.is_empty());
        }
    }
}
