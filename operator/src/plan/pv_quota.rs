//! Who holds a volume's subdirectory PVs to their size: the bricks' own project quotas
//! where every brick's disk enforces them and a PV lives in one set, otherwise gluster's
//! quota. Decided once, when the volume is made or while it has no PV yet, and recorded as
//! the volume option the agents read (`gk_agent_proto::pv_quota`).

use gk_agent_proto::pv_quota::{GLUSTER, OPTION, PROJECT};
use gk_agent_proto::v1::Volume;
use gk_api::agents::AgentDisk;
use gk_api::crd::{PvQuotaEnforcement, PvQuotaStatus};

/// What status says, and the option to set now (None: leave the volume's as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub status: PvQuotaStatus,
    pub set: Option<&'static str>,
}

/// One node's disks, by the address gluster knows the node by.
pub type NodeDisks<'a> = (&'a str, &'a [AgentDisk]);

/// What a user does to get project quotas, for the Gluster reasons.
const HOW: &str = "bricks on XFS mounted with prjquota (a kernel with CONFIG_XFS_QUOTA, as \
                   every distribution's has) give a new volume project quotas";

/// Decides for `v` (as gluster describes it) on nodes with `disks`. `adopted`: a volume
/// made outside the operator, whose settings it does not choose.
pub fn decide(v: &Volume, disks: &[NodeDisks], adopted: bool) -> Decision {
    let current = v.options.get(OPTION).map(String::as_str);
    let why_not = why_not_projects(v, disks);
    let gluster = |reason: String, set| Decision {
        status: PvQuotaStatus {
            enforcement: PvQuotaEnforcement::Gluster,
            reason,
        },
        set,
    };
    let project = |reason: String, set| Decision {
        status: PvQuotaStatus {
            enforcement: PvQuotaEnforcement::Project,
            reason,
        },
        set,
    };
    match current {
        Some(PROJECT) => project(
            match why_not {
                None => "every brick's disk enforces project quotas; gluster's quota is off".into(),
                Some(w) => format!(
                    "chosen when the volume was made, but now {w}: PV directories on that brick \
                     are not limited there until its disk is mounted with prjquota again"
                ),
            },
            None,
        ),
        Some(GLUSTER) => gluster(
            format!(
                "PVs were made on it with gluster's quota, which it keeps (a pool with PVs is \
                 not moved automatically){}",
                why_not
                    .map(|w| format!("; besides, {w}"))
                    .unwrap_or_default()
            ),
            None,
        ),
        Some(other) => gluster(
            format!(
                "its option {OPTION} is {other:?}, which the agents do not know: gluster's quota"
            ),
            None,
        ),
        None if adopted => gluster(
            "a volume made outside the operator keeps gluster's quota".into(),
            None,
        ),
        None if v.options.get("features.quota").map(String::as_str) == Some("on") => gluster(
            "PVs were made on it with gluster's quota before the bricks' project quotas \
             were used; it keeps gluster's quota (a pool with PVs is not moved automatically)"
                .into(),
            Some(GLUSTER),
        ),
        None => match why_not {
            None => project(
                "every brick's disk enforces project quotas; gluster's quota is off".into(),
                Some(PROJECT),
            ),
            // Left undecided: while it has no PV, the volume moves once its disks allow.
            Some(w) => gluster(format!("{w}; {HOW}"), None),
        },
    }
}

/// Why `v`, sized by project quotas, may not grow by `adding` bricks: past one set, no
/// per-brick limit holds a PV at its size (see [`why_not_projects`]), and the agents would
/// stop enforcing its PVs. None when it may.
pub fn refuses_growth(v: &Volume, adding: usize) -> Option<String> {
    if v.options.get(OPTION).map(String::as_str) != Some(PROJECT) {
        return None;
    }
    let set = gk_api::capacity::layout_of(v).set_size().max(1) as usize;
    let sets = (v.bricks.len() + adding).div_ceil(set);
    (sets > 1).then(|| {
        format!(
            "the volume's PVs are sized by the bricks' project quotas, which hold a PV at its \
             size only within one set; growing to {sets} sets would leave them unlimited. \
             Make a new pool volume for more PVs, or keep its brickCount/size"
        )
    })
}

