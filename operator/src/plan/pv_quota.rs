//! Who holds a volume's subdirectory PVs to their size: the bricks' own project quotas
//! where every brick's disk enforces them and a PV lives in one set, otherwise gluster's
//! quota. Decided once, when the volume is made or while it has no PV yet, and recorded as
//! the volume option the agents read (`gk_agent_proto::pv_quota`).

use gk_agent_proto::pv_quota::{GLUSTER, OPTION, PROJECT};
use gk_agent_proto::v1::{PvQuotaMoveResponse, Volume};
use gk_api::agents::AgentDisk;
use gk_api::crd::{PvQuotaEnforcement, PvQuotaStatus};

/// What status says, and the option to set now (None: leave the volume's as it is).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub status: PvQuotaStatus,
    pub set: Option<&'static str>,
    /// Moving from gluster's quota: the option says project while gluster's quota is still
    /// on (both enforce); the operator steps it on ([`move_verdict`]).
    pub moving: bool,
}

/// One node's disks, by the address gluster knows the node by.
pub type NodeDisks<'a> = (&'a str, &'a [AgentDisk]);

/// Status while a pool moves from gluster's quota (the progress is added to it).
pub const MOVING: &str = "moving to the bricks' project quotas: each PV's gluster limit is \
                          recorded as its size and every brick enforces it, with gluster's quota \
                          still on; gluster's quota goes off once every brick enforces every PV";

/// One node's answer to a move step, or why it gave none.
pub type MoveAnswer<'a> = (&'a str, Result<PvQuotaMoveResponse, String>);

/// What a move waits for before gluster's quota can go off; the status says it after
/// [`MOVING`]. Each clears by itself as the nodes take their steps; one that lasts names the
/// node (and its agent's own reason) to look at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoveWait {
    #[error("waiting for {node}'s agent to answer")]
    AgentDown { node: String },
    #[error("{node} did not take the step: {why}")]
    StepFailed { node: String, why: String },
    #[error("on {node}, {why}")]
    NotEnforced { node: String, why: String },
    #[error("{node}'s bricks enforce {enforced} of their {want} PV directories")]
    Short {
        node: String,
        enforced: u32,
        want: u32,
    },
}

/// Whether a move can finish (gluster's quota turned off): every node answered, and on each
/// every PV directory of every brick enforces its size. `Err` says what it waits for.
pub fn move_verdict(answers: &[MoveAnswer], down: &[String]) -> Result<(), MoveWait> {
    if let Some(node) = down.first() {
        return Err(MoveWait::AgentDown { node: node.clone() });
    }
    let pvs = answers
        .iter()
        .filter_map(|(_, a)| a.as_ref().ok().map(|a| a.pvs))
        .max()
        .unwrap_or(0);
    for (node, answer) in answers {
        let a = answer.as_ref().map_err(|why| MoveWait::StepFailed {
            node: node.to_string(),
            why: why.clone(),
        })?;
        if let Some(why) = a.not_enforced_here.first() {
            return Err(MoveWait::NotEnforced {
                node: node.to_string(),
                why: why.clone(),
            });
        }
        let want = pvs * a.bricks_here;
        if a.enforced_here < want {
            return Err(MoveWait::Short {
                node: node.to_string(),
                enforced: a.enforced_here,
                want,
            });
        }
    }
    Ok(())
}

/// What a user does to get project quotas, for the Gluster reasons.
const HOW: &str = "bricks on XFS mounted with prjquota (a kernel with CONFIG_XFS_QUOTA, as \
                   every distribution's has) give a new volume project quotas";

