//! Gluster's typed answers into the agent's protobuf messages.

use gk_gluster::{
    BrickHeal, BrickHealEntries, Peer, QuotaEntry, RebalanceStatus, Volume, VolumeLayout,
    VolumeStatus,
};

use crate::proto;

pub fn peer(p: &Peer) -> proto::Peer {
    proto::Peer {
        uuid: p.uuid.clone(),
        hostname: p.hostname.clone(),
        connected: p.connected,
        state: p.state.clone(),
    }
}

pub fn volume(v: &Volume) -> proto::Volume {
    proto::Volume {
        name: v.name.clone(),
        id: v.id.clone(),
        status: v.status.clone(),
        r#type: v.type_name.clone(),
        replica_count: v.replica_count,
        arbiter_count: v.arbiter_count,
        disperse_count: v.disperse_count,
        redundancy_count: v.redundancy_count,
        bricks: v.bricks.iter().map(|b| b.brick.to_string()).collect(),
        options: v.options.clone().into_iter().collect(),
    }
}

/// The layout an existing volume was created with, for adding bricks in whole sets.
pub fn layout_of(v: &Volume) -> VolumeLayout {
    if v.disperse_count > 0 {
        VolumeLayout::Disperse {
            data: v.disperse_count - v.redundancy_count,
            redundancy: v.redundancy_count,
        }
    } else if v.arbiter_count > 0 {
        VolumeLayout::Arbiter
    } else if v.replica_count > 1 {
        VolumeLayout::Replicate {
            replica: v.replica_count,
        }
    } else {
        VolumeLayout::Distribute
    }
}

pub fn volume_status(s: &VolumeStatus) -> proto::VolumeStatusResponse {
    proto::VolumeStatusResponse {
        bricks: s
            .bricks
            .iter()
            .map(|b| proto::BrickStatus {
                brick: b.brick.to_string(),
                online: b.online,
                port: b.port.map(u32::from).unwrap_or_default(),
                pid: b.pid.unwrap_or_default(),
                size_total_bytes: b.size_total.unwrap_or_default(),
                size_free_bytes: b.size_free.unwrap_or_default(),
                inodes_total: b.inodes_total.unwrap_or_default(),
                inodes_free: b.inodes_free.unwrap_or_default(),
            })
            .collect(),
        self_heal_daemons_online: s.self_heal_daemons_online(),
    }
}

pub fn heal(bricks: &[BrickHeal]) -> proto::HealInfoResponse {
    let bricks: Vec<proto::BrickHeal> = bricks
        .iter()
        .map(|b| proto::BrickHeal {
            brick: b.brick.to_string(),
            connected: b.connected,
            pending: b.pending.unwrap_or_default(),
            split_brain: b.split_brain.unwrap_or_default(),
            possibly_healing: b.possibly_healing.unwrap_or_default(),
        })
        .collect();
    proto::HealInfoResponse {
        pending_total: bricks.iter().map(|b| b.pending).sum(),
        split_brain_total: bricks.iter().map(|b| b.split_brain).sum(),
        bricks,
    }
}

/// The heal answer for a volume whose every brick's heal index was counted empty.
pub fn nothing_to_heal(bricks: &[gk_gluster::Brick]) -> proto::HealInfoResponse {
    proto::HealInfoResponse {
        bricks: bricks
            .iter()
            .map(|b| proto::BrickHeal {
                brick: b.to_string(),
                connected: true,
                ..Default::default()
            })
            .collect(),
        pending_total: 0,
        split_brain_total: 0,
    }
}

