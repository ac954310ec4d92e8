//! The next step of a rolling restart of brick pods.

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

/// Why the data is not safe to disturb yet: a rolling restart or a resize waits, and says
/// this in the resource's status. Each clears by itself (a brick back, a heal done, a peer
/// reconnected); one that lasts points at the node or volume to look at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotSafe {
    #[error("no brick agent answers")]
    NoAgent,
    #[error("peer status on {node}: {message}")]
    PeerStatus { node: String, message: String },
    #[error("glusterd on {node} does not see peer {peer} connected yet")]
    PeerDisconnected { node: String, peer: String },
    #[error("status of volume {volume}: {message}")]
    Status { volume: String, message: String },
    #[error("volume {volume} has {} of {total} bricks offline: {}", .offline.len(), .offline.join(", "))]
    BricksOffline {
        volume: String,
        offline: Vec<String>,
        total: usize,
    },
    #[error("volume {volume} has {pending} entries to heal and {split_brain} in split-brain")]
    Healing {
        volume: String,
        pending: u64,
        split_brain: u64,
    },
    #[error("heal info of volume {volume}: {message}")]
    HealInfo { volume: String, message: String },
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
    data_safe: Result<(), NotSafe>,
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
        Err(why) => RolloutStep::Wait(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healing() -> NotSafe {
        NotSafe::Healing {
            volume: "pool".into(),
            pending: 3,
            split_brain: 0,
        }
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
            rollout_step(&all(true, true, true), Err(healing())),
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
            rollout_step(&all(true, false, false), Err(healing())),
            RolloutStep::Wait("volume pool has 3 entries to heal and 0 in split-brain".into())
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
            rollout_step(&stuck, Err(healing())),
            RolloutStep::Restart("p3".into())
        );
        // Once restarted on the current template it is waited for like any other.
        stuck[2].1 = pod("p3", true, false);
        assert!(matches!(
            rollout_step(&stuck, Ok(())),
            RolloutStep::Wait(w) if w.contains("p3")
        ));
    }
}