/// Why the bricks of `v` cannot hold its PVs to their size themselves; None when they can.
fn why_not_projects(v: &Volume, disks: &[NodeDisks]) -> Option<String> {
    let set = gk_api::capacity::layout_of(v).set_size().max(1) as usize;
    let sets = v.bricks.len().div_ceil(set);
    if sets > 1 {
        return Some(format!(
            "the volume has {sets} sets: a directory's files spread over them by name hash, so \
             no per-brick limit holds a PV at its size"
        ));
    }
    let mut refused = v.bricks.iter().filter_map(|b| {
        let (host, path) = b.split_once(':')?;
        let why = match disks.iter().find(|(a, _)| *a == host) {
            None => format!("the agent of {host} did not answer"),
            Some((_, node)) => match node
                .iter()
                .filter(|d| std::path::Path::new(path).starts_with(&d.brick_root))
                .max_by_key(|d| d.brick_root.len())
            {
                None => "it is on no disk its node's agent reports".into(),
                Some(d) => match &d.project_quotas {
                    Ok(()) => return None,
                    Err(why) => why.clone(),
                },
            },
        };
        Some(format!("brick {b}: {why}"))
    });
    let first = refused.next()?;
    let more = refused.count();
    Some(if more > 0 {
        format!("{first} (and {more} more bricks)")
    } else {
        first
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(bricks: &[&str], replica: u32, options: &[(&str, &str)]) -> Volume {
        Volume {
            name: "pool".into(),
            status: "Started".into(),
            replica_count: replica,
            bricks: bricks.iter().map(|b| b.to_string()).collect(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn disk(root: &str, ok: bool) -> AgentDisk {
        AgentDisk {
            brick_root: root.into(),
            total_bytes: 1 << 30,
            free_bytes: 1 << 30,
            project_quotas: if ok {
                Ok(())
            } else {
                Err(format!(
                    "{root} is on xfs at {root}, not mounted with project quotas"
                ))
            },
        }
    }

    const THREE: [&str; 3] = ["a:/b/pool/1", "b:/b/pool/1", "c:/b/pool/1"];

    #[test]
    fn a_new_volume_on_disks_with_project_quotas_takes_them() {
        let good = [disk("/b", true)];
        let nodes: Vec<NodeDisks> = vec![("a", &good), ("b", &good), ("c", &good)];
        let d = decide(&volume(&THREE, 3, &[]), &nodes, false);
        assert_eq!(d.status.enforcement, PvQuotaEnforcement::Project);
        assert_eq!(d.set, Some(PROJECT));
        // Once chosen it stays, and nothing is set again.
        let d = decide(&volume(&THREE, 3, &[(OPTION, PROJECT)]), &nodes, false);
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Project, None)
        );
    }

    #[test]
    fn one_disk_without_them_keeps_gluster_and_says_which_and_how() {
        let good = [disk("/b", true)];
        let bad = [disk("/b", false)];
        let nodes: Vec<NodeDisks> = vec![("a", &good), ("b", &bad), ("c", &good)];
        let d = decide(&volume(&THREE, 3, &[]), &nodes, false);
        assert_eq!(d.status.enforcement, PvQuotaEnforcement::Gluster);
        // Undecided: the volume may still move while it has no PV.
        assert_eq!(d.set, None);
        assert!(
            d.status
                .reason
                .starts_with("brick b:/b/pool/1: /b is on xfs"),
            "{}",
            d.status.reason
        );
        assert!(d.status.reason.contains("prjquota"), "{}", d.status.reason);
        // A node whose agent did not answer cannot be vouched for.
        let two: Vec<NodeDisks> = vec![("a", &good), ("b", &good)];
        let d = decide(&volume(&THREE, 3, &[]), &two, false);
        assert!(
            d.status.reason.contains("agent of c did not answer"),
            "{}",
            d.status.reason
        );
        let nodes: Vec<NodeDisks> = vec![("a", &bad), ("b", &bad), ("c", &bad)];
        let d = decide(&volume(&THREE, 3, &[]), &nodes, false);
        assert!(
            d.status.reason.contains("(and 2 more bricks)"),
            "{}",
            d.status.reason
        );
    }

    #[test]
    fn several_sets_pools_with_pvs_and_adopted_volumes_keep_gluster() {
        let good = [disk("/b", true)];
        let nodes: Vec<NodeDisks> = vec![("a", &good), ("b", &good), ("c", &good)];
        let six = [THREE, ["a:/b/pool/2", "b:/b/pool/2", "c:/b/pool/2"]].concat();
        let d = decide(&volume(&six, 3, &[]), &nodes, false);
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Gluster, None)
        );
        assert!(d.status.reason.contains("2 sets"), "{}", d.status.reason);

        // Quota on: PVs were made with it. Recorded, so it never flips under them.
        let d = decide(
            &volume(&THREE, 3, &[("features.quota", "on")]),
            &nodes,
            false,
        );
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Gluster, Some(GLUSTER))
        );
        let d = decide(&volume(&THREE, 3, &[(OPTION, GLUSTER)]), &nodes, false);
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Gluster, None)
        );

        let d = decide(&volume(&THREE, 3, &[]), &nodes, true);
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Gluster, None)
        );
    }

    #[test]
    fn a_project_volume_whose_disk_lost_them_says_so() {
        let good = [disk("/b", true)];
        let bad = [disk("/b", false)];
        let nodes: Vec<NodeDisks> = vec![("a", &good), ("b", &good), ("c", &bad)];
        let d = decide(&volume(&THREE, 3, &[(OPTION, PROJECT)]), &nodes, false);
        assert_eq!(
            (d.status.enforcement, d.set),
            (PvQuotaEnforcement::Project, None)
        );
        assert!(
            d.status.reason.contains("brick c:/b/pool/1"),
            "{}",
            d.status.reason
        );
    }

    #[test]
    fn a_volume_sized_by_projects_does_not_grow_past_one_set() {
        let v = volume(&THREE, 3, &[(OPTION, PROJECT)]);
        let why = refuses_growth(&v, 3).unwrap();
        assert!(why.contains("2 sets"), "{why}");
        assert_eq!(refuses_growth(&v, 0), None);
        assert_eq!(refuses_growth(&volume(&THREE, 3, &[]), 3), None);
        assert_eq!(
            refuses_growth(&volume(&THREE, 3, &[(OPTION, GLUSTER)]), 3),
            None
        );
    }

    #[test]
    fn the_deepest_disk_holding_a_brick_decides() {
        let disks = [disk("/b", false), disk("/b/second", true)];
        let nodes: Vec<NodeDisks> = vec![("a", &disks)];
        let d = decide(&volume(&["a:/b/second/pool/1"], 1, &[]), &nodes, false);
        assert_eq!(d.status.enforcement, PvQuotaEnforcement::Project);
        let d = decide(&volume(&["a:/b/pool/1"], 1, &[]), &nodes, false);
        assert_eq!(d.status.enforcement, PvQuotaEnforcement::Gluster);
    }
}
