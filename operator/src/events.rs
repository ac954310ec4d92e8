//! Kubernetes Events: what the operator did (Normal) and what needs a person (Warning),
//! published on transitions only, never on a reconcile that changed nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::events::{Event, EventType};
use kube::Resource;

use crate::conditions;
use crate::context::Context;

/// The longest note an Event carries: the apiserver refuses longer ones.
const MAX_NOTE: usize = 1000;

/// An event about `action` with `reason` and `note` (cut to what the apiserver takes).
pub fn event(warning: bool, reason: &str, action: &str, note: &str) -> Event {
    Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.into(),
        note: Some(note.chars().take(MAX_NOTE).collect()),
        action: action.into(),
        secondary: None,
    }
}

/// Publishes `ev` about `obj`. A refused event is logged, never a reconcile failure.
pub async fn publish<K: Resource<DynamicType = ()>>(ctx: &Context, obj: &K, ev: Event) {
    if let Err(e) = ctx.recorder.publish(&ev, &obj.object_ref(&())).await {
        tracing::warn!(error = %e, "publishing an event failed");
    }
}

/// The events for the conditions that changed between `old` and `new`: a Warning for what
/// needs a person (Degraded, a Ready that was lost, a refusal, a blocked step), else Normal.
pub fn transition_events(old: &[Condition], new: &[Condition]) -> Vec<Event> {
    conditions::transitions(old, new)
        .into_iter()
        .map(|c| {
            let warn = (c.type_ == "Degraded" && c.status == "True")
                || (c.type_ == "Ready" && c.status == "False" && !old.is_empty())
                || c.reason.ends_with("Refused")
                || c.reason.ends_with("Blocked");
            event(
                warn,
                &c.reason,
                "Reconcile",
                &format!("{}={}: {}", c.type_, c.status, c.message),
            )
        })
        .collect()
}

/// One event per condition that changed.
pub async fn publish_transitions<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    obj: &K,
    old: &[Condition],
    new: &[Condition],
) {
    for ev in transition_events(old, new) {
        publish(ctx, obj, ev).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::{merge, Desired};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn conds(d: &[Desired]) -> Vec<Condition> {
        merge(
            &[],
            d,
            Some(1),
            &Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
    }

    #[test]
    fn warnings_are_for_what_needs_a_person() {
        let healthy = conds(&[
            Desired::new("Ready", true, "Started", "ok"),
            Desired::new("Degraded", false, "Healthy", ""),
        ]);
        let first = transition_events(&[], &healthy);
        assert_eq!(first.len(), 2);
        assert!(first.iter().all(|e| e.type_ == EventType::Normal));
        assert!(transition_events(&healthy, &healthy).is_empty());

        let degraded = conds(&[
            Desired::new("Ready", false, "NotServing", "x"),
            Desired::new("Degraded", true, "BricksOffline", "1 of 3 bricks online"),
        ]);
        let evs = transition_events(&healthy, &degraded);
        assert_eq!(evs.len(), 2);
        assert!(evs.iter().all(|e| e.type_ == EventType::Warning));
        assert!(evs
            .iter()
            .any(|e| e.note.as_deref() == Some("Degraded=True: 1 of 3 bricks online")));

        let refused = conds(&[Desired::new("Progressing", false, "ShrinkRefused", "no")]);
        assert_eq!(
            transition_events(&[], &refused)[0].type_,
            EventType::Warning
        );
    }

    #[test]
    fn notes_are_cut_to_what_the_apiserver_takes() {
        let ev = event(false, "R", "A", &"x".repeat(5000));
        assert_eq!(ev.note.unwrap().len(), MAX_NOTE);
    }
}
