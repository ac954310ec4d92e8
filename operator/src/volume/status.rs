//! A GlusterVolume's status and conditions, from what one reconcile observed of gluster.
//! Pure: `observe` gathers [`Observed`]; this decides what status says and what to do next.

use std::collections::BTreeMap;

use gk_agent_proto::v1::{HealInfoResponse, RejectedOption, Volume, VolumeStatusResponse};
use gk_api::crd::{BrickStatus, Capacity, GlusterVolumeStatus, MountInfo};
use gk_api::units::human_bytes;

use super::day2::state::Day2;
use super::day2::status as day2_status;
use crate::conditions::Desired;

/// What one reconcile read of an existing gluster volume.
pub struct Observed<'a> {
    /// The gluster volume name.
    pub name: &'a str,
    pub volume: &'a Volume,
    /// Gluster's brick status; None when it did not answer in time (it asks every peer's
    /// glusterd, and waits for one that dropped off the network until glusterd gives it up).
    pub bricks: Option<&'a VolumeStatusResponse>,
    /// Why gluster's brick status is missing when it answered with an error (a peer's lock
    /// held by a transaction that waits for a lost node, say) rather than not at all.
    pub status_error: Option<&'a str>,
    /// The status written before, for what gluster did not answer this time.
    pub previous: &'a GlusterVolumeStatus,
    /// Heal counts, for volumes that heal (replicate, arbiter, disperse) when gluster answered.
    pub heal: Option<&'a HealInfoResponse>,
    /// Storage node of each pool address (the cluster's last known peers and the live agents).
    pub nodes: &'a BTreeMap<String, String>,
    /// Zone of each storage node that has one (the cluster's peers).
    pub zones: &'a BTreeMap<String, String>,
    /// Pool addresses whose agent answers.
    pub live: &'a [String],
    /// Clients mount with gluster's TLS.
    pub tls: bool,
    pub day2: &'a Day2,
    /// Options gluster refused.
    pub rejected: &'a [RejectedOption],
}

/// What the reconcile does after writing status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// A brick process died on a node whose agent answers: start it again, then heal.
    RestartBricks,
    /// Entries wait for self-heal: kick it and look again soon.
    Heal,
    /// Data is moving (rebalance or remove-brick): look again soon.
    Migrating,
    /// Nothing to do until the next refresh.
    Refresh,
}

pub struct Outcome {
    /// The status, conditions still to be merged.
    pub status: GlusterVolumeStatus,
    pub conditions: Vec<Desired>,
    pub next: Next,
}

/// Volfile servers: every brick host once, in brick order.
fn mount_info(name: &str, vol: &Volume, tls: bool) -> Option<MountInfo> {
    let mut hosts: Vec<String> = Vec::new();
    for h in vol.bricks.iter().filter_map(|b| b.split_once(':')) {
        if !hosts.iter().any(|x| x == h.0) {
            hosts.push(h.0.to_string());
        }
    }
    hosts.split_first().map(|(first, rest)| MountInfo {
        volume: name.to_string(),
        volfile_server: first.clone(),
        backup_volfile_servers: rest.to_vec(),
        tls,
    })
}