/// Decides for `v` (as gluster describes it) on nodes with `disks`. `adopted`: a volume
/// made outside the operator, whose settings it does not choose.
pub fn decide(v: &Volume, disks: &[NodeDisks], adopted: bool) -> Decision {
    let current = v.options.get(OPTION).map(String::as_str);
    let quota_on = v.options.get("features.quota").map(String::as_str) == Some("on");
    let why_not = why_not_projects(v, disks);
    let gluster = |reason: String, set| Decision {
        status: PvQuotaStatus {
            enforcement: PvQuotaEnforcement::Gluster,
            reason,
        },
        set,
        moving: false,
    };
    let project = |reason: String, set| Decision {
        status: PvQuotaStatus {
            enforcement: PvQuotaEnforcement::Project,
            reason,
        },
        set,
        moving: false,
    };
    let moving = |set| Decision {
        status: PvQuotaStatus {
            enforcement: PvQuotaEnforcement::Gluster,
            reason: MOVING.into(),
        },
        set,
        moving: true,
    };
    match current {
        Some(PROJECT) if quota_on => moving(None),
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
                "its option {OPTION} says gluster's quota (set by hand or by an earlier \
                 operator): it keeps it{}",
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
        // PVs were made with gluster's quota: moved once every brick's disk allows.
        None if quota_on => match why_not {
            None => moving(Some(PROJECT)),
            Some(w) => gluster(
                format!(
                    "PVs were made on it with gluster's quota, which it keeps until every \
                     brick's disk has project quotas; then it moves by itself. Now {w}"
                ),
                None,
            ),
        },
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

        // Quota on: PVs were made with it. On disks with project quotas they move: the option
        // is set while gluster's quota still enforces, and the move is stepped on.
        let on = [("features.quota", "on")];
        let d = decide(&volume(&THREE, 3, &on), &nodes, false);
        assert_eq!(
            (d.status.enforcement, d.set, d.moving),
            (PvQuotaEnforcement::Gluster, Some(PROJECT), true)
        );
        let d = decide(
            &volume(&THREE, 3, &[("features.quota", "on"), (OPTION, PROJECT)]),
            &nodes,
            false,
        );
        assert_eq!(
            (d.status.enforcement, d.set, d.moving),
            (PvQuotaEnforcement::Gluster, None, true)
        );
        // Without them, they keep gluster's quota, undecided.
        let bad = [disk("/b", false)];
        let without: Vec<NodeDisks> = vec![("a", &bad), ("b", &good), ("c", &good)];
        let d = decide(&volume(&THREE, 3, &on), &without, false);
        assert_eq!(
            (d.status.enforcement, d.set, d.moving),
            (PvQuotaEnforcement::Gluster, None, false)
        );
        assert!(
            d.status.reason.contains("moves by itself"),
            "{}",
            d.status.reason
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
    fn a_move_finishes_only_when_every_brick_of_every_node_enforces_every_pv() {
        let answer = |bricks, enforced, failed: &[&str]| PvQuotaMoveResponse {
            pvs: 4,
            bricks_here: bricks,
            enforced_here: enforced,
            not_enforced_here: failed.iter().map(|s| s.to_string()).collect(),
            gluster_quota_on: true,
        };
        let done = [
            ("a", Ok(answer(1, 4, &[]))),
            ("b", Ok(answer(2, 8, &[]))),
            ("c", Ok(answer(1, 4, &[]))),
        ];
        assert_eq!(move_verdict(&done, &[]), Ok(()));
        let e = move_verdict(&done, &["c".to_string()]).unwrap_err();
        assert_eq!(e, MoveWait::AgentDown { node: "c".into() });
        assert_eq!(e.to_string(), "waiting for c's agent to answer");
        let short = [("a", Ok(answer(1, 4, &[]))), ("b", Ok(answer(2, 5, &[])))];
        let e = move_verdict(&short, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "b's bricks enforce 5 of their 8 PV directories"
        );
        let failed = [(
            "a",
            Ok(answer(1, 3, &["/b/pool/1/pvc-1: xfs_quota failed"])),
        )];
        assert_eq!(
            move_verdict(&failed, &[]).unwrap_err().to_string(),
            "on a, /b/pool/1/pvc-1: xfs_quota failed"
        );
        let refused = [("a", Err("unavailable".to_string()))];
        assert_eq!(
            move_verdict(&refused, &[]).unwrap_err().to_string(),
            "a did not take the step: unavailable"
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
