//! A GlusterCluster's status and conditions, from what one reconcile observed. Pure: the
//! reconcile gathers [`Observed`], this decides what status says.

use gk_agent_proto::v1::Peer;
use gk_api::agents::{describe_down, NodeDown};
use gk_api::crd::{Capacity, GlusterClusterStatus, GlusterVolume, PeerStatus};
use gk_api::units::{human_bytes, round_mib};

use super::pool::same_host;
use super::rollout::Rollout;
use crate::conditions::Desired;

/// A node whose agent answered, as status needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSeen {
    pub node: String,
    pub address: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// The node's zone label, when its Node has one.
    pub zone: Option<String>,
    /// The disks its agent reports.
    pub disks: usize,
}

/// What one reconcile of a GlusterCluster observed.
#[derive(Debug, Clone, Default)]
pub struct Observed<'a> {
    /// Storage nodes in the spec.
    pub nodes: usize,
    /// Nodes whose agent answered, the pool's anchor first.
    pub up: Vec<NodeSeen>,
    pub down: &'a [NodeDown],
    /// The anchor's peers, as its glusterd lists them.
    pub anchor_peers: &'a [Peer],
    pub rollout: Rollout,
    /// Why removed nodes have not left yet, one message each.
    pub retiring: &'a [String],
    /// Removed nodes still in the pool.
    pub still_in_pool: &'a [String],
    /// The GlusterVolumes on this cluster.
    pub volumes: &'a [GlusterVolume],
}

/// The status (conditions still to be merged) and the desired conditions.
pub fn compute(old: &GlusterClusterStatus, o: &Observed) -> (GlusterClusterStatus, Vec<Desired>) {
    let mut peers: Vec<PeerStatus> =
        o.up.iter()
            .enumerate()
            .map(|(i, a)| {
                let seen = o
                    .anchor_peers
                    .iter()
                    .find(|p| same_host(&p.hostname, &a.address));
                PeerStatus {
                    node: a.node.clone(),
                    address: a.address.clone(),
                    zone: a.zone.clone(),
                    disks: Some(a.disks as i32),
                    // The anchor is trivially in its own pool.
                    connected: i == 0 || seen.is_some_and(|p| p.connected),
                    state: if i == 0 {
                        Some("Local".into())
                    } else {
                        seen.map(|p| p.state.clone())
                    },
                }
            })
            .collect();
    // A node that stopped answering keeps its last known address: its bricks are named by
    // it, and replacing them needs it.
    for d in o.down {
        if let Some(known) = old.peers.iter().find(|p| p.node == d.node) {
            peers.push(PeerStatus {
                connected: false,
                state: Some("Unreachable".into()),
                ..known.clone()
            });
        }
    }
    let total = o.nodes;
    let in_pool = peers.iter().filter(|p| p.connected).count();
    let ready = in_pool == total;
    // A node on its way out stays listed while it is still in the pool: its address is how
    // it leaves if it stops answering.
    for node in o.still_in_pool {
        if let Some(known) = old.peers.iter().find(|p| &p.node == node) {
            let seen = o
                .anchor_peers
                .iter()
                .find(|p| same_host(&p.hostname, &known.address));
            peers.push(PeerStatus {
                connected: seen.is_some_and(|p| p.connected),
                state: Some(seen.map_or("Unreachable".into(), |p| p.state.clone())),
                ..known.clone()
            });
        }
    }

    let mut desired = vec![if ready {
        Desired::new(
            "Ready",
            true,
            "PoolFormed",
            format!("all {total} storage nodes are connected in the trusted pool"),
        )
    } else {
        Desired::new(
            "Ready",
            false,
            "PoolIncomplete",
            format!(
                "{in_pool} of {total} storage nodes in the pool; {}",
                describe_down(o.down)
            ),
        )
    }];
    let (progressing, reason, message) = match (&o.rollout.waiting, ready) {
        (Some(w), _) => (true, "RollingUpdate", w.clone()),
        (None, false) => (true, "FormingPool", String::new()),
        (None, true) if !o.retiring.is_empty() => (true, "RetiringNodes", o.retiring.join("; ")),
        (None, true) => (false, "Stable", String::new()),
    };
    desired.push(Desired::new("Progressing", progressing, reason, message));
    // Before the pool first formed, a silent node is still coming up, not unreachable; a
    // brick pod that cannot run as it is (unschedulable, unpullable, failing) needs a person
    // either way.
    let unreachable = !o.down.is_empty() && old.peers.len() >= total;
    let stuck: Vec<NodeDown> = o.down.iter().filter(|d| d.stuck).cloned().collect();
    desired.push(match (&o.rollout.stalled, unreachable) {
        (Some(msg), _) => Desired::new("Degraded", true, "RolloutStalled", msg.clone()),
        (None, _) if !stuck.is_empty() => Desired::new(
            "Degraded",
            true,
            "BrickPodsFailing",
            format!(
                "{}; fix the GlusterCluster spec (image, tolerations, resources) or the node",
                describe_down(&stuck)
            ),
        ),
        (None, true) => Desired::new("Degraded", true, "NodeUnreachable", describe_down(o.down)),
        (None, false) => Desired::new("Degraded", false, "Healthy", ""),
    });

    // Bricks across this cluster's volumes, as their own status last saw them.
    let (mut bricks_online, mut bricks_total) = (0i32, 0i32);
    for v in o.volumes {
        for b in v.status.iter().flat_map(|s| &s.bricks) {
            bricks_total += 1;
            bricks_online += i32::from(b.online);
        }
    }
    // Raw capacity of the node-local storage that answered.
    let raw_total: u64 = o.up.iter().map(|a| round_mib(a.total_bytes)).sum();
    let raw_free: u64 = o.up.iter().map(|a| round_mib(a.free_bytes)).sum();
    let status = GlusterClusterStatus {
        observed_generation: old.observed_generation,
        conditions: old.conditions.clone(),
        peers,
        nodes_summary: Some(format!("{in_pool}/{total}")),
        bricks_online: Some(bricks_online),
        bricks_total: Some(bricks_total),
        bricks_summary: Some(format!("{bricks_online}/{bricks_total}")),
        capacity: (!o.up.is_empty()).then(|| Capacity {
            total_bytes: raw_total as i64,
            used_bytes: raw_total.saturating_sub(raw_free) as i64,
            free_bytes: raw_free as i64,
            total: human_bytes(raw_total),
        }),
        rollout: o.rollout.status.clone(),
    };
    (status, desired)
}