pub fn compute(o: &Observed) -> Outcome {
    let (name, vol, st) = (o.name, o.volume, o.bricks);
    let bricks: Vec<BrickStatus> = vol
        .bricks
        .iter()
        .map(|b| {
            let (host, path) = b.split_once(':').unwrap_or((b.as_str(), ""));
            let h = o.heal.and_then(|h| h.bricks.iter().find(|x| &x.brick == b));
            let online = match st {
                Some(st) => st.bricks.iter().any(|s| &s.brick == b && s.online),
                // Unanswered: online only if its node's agent answers and it was online.
                None => {
                    o.live.iter().any(|l| l == host)
                        && o.previous
                            .bricks
                            .iter()
                            .any(|p| p.host == host && p.path == path && p.online)
                }
            };
            let node = o.nodes.get(host).cloned().unwrap_or_default();
            BrickStatus {
                zone: o.zones.get(&node).cloned(),
                node,
                host: host.to_string(),
                path: path.to_string(),
                online,
                heal_pending: h.map(|h| h.pending as i64),
                split_brain: h.map(|h| h.split_brain as i64),
            }
        })
        .collect();
    let online = bricks.iter().filter(|b| b.online).count();
    let total = bricks.len();
    let pending = o.heal.map(|h| h.pending_total as i64);
    let split = o.heal.map(|h| h.split_brain_total as i64);
    let waiting_heal = pending.unwrap_or(0);

    let (progress, day2_degraded) = day2_status::conditions(o.day2);
    let offline_list = || {
        bricks
            .iter()
            .filter(|b| !b.online)
            .map(|b| format!("{}:{}", b.host, b.path))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let unanswered = match o.status_error {
        Some(e) => format!("gluster's volume status of {name} failed ({e})"),
        None => format!("gluster's volume status of {name} did not answer in time"),
    };
    let degraded: Option<(&str, String)> = if st.is_none() && online < total {
        Some((
            "BricksUnreachable",
            format!(
                "{online} of {total} bricks reachable; the brick agents of {} do not answer and \
                 {unanswered} (a node off the network?); check those nodes and their network",
                offline_list()
            ),
        ))
    } else if st.is_none() {
        Some((
            "StatusUnanswered",
            format!(
                "{unanswered} although every brick agent answers; a glusterd may hold a \
                 transaction lock or not reach a peer; see the brick pods' glusterd logs"
            ),
        ))
    } else if online < total {
        Some((
            "BricksOffline",
            format!(
                "{online} of {total} bricks online; offline: {}",
                offline_list()
            ),
        ))
    } else if split.unwrap_or(0) > 0 {
        Some((
            "SplitBrain",
            format!(
                "{} entries in split-brain; resolve with `gluster volume heal {name} split-brain`",
                split.unwrap_or(0)
            ),
        ))
    } else if let Some((reason, msg)) = day2_degraded {
        Some((reason, msg))
    } else if waiting_heal > 0 {
        Some((
            "HealPending",
            format!("{waiting_heal} entries waiting for self-heal"),
        ))
    } else {
        None
    };
    // A volume serves while a majority of its bricks is online (gluster's quorum).
    let ready = vol.status == "Started"
        && online > 0
        && degraded
            .as_ref()
            .is_none_or(|(r, _)| !r.starts_with("Bricks") || online * 2 > total);
    let mut conditions = vec![if ready {
        Desired::new(
            "Ready",
            true,
            "Started",
            format!("volume {name} is started with {online}/{total} bricks online"),
        )
    } else {
        Desired::new(
            "Ready",
            false,
            "NotServing",
            format!(
                "volume {name}: {} with {online}/{total} bricks online",
                vol.status
            ),
        )
    }];
    conditions.push(match degraded {
        Some((reason, msg)) => Desired::new("Degraded", true, reason, msg),
        None => Desired::new("Degraded", false, "Healthy", ""),
    });
    conditions.push(match progress {
        Some(p) => p,
        // Self-heal filling bricks (after a replacement or a restart) is progress too.
        None if waiting_heal > 0 => Desired::new(
            "Progressing",
            true,
            "Healing",
            format!("{waiting_heal} entries waiting for self-heal"),
        ),
        None => Desired::new("Progressing", false, "Stable", ""),
    });
    conditions.push(if o.rejected.is_empty() {
        Desired::new("OptionsApplied", true, "Applied", "")
    } else {
        Desired::new(
            "OptionsApplied",
            false,
            "OptionsRejected",
            o.rejected
                .iter()
                .map(|r| format!("{}={}: {}", r.key, r.value, r.reason))
                .collect::<Vec<_>>()
                .join("; "),
        )
    });

    conditions.push(zone_condition(
        &bricks,
        crate::plan::layout_of(vol).set_size() as usize,
    ));

    let capacity = match st {
        Some(st) => {
            let (total_bytes, free_bytes) = gk_api::capacity::of_volume(vol, st);
            Some(Capacity {
                total_bytes: total_bytes as i64,
                used_bytes: total_bytes.saturating_sub(free_bytes) as i64,
                free_bytes: free_bytes as i64,
                total: human_bytes(total_bytes),
            })
        }
        None => o.previous.capacity.clone(),
    };
    let status = GlusterVolumeStatus {
        volume_id: Some(vol.id.clone()),
        bricks_summary: Some(format!("{online}/{total}")),
        heal_pending: pending,
        split_brain: split,
        capacity,
        mount: mount_info(name, vol, o.tls),
        retired_bricks: o.day2.retired.clone(),
        resize: o.day2.resize.clone(),
        bricks,
        ..Default::default()
    };
    // Restarted only on gluster's word, never on a guess.
    let dead_on_live_nodes = st.is_some() && !restart_on(&status.bricks, o.live).is_empty();
    let migrating = crate::plan::migrating(status.resize.as_ref());
    // A peer that missed the start's commit (its transaction timed out under load) still
    // holds the volume stopped, and every status call fails there while this peer calls it
    // Started; `volume start force` starts it on that peer too.
    let peer_not_started = o.status_error.is_some_and(|e| e.contains("is not started"));
    let next = if dead_on_live_nodes || peer_not_started {
        Next::RestartBricks
    } else if waiting_heal > 0 {
        Next::Heal
    } else if migrating {
        Next::Migrating
    } else {
        Next::Refresh
    };
    Outcome {
        status,
        conditions,
        next,
    }
}

/// The live nodes (pool addresses) holding an offline brick: each kills its hung brick
/// processes before the forced start (see the agent's `hung`).
pub fn restart_on(bricks: &[BrickStatus], live: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = bricks
        .iter()
        .filter(|b| !b.online && live.contains(&b.host))
        .map(|b| b.host.clone())
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// ZonesShared: True while some replica or disperse set has two bricks in one zone, so
/// losing that zone takes the set down (placed so with spec.allowSharedZones, adopted, or a
/// replacement that landed there).
fn zone_condition(bricks: &[BrickStatus], set: usize) -> Desired {
    if set < 2 {
        return Desired::new(
            "ZonesShared",
            false,
            "NoSets",
            "the volume has no replica or disperse sets",
        );
    }
    if bricks.iter().all(|b| b.zone.is_none()) {
        return Desired::new(
            "ZonesShared",
            false,
            "NoZones",
            "no brick's node carries the cluster's zone label; bricks of a set are on \
             distinct nodes",
        );
    }
    let zones: Vec<Option<&str>> = bricks.iter().map(|b| b.zone.as_deref()).collect();
    let shared = crate::plan::zones::shared_sets(&zones, set);
    if shared.is_empty() {
        return Desired::new(
            "ZonesShared",
            false,
            "Spread",
            "every set's bricks are in distinct zones",
        );
    }
    let list = shared
        .iter()
        .map(|(j, z, n)| format!("set {j} has {n} bricks in zone {z}"))
        .collect::<Vec<_>>()
        .join("; ");
    Desired::new(
        "ZonesShared",
        true,
        "SetsShareZone",
        format!(
            "{list}: losing such a zone takes its set down. Add storage nodes in other zones \
             and move bricks there with spec.replacements on the GlusterCluster"
        ),
    )
}

/// Conditions while the volume waits for something before it can be created.
pub fn waiting(reason: &str, message: String) -> Vec<Desired> {
    vec![
        Desired::new("Ready", false, reason, message.clone()),
        Desired::new("Progressing", true, reason, message),
        Desired::new("Degraded", false, "NotCreated", ""),
    ]
}

/// Conditions of a spec the operator cannot act on: nothing progresses until it changes.
pub fn invalid_spec(message: String) -> Vec<Desired> {
    vec![
        Desired::new("Ready", false, "InvalidSpec", message.clone()),
        Desired::new("Progressing", false, "InvalidSpec", message),
    ]
}

/// Conditions of a volume whose access control gluster refused: never Ready.
pub fn access_not_enforced(message: String) -> Vec<Desired> {
    vec![
        Desired::new("Ready", false, "AccessNotEnforced", message.clone()),
        Desired::new("Degraded", true, "AccessNotEnforced", message),
    ]
}

/// Conditions while deletion waits for the PersistentVolumes that use the volume.
pub fn deletion_blocked(pvs: &[String]) -> (String, Vec<Desired>) {
    let msg = format!(
        "{} PersistentVolume(s) still use this volume: {}; delete them first",
        pvs.len(),
        pvs.join(", ")
    );
    let d = vec![
        Desired::new("Ready", false, "DeletionBlocked", msg.clone()),
        Desired::new("Degraded", false, "Healthy", ""),
        Desired::new("Progressing", false, "DeletionBlocked", msg.clone()),
    ];
    (msg, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_agent_proto::v1::{BrickHeal, BrickStatus as AgentBrick};
    use gk_api::crd::{ResizeOperation, ResizeStatus};

    fn volume(bricks: usize, replica: u32) -> Volume {
        Volume {
            name: "ns-v".into(),
            id: "id-1".into(),
            status: "Started".into(),
            replica_count: replica,
            bricks: (0..bricks).map(|i| format!("h{}:/b/{i}", i % 3)).collect(),
            ..Default::default()
        }
    }

    fn bricks(vol: &Volume, online: &[bool]) -> VolumeStatusResponse {
        VolumeStatusResponse {
            bricks: vol
                .bricks
                .iter()
                .zip(online)
                .map(|(b, on)| AgentBrick {
                    brick: b.clone(),
                    online: *on,
                    size_total_bytes: (10 << 30) + 99,
                    size_free_bytes: 6 << 30,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn heal(pending: u64, split: u64) -> HealInfoResponse {
        HealInfoResponse {
            pending_total: pending,
            split_brain_total: split,
            bricks: vec![BrickHeal {
                brick: "h0:/b/0".into(),
                pending,
                split_brain: split,
                ..Default::default()
            }],
        }
    }

    struct Case {
        vol: Volume,
        st: VolumeStatusResponse,
        heal: Option<HealInfoResponse>,
        day2: Day2,
        rejected: Vec<RejectedOption>,
        live: Vec<String>,
        answered: bool,
        status_error: Option<String>,
        previous: GlusterVolumeStatus,
        zones: BTreeMap<String, String>,
    }

    impl Case {
        fn new(online: &[bool]) -> Self {
            let vol = volume(online.len(), 3);
            let st = bricks(&vol, online);
            Case {
                vol,
                st,
                heal: Some(heal(0, 0)),
                day2: Day2::default(),
                rejected: vec![],
                live: vec!["h0".into(), "h1".into(), "h2".into()],
                answered: true,
                status_error: None,
                previous: GlusterVolumeStatus::default(),
                zones: BTreeMap::new(),
            }
        }

        fn run(&self) -> Outcome {
            let nodes = BTreeMap::from([
                ("h0".to_string(), "n0".to_string()),
                ("h1".to_string(), "n1".to_string()),
            ]);
            compute(&Observed {
                name: "ns-v",
                volume: &self.vol,
                bricks: self.answered.then_some(&self.st),
                status_error: self.status_error.as_deref(),
                previous: &self.previous,
                heal: self.heal.as_ref(),
                nodes: &nodes,
                zones: &self.zones,
                live: &self.live,
                tls: true,
                day2: &self.day2,
                rejected: &self.rejected,
            })
        }
    }

    fn get<'a>(o: &'a Outcome, t: &str) -> &'a Desired {
        o.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    fn summary(o: &Outcome) -> [(bool, String); 3] {
        ["Ready", "Degraded", "Progressing"].map(|t| (get(o, t).status, get(o, t).reason.clone()))
    }

    #[test]
    fn bricks_restart_on_the_live_nodes_that_hold_an_offline_one() {
        let b = |host: &str, online: bool| BrickStatus {
            node: host.into(),
            host: host.into(),
            path: format!("/b/{host}"),
            online,
            heal_pending: None,
            split_brain: None,
            zone: None,
        };
        let bricks = [
            b("n1", true),
            b("n2", false),
            b("n3", false),
            b("n2", false),
        ];
        let live = ["n1".to_string(), "n2".to_string()];
        // n3 does not answer: its bricks wait for it; n2 is named once.
        assert_eq!(restart_on(&bricks, &live), ["n2"]);
        assert!(restart_on(&bricks[..1], &live).is_empty());
    }

    #[test]
    fn a_healthy_volume_is_ready_stable_with_capacity_and_mount_servers() {
        let o = Case::new(&[true, true, true]).run();
        assert_eq!(
            summary(&o),
            [
                (true, "Started".into()),
                (false, "Healthy".into()),
                (false, "Stable".into())
            ]
        );
        assert_eq!(get(&o, "OptionsApplied").reason, "Applied");
        assert_eq!(o.next, Next::Refresh);
        let s = &o.status;
        assert_eq!(s.bricks_summary.as_deref(), Some("3/3"));
        assert_eq!(s.bricks[0].node, "n0");
        assert_eq!(s.bricks[2].node, "", "an address no peer had stays unnamed");
        // One replica set: the smallest brick, once, at MiB grain.
        let cap = s.capacity.as_ref().unwrap();
        assert_eq!((cap.total_bytes, cap.free_bytes), (10 << 30, 6 << 30));
        let m = s.mount.as_ref().unwrap();
        assert_eq!(m.volfile_server, "h0");
        assert_eq!(m.backup_volfile_servers, ["h1", "h2"]);
        assert!(m.tls);
    }

    #[test]
    fn bricks_show_their_zone_and_a_set_in_one_zone_is_named() {
        let mut c = Case::new(&[true, true, true]);
        let o = c.run();
        assert_eq!(get(&o, "ZonesShared").reason, "NoZones");
        c.zones = BTreeMap::from([("n0".to_string(), "a".to_string())]);
        let o = c.run();
        assert_eq!(o.status.bricks[0].zone.as_deref(), Some("a"));
        assert_eq!(o.status.bricks[1].zone, None);
        assert_eq!(get(&o, "ZonesShared").reason, "Spread");
        c.zones.insert("n1".into(), "a".into());
        let o = c.run();
        let z = get(&o, "ZonesShared");
        assert!(z.status);
        assert!(
            z.message.contains("set 0 has 2 bricks in zone a"),
            "{}",
            z.message
        );
    }

    #[test]
    fn one_brick_of_three_down_is_degraded_but_serving_and_restarted() {
        let o = Case::new(&[true, false, true]).run();
        assert_eq!(
            summary(&o),
            [
                (true, "Started".into()),
                (true, "BricksOffline".into()),
                (false, "Stable".into())
            ]
        );
        assert!(get(&o, "Degraded").message.contains("offline: h1:/b/1"));
        assert_eq!(o.next, Next::RestartBricks);
    }

    #[test]
    fn a_minority_of_bricks_online_does_not_serve() {
        let mut c = Case::new(&[true, false, false]);
        c.live = vec!["h0".into()];
        let o = c.run();
        assert_eq!(
            summary(&o)[..2],
            [(false, "NotServing".into()), (true, "BricksOffline".into())]
        );
        // The dead bricks' nodes do not answer: nothing to restart there.
        assert_eq!(o.next, Next::Refresh);
    }

    #[test]
    fn a_node_off_the_network_is_degraded_from_its_silent_agent() {
        // gluster's status waits for the lost peer; what is known: h1's agent is silent.
        let mut c = Case::new(&[true, true, true]);
        c.previous = c.run().status;
        c.answered = false;
        c.heal = None;
        c.live = vec!["h0".into(), "h2".into()];
        let o = c.run();
        assert_eq!(
            summary(&o)[..2],
            [(true, "Started".into()), (true, "BricksUnreachable".into())]
        );
        assert!(get(&o, "Degraded").message.contains("h1:/b/1"));
        assert_eq!(o.status.bricks_summary.as_deref(), Some("2/3"));
        assert_eq!(o.status.capacity, c.previous.capacity, "capacity is kept");
        assert_eq!(o.next, Next::Refresh, "nothing is restarted on a guess");
        // Every agent answers but gluster does not: said, not hidden.
        c.live = vec!["h0".into(), "h1".into(), "h2".into()];
        let o = c.run();
        assert_eq!(summary(&o)[1], (true, "StatusUnanswered".into()));
        // Two of three unreachable: not serving.
        c.live = vec!["h0".into()];
        assert_eq!(summary(&c.run())[0], (false, "NotServing".into()));
    }

    #[test]
    fn a_failed_status_is_judged_like_an_unanswered_one_and_says_why() {
        // A peer's lock held by a transaction waiting for the lost node: gluster refuses
        // at once instead of waiting; the silent agent still decides.
        let mut c = Case::new(&[true, true, true]);
        c.previous = c.run().status;
        c.answered = false;
        c.heal = None;
        c.status_error = Some("Locking failed on h0. Please check log file for details.".into());
        c.live = vec!["h0".into(), "h2".into()];
        let o = c.run();
        assert_eq!(summary(&o)[1], (true, "BricksUnreachable".into()));
        let msg = &get(&o, "Degraded").message;
        assert!(
            msg.contains("h1:/b/1") && msg.contains("failed (Locking failed on h0"),
            "{msg}"
        );
        c.live = vec!["h0".into(), "h1".into(), "h2".into()];
        let o = c.run();
        assert_eq!(summary(&o)[1], (true, "StatusUnanswered".into()));
        assert!(get(&o, "Degraded").message.contains("failed (Locking"));
    }

    #[test]
    fn a_peer_that_missed_the_start_gets_its_bricks_started() {
        // Seen with 50 volumes made at once on 2 cores: `volume start` timed out on one peer,
        // which kept the volume stopped; status failed there for 20 minutes.
        let mut c = Case::new(&[true, true, true]);
        c.answered = false;
        c.heal = None;
        c.status_error =
            Some("Staging failed on 10.213.0.2. Error: Volume v is not started".into());
        let o = c.run();
        assert_eq!(o.next, Next::RestartBricks);
        assert!(get(&o, "Degraded").message.contains("is not started"));
        c.status_error = Some("Locking failed on h0. Please check log file for details.".into());
        assert_eq!(c.run().next, Next::Refresh);
    }

    #[test]
    fn a_stopped_volume_is_not_ready() {
        let mut c = Case::new(&[true, true, true]);
        c.vol.status = "Stopped".into();
        let o = c.run();
        assert_eq!(summary(&o)[0], (false, "NotServing".into()));
        assert!(get(&o, "Ready").message.contains("Stopped"));
    }

    #[test]
    fn pending_heal_is_degraded_and_progressing_then_healed() {
        let mut c = Case::new(&[true, true, true]);
        c.heal = Some(heal(4, 0));
        let o = c.run();
        assert_eq!(
            summary(&o),
            [
                (true, "Started".into()),
                (true, "HealPending".into()),
                (true, "Healing".into())
            ]
        );
        assert_eq!(o.status.heal_pending, Some(4));
        assert_eq!(o.status.bricks[0].heal_pending, Some(4));
        assert_eq!(o.next, Next::Heal);
    }

    #[test]
    fn split_brain_is_degraded_with_what_to_do() {
        let mut c = Case::new(&[true, true, true]);
        c.heal = Some(heal(0, 2));
        let o = c.run();
        assert_eq!(summary(&o)[1], (true, "SplitBrain".into()));
        assert!(get(&o, "Degraded")
            .message
            .contains("heal ns-v split-brain"));
    }

    #[test]
    fn resizes_progress_and_a_failed_rebalance_is_degraded() {
        let mut c = Case::new(&[true, true, true]);
        let resize = |phase| ResizeStatus {
            operation: ResizeOperation::Expand,
            phase,
            bricks: vec![],
            files_moved: 2,
            bytes_moved: 2 << 20,
            failures: 0,
            skipped: 0,
            message: Some("h0: in progress".into()),
            reruns: 0,
            progressed_at: None,
            checks: 0,
            run_started_at: None,
            run_replaces: None,
        };
        c.day2.resize = Some(resize(gk_api::crd::MigrationPhase::InProgress));
        let o = c.run();
        assert_eq!(summary(&o)[2], (true, "Expanding".into()));
        assert_eq!(o.next, Next::Migrating);
        c.day2.resize = Some(resize(gk_api::crd::MigrationPhase::Failed));
        let o = c.run();
        assert_eq!(summary(&o)[1], (true, "RebalanceFailed".into()));
        assert_eq!(summary(&o)[2], (false, "RebalanceFailed".into()));
        c.day2.resize = None;
        c.day2.blocked = Some(("ReplacementBlocked", "waiting for n4".into()));
        let o = c.run();
        assert_eq!(summary(&o)[2], (false, "ReplacementBlocked".into()));
        assert!(!get(&o, "Degraded").status);
    }

    #[test]
    fn rejected_options_are_named() {
        let mut c = Case::new(&[true, true, true]);
        c.rejected = vec![RejectedOption {
            key: "performance.nope".into(),
            value: "1".into(),
            reason: "not a valid option".into(),
        }];
        let o = c.run();
        let applied = get(&o, "OptionsApplied");
        assert!(!applied.status);
        assert_eq!(applied.message, "performance.nope=1: not a valid option");
    }

    #[test]
    fn disperse_capacity_counts_data_bricks_per_set() {
        let mut c = Case::new(&[true; 6]);
        c.vol.replica_count = 1;
        c.vol.disperse_count = 3;
        c.vol.redundancy_count = 1;
        c.heal = None;
        let o = c.run();
        // Two sets of 2+1, each holding two bricks' worth.
        assert_eq!(o.status.capacity.as_ref().unwrap().total, "40.0Gi");
        assert_eq!(o.status.heal_pending, None);
    }

    #[test]
    fn outcomes_before_a_volume_exists() {
        let d = waiting("WaitingForNodes", "n3: brick pod not running yet".into());
        assert_eq!(
            d.iter()
                .map(|c| (c.type_.as_str(), c.status, c.reason.as_str()))
                .collect::<Vec<_>>(),
            [
                ("Ready", false, "WaitingForNodes"),
                ("Progressing", true, "WaitingForNodes"),
                ("Degraded", false, "NotCreated")
            ]
        );
        let d = invalid_spec("spec.replica: is required".into());
        assert!(d.iter().all(|c| !c.status && c.reason == "InvalidSpec"));
        let d = access_not_enforced("auth.ssl-allow refused".into());
        assert_eq!((d[1].type_.as_str(), d[1].status), ("Degraded", true));
        let (msg, d) = deletion_blocked(&["pv-1".into()]);
        assert!(msg.starts_with("1 PersistentVolume(s) still use this volume: pv-1"));
        assert_eq!(d[0].reason, "DeletionBlocked");
    }
}
