//! What a day-two step means for the volume's conditions. Pure.

use gk_api::crd::{MigrationPhase, ResizeOperation};
use gk_api::units::human_bytes;

use super::state::Day2;
use crate::conditions::Desired;

/// The Progressing condition and any Degraded reason a resize or replacement implies.
pub fn conditions(day2: &Day2) -> (Option<Desired>, Option<(&'static str, String)>) {
    if let Some((reason, msg)) = &day2.blocked {
        return (
            Some(Desired::new("Progressing", false, reason, msg.clone())),
            None,
        );
    }
    let Some(r) = &day2.resize else {
        return (None, None);
    };
    let (verb, refused, failed) = match r.operation {
        ResizeOperation::Expand => ("Expanding", "ExpandRefused", "RebalanceFailed"),
        ResizeOperation::Shrink => ("Shrinking", "ShrinkRefused", "ShrinkFailed"),
    };
    let msg = r.message.clone().unwrap_or_default();
    match r.phase {
        MigrationPhase::Pending | MigrationPhase::InProgress => (
            Some(Desired::new(
                "Progressing",
                true,
                verb,
                format!(
                    "{} files ({}) moved so far; {msg}",
                    r.files_moved,
                    human_bytes(r.bytes_moved.max(0) as u64)
                ),
            )),
            None,
        ),
        MigrationPhase::Verifying => (
            Some(Desired::new(
                "Progressing",
                true,
                verb,
                format!(
                    "every file moved ({} files, {}); checking that each sits on the set \
                     gluster looks it up on first, lookups search every set meanwhile; {msg}",
                    r.files_moved,
                    human_bytes(r.bytes_moved.max(0) as u64)
                ),
            )),
            None,
        ),
        MigrationPhase::Refused => (Some(Desired::new("Progressing", false, refused, msg)), None),
        MigrationPhase::Failed => (
            Some(Desired::new("Progressing", false, failed, msg.clone())),
            Some((failed, msg)),
        ),
        MigrationPhase::Completed => (None, None),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use gk_api::crd::ResizeStatus;

    pub(crate) fn resize(op: ResizeOperation, phase: MigrationPhase) -> ResizeStatus {
        ResizeStatus {
            operation: op,
            phase,
            bricks: vec![],
            files_moved: 3,
            bytes_moved: 3 << 20,
            failures: 1,
            skipped: 0,
            message: Some("10.0.0.1: failed".into()),
            reruns: 0,
            progressed_at: None,
            checks: 0,
            run_started_at: None,
            run_replaces: None,
        }
    }

    fn status(op: ResizeOperation, phase: MigrationPhase) -> Day2 {
        Day2 {
            resize: Some(resize(op, phase)),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_rebalance_is_degraded_never_success() {
        let (p, d) = conditions(&status(ResizeOperation::Expand, MigrationPhase::Failed));
        let p = p.unwrap();
        assert!(!p.status);
        assert_eq!(p.reason, "RebalanceFailed");
        assert_eq!(
            d.unwrap(),
            ("RebalanceFailed", "10.0.0.1: failed".to_string())
        );
        let (p, d) = conditions(&status(ResizeOperation::Shrink, MigrationPhase::InProgress));
        assert!(p.as_ref().unwrap().status && p.unwrap().message.contains("3 files (3.0Mi)"));
        assert!(d.is_none());
        let (p, d) = conditions(&status(ResizeOperation::Expand, MigrationPhase::Verifying));
        let p = p.unwrap();
        assert!(p.status && p.reason == "Expanding", "{p:?}");
        assert!(
            p.message.contains("every file moved (3 files, 3.0Mi)")
                && p.message.contains("lookups search every set"),
            "{}",
            p.message
        );
        assert!(d.is_none());
        let (p, d) = conditions(&status(ResizeOperation::Shrink, MigrationPhase::Refused));
        assert_eq!(p.unwrap().reason, "ShrinkRefused");
        assert!(d.is_none());
        assert_eq!(
            conditions(&status(ResizeOperation::Expand, MigrationPhase::Completed)),
            (None, None)
        );
    }
}
