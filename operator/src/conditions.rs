//! Status conditions that change only when their meaning changes, so that writing status
//! never wakes the controller by itself.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// A condition the reconciler wants, without timestamps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub type_: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Desired {
    pub fn new(type_: &str, status: bool, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_string(),
            status,
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

impl Desired {
    /// A condition as it stands, to be kept as it is.
    pub fn from_condition(c: &Condition) -> Self {
        Self {
            type_: c.type_.clone(),
            status: c.status == "True",
            reason: c.reason.clone(),
            message: c.message.clone(),
        }
    }
}

/// The new condition list: each desired condition keeps its old lastTransitionTime unless its
/// status flipped. The result is sorted by type, so it is the same for the same inputs.
pub fn merge(
    old: &[Condition],
    desired: &[Desired],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = desired
        .iter()
        .map(|d| {
            let status = if d.status { "True" } else { "False" }.to_string();
            let prev = old.iter().find(|c| c.type_ == d.type_);
            let last_transition_time = match prev {
                Some(p) if p.status == status => p.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: d.type_.clone(),
                status,
                reason: d.reason.clone(),
                message: d.message.clone(),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect();
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Conditions whose status changed between `old` and `new`, for events on transitions only.
pub fn transitions<'a>(old: &[Condition], new: &'a [Condition]) -> Vec<&'a Condition> {
    new.iter()
        .filter(|n| {
            !old.iter()
                .any(|o| o.type_ == n.type_ && o.status == n.status && o.reason == n.reason)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let d = [
            Desired::new("Ready", false, "Creating", "creating"),
            Desired::new("Degraded", false, "Healthy", ""),
        ];
        let first = merge(&[], &d, Some(1), &t(100));
        assert_eq!(first[0].type_, "Degraded");
        assert!(first.iter().all(|c| c.last_transition_time == t(100)));
        // Same status, new message: time stays, so the status is identical on a re-run.
        let d2 = [
            Desired::new("Ready", false, "Creating", "still creating"),
            Desired::new("Degraded", false, "Healthy", ""),
        ];
        let second = merge(&first, &d2, Some(1), &t(200));
        assert!(second.iter().all(|c| c.last_transition_time == t(100)));
        assert!(transitions(&first, &second).is_empty());
        let d3 = [
            Desired::new("Ready", true, "Ready", ""),
            Desired::new("Degraded", false, "Healthy", ""),
        ];
        let third = merge(&second, &d3, Some(1), &t(300));
        let ready = third.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time, t(300));
        assert_eq!(transitions(&second, &third).len(), 1);
    }
}