/// Pending entries and split-brain entries of each brick, merged by brick, at most `limit`
/// of each listed. Bricks keep the order of the pending list (gluster's brick order).
pub fn heal_entries(
    pending: &[BrickHealEntries],
    split_brain: &[BrickHealEntries],
    limit: usize,
) -> proto::HealEntriesResponse {
    let listed = |b: &BrickHealEntries| -> Vec<String> {
        b.entries
            .iter()
            .take(limit)
            .map(ToString::to_string)
            .collect()
    };
    let mut bricks: Vec<proto::BrickHealEntries> = pending
        .iter()
        .map(|b| proto::BrickHealEntries {
            brick: b.brick.to_string(),
            status: b.status.clone(),
            connected: b.connected,
            pending_count: b.count.unwrap_or_default(),
            pending: listed(b),
            ..Default::default()
        })
        .collect();
    for s in split_brain {
        let name = s.brick.to_string();
        let i = match bricks.iter().position(|b| b.brick == name) {
            Some(i) => i,
            None => {
                bricks.push(proto::BrickHealEntries {
                    brick: name,
                    status: s.status.clone(),
                    connected: s.connected,
                    ..Default::default()
                });
                bricks.len() - 1
            }
        };
        bricks[i].split_brain_count = s.count.unwrap_or_default();
        bricks[i].split_brain = listed(s);
    }
    proto::HealEntriesResponse { bricks }
}

pub fn quota(q: &QuotaEntry) -> proto::QuotaEntry {
    proto::QuotaEntry {
        path: q.path.clone(),
        hard_limit_bytes: q.hard_limit_bytes,
        used_bytes: q.used_bytes,
        available_bytes: q.available_bytes,
        soft_limit_exceeded: q.soft_limit_exceeded,
        hard_limit_exceeded: q.hard_limit_exceeded,
    }
}

/// Gluster's migration status, with a failure anywhere reported as failed.
pub fn rebalance(s: &RebalanceStatus) -> proto::RebalanceStatusResponse {
    proto::RebalanceStatusResponse {
        status: if s.has_failed() {
            "failed".into()
        } else {
            s.aggregate.status.clone()
        },
        nodes: s
            .nodes
            .iter()
            .map(|n| proto::RebalanceNode {
                host: n.host.clone(),
                files: n.progress.files,
                size_bytes: n.progress.size_bytes,
                failures: n.progress.failures,
                skipped: n.progress.skipped,
                status: n.progress.status.clone(),
                run_time_secs: n.progress.run_time.as_secs_f64(),
            })
            .collect(),
        task_id: s.task_id.clone().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_gluster::{Brick, HealEntry};

    fn brick(path: &str, entries: &[&str], connected: bool) -> BrickHealEntries {
        BrickHealEntries {
            brick: Brick::parse(&format!("h1:{path}")).unwrap(),
            status: if connected {
                "Connected"
            } else {
                "Transport endpoint is not connected"
            }
            .into(),
            connected,
            count: connected.then_some(entries.len() as u64),
            entries: entries
                .iter()
                .map(|p| HealEntry {
                    path: Some(p.to_string()),
                    gfid: None,
                })
                .collect(),
        }
    }

    #[test]
    fn heal_entries_merge_by_brick_and_list_at_most_the_limit() {
        let pending = [
            brick("/b/1", &["/a", "/b", "/c"], true),
            brick("/b/2", &[], false),
        ];
        let split = [brick("/b/1", &["/c"], true), brick("/b/3", &["/c"], true)];
        let r = heal_entries(&pending, &split, 2);
        assert_eq!(r.bricks.len(), 3);
        let b1 = &r.bricks[0];
        assert_eq!(
            (b1.pending_count, b1.pending.as_slice()),
            (3, &["/a".to_string(), "/b".into()][..])
        );
        assert_eq!(
            (b1.split_brain_count, b1.split_brain.as_slice()),
            (1, &["/c".to_string()][..])
        );
        assert!(!r.bricks[1].connected);
        assert_eq!(r.bricks[1].status, "Transport endpoint is not connected");
        // A brick only the split-brain list names is still shown.
        assert_eq!(r.bricks[2].brick, "h1:/b/3");
        assert_eq!(r.bricks[2].split_brain_count, 1);
    }
}