/// The conditions while deletion waits for the volumes still on the cluster.
pub fn deletion_blocked(volumes: &[String]) -> (String, Vec<Desired>) {
    let msg = format!(
        "{} GlusterVolume(s) still live on this cluster: {}; delete them first",
        volumes.len(),
        volumes.join(", ")
    );
    let d = vec![
        Desired::new("Ready", false, "DeletionBlocked", msg.clone()),
        Desired::new("Progressing", false, "DeletionBlocked", msg.clone()),
        Desired::new("Degraded", false, "Healthy", ""),
    ];
    (msg, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(i: u8) -> NodeSeen {
        NodeSeen {
            node: format!("n{i}"),
            address: format!("n{i}.bricks.ns.svc"),
            total_bytes: (10 << 30) + 12345,
            free_bytes: 4 << 30,
            zone: None,
            disks: 1,
        }
    }

    fn peer(i: u8, connected: bool) -> Peer {
        Peer {
            hostname: format!("n{i}.bricks.ns.svc.cluster.local"),
            connected,
            state: "Peer in Cluster".into(),
            ..Default::default()
        }
    }

    fn down(i: u8) -> NodeDown {
        NodeDown {
            node: format!("n{i}"),
            why: "brick pod not running yet".into(),
            stuck: false,
            missing_pod: false,
        }
    }

    fn get<'a>(d: &'a [Desired], t: &str) -> &'a Desired {
        d.iter().find(|c| c.type_ == t).unwrap()
    }

    fn outcome(d: &[Desired]) -> Vec<(&str, bool, String)> {
        d.iter()
            .map(|c| (c.type_.as_str(), c.status, c.reason.clone()))
            .collect()
    }

    #[test]
    fn a_whole_pool_is_ready_stable_and_healthy() {
        let peers = [peer(2, true), peer(3, true)];
        let o = Observed {
            nodes: 3,
            up: vec![node(1), node(2), node(3)],
            anchor_peers: &peers,
            ..Default::default()
        };
        let (s, d) = compute(&GlusterClusterStatus::default(), &o);
        assert_eq!(
            outcome(&d),
            [
                ("Ready", true, "PoolFormed".into()),
                ("Progressing", false, "Stable".into()),
                ("Degraded", false, "Healthy".into()),
            ]
        );
        assert_eq!(s.nodes_summary.as_deref(), Some("3/3"));
        assert_eq!(s.peers[0].state.as_deref(), Some("Local"));
        assert!(s.peers.iter().all(|p| p.connected));
        // Capacity is summed at MiB grain, so small churn does not rewrite status.
        let cap = s.capacity.unwrap();
        assert_eq!(cap.total_bytes, 30 << 30);
        assert_eq!(cap.free_bytes, 12 << 30);
        assert_eq!(cap.total, "30.0Gi");
    }

    #[test]
    fn a_forming_pool_progresses_and_is_not_degraded_before_it_first_formed() {
        let downs = [down(3)];
        let peers = [peer(2, false)];
        let o = Observed {
            nodes: 3,
            up: vec![node(1), node(2)],
            down: &downs,
            anchor_peers: &peers,
            ..Default::default()
        };
        let (s, d) = compute(&GlusterClusterStatus::default(), &o);
        assert_eq!(
            outcome(&d),
            [
                ("Ready", false, "PoolIncomplete".into()),
                ("Progressing", true, "FormingPool".into()),
                ("Degraded", false, "Healthy".into()),
            ]
        );
        assert!(get(&d, "Ready")
            .message
            .contains("1 of 3 storage nodes in the pool; n3: brick pod not running yet"));
        assert_eq!(s.nodes_summary.as_deref(), Some("1/3"));
    }

    #[test]
    fn a_node_lost_after_the_pool_formed_is_degraded_and_keeps_its_address() {
        let peers = [peer(2, true), peer(3, false)];
        let old = compute(
            &GlusterClusterStatus::default(),
            &Observed {
                nodes: 3,
                up: vec![node(1), node(2), node(3)],
                anchor_peers: &[peer(2, true), peer(3, true)],
                ..Default::default()
            },
        )
        .0;
        let downs = [down(3)];
        let o = Observed {
            nodes: 3,
            up: vec![node(1), node(2)],
            down: &downs,
            anchor_peers: &peers,
            ..Default::default()
        };
        let (s, d) = compute(&old, &o);
        assert_eq!(get(&d, "Degraded").reason, "NodeUnreachable");
        assert!(get(&d, "Degraded").status);
        let lost = s.peers.iter().find(|p| p.node == "n3").unwrap();
        assert_eq!(lost.address, "n3.bricks.ns.svc");
        assert_eq!(lost.state.as_deref(), Some("Unreachable"));
        assert!(!lost.connected);
    }

    #[test]
    fn a_brick_pod_that_cannot_run_is_degraded_from_the_start() {
        let downs = [
            NodeDown {
                node: "n2".into(),
                why: "brick pod c-n2-0 cannot be scheduled: 0/3 nodes are available".into(),
                stuck: true,
                missing_pod: false,
            },
            down(3),
        ];
        let o = Observed {
            nodes: 3,
            up: vec![node(1)],
            down: &downs,
            ..Default::default()
        };
        let (_, d) = compute(&GlusterClusterStatus::default(), &o);
        let degraded = get(&d, "Degraded");
        assert_eq!(
            (degraded.status, degraded.reason.as_str()),
            (true, "BrickPodsFailing")
        );
        assert!(degraded
            .message
            .starts_with("n2: brick pod c-n2-0 cannot be scheduled"));
        assert!(!degraded.message.contains("n3"), "{}", degraded.message);
        assert!(get(&d, "Ready").message.contains("cannot be scheduled"));
    }

    #[test]
    fn a_rollout_progresses_and_a_stalled_one_is_degraded() {
        let peers = [peer(2, true)];
        let mut o = Observed {
            nodes: 2,
            up: vec![node(1), node(2)],
            anchor_peers: &peers,
            rollout: Rollout {
                waiting: Some("brick pod p1 is not serving yet".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let (_, d) = compute(&GlusterClusterStatus::default(), &o);
        assert_eq!(get(&d, "Progressing").reason, "RollingUpdate");
        assert!(get(&d, "Progressing").status);
        assert!(!get(&d, "Degraded").status);
        o.rollout.stalled = Some("p1 restarted 900s ago".into());
        let (_, d) = compute(&GlusterClusterStatus::default(), &o);
        assert_eq!(
            (
                get(&d, "Degraded").status,
                get(&d, "Degraded").reason.as_str()
            ),
            (true, "RolloutStalled")
        );
        // The pool is whole, so it serves: Ready stays true through a rollout.
        assert!(get(&d, "Ready").status);
    }

    #[test]
    fn retiring_nodes_progress_and_stay_listed_while_in_the_pool() {
        let peers = [peer(2, true), peer(3, true)];
        let old = GlusterClusterStatus {
            peers: vec![PeerStatus {
                node: "n3".into(),
                address: "n3.bricks.ns.svc".into(),
                connected: true,
                state: None,
                zone: None,
                disks: None,
            }],
            ..Default::default()
        };
        let why = ["n3 holds bricks of GlusterVolume(s) data".to_string()];
        let staying = ["n3".to_string()];
        let o = Observed {
            nodes: 2,
            up: vec![node(1), node(2)],
            anchor_peers: &peers,
            retiring: &why,
            still_in_pool: &staying,
            ..Default::default()
        };
        let (s, d) = compute(&old, &o);
        assert_eq!(get(&d, "Progressing").reason, "RetiringNodes");
        assert!(get(&d, "Progressing").message.contains("n3 holds bricks"));
        assert!(get(&d, "Ready").status);
        assert_eq!(s.peers.len(), 3);
        assert_eq!(s.peers[2].state.as_deref(), Some("Peer in Cluster"));
    }

    #[test]
    fn bricks_are_counted_from_the_volumes_status() {
        let vol: GlusterVolume = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": "v", "namespace": "ns"},
            "spec": {"cluster": "c", "type": "Distribute", "brickCount": 2},
            "status": {"bricks": [
                {"node": "n1", "host": "h", "path": "/b/0", "online": true},
                {"node": "n2", "host": "h", "path": "/b/1", "online": false},
            ]},
        }))
        .unwrap();
        let vols = [vol];
        let o = Observed {
            nodes: 1,
            up: vec![node(1)],
            volumes: &vols,
            ..Default::default()
        };
        let (s, _) = compute(&GlusterClusterStatus::default(), &o);
        assert_eq!(s.bricks_summary.as_deref(), Some("1/2"));
        assert_eq!(s.capacity.unwrap().total, "10.0Gi");
        let (_, d) = compute(
            &GlusterClusterStatus::default(),
            &Observed {
                nodes: 1,
                ..Default::default()
            },
        );
        assert_eq!(get(&d, "Ready").reason, "PoolIncomplete");
    }

    #[test]
    fn deletion_waits_for_the_volumes_on_the_cluster() {
        let (msg, d) = deletion_blocked(&["a".into(), "b".into()]);
        assert_eq!(
            msg,
            "2 GlusterVolume(s) still live on this cluster: a, b; delete them first"
        );
        assert_eq!(
            outcome(&d),
            [
                ("Ready", false, "DeletionBlocked".into()),
                ("Progressing", false, "DeletionBlocked".into()),
                ("Degraded", false, "Healthy".into()),
            ]
        );
    }
}
