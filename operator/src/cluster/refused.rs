//! Why a brick pod does not exist at all: the StatefulSet controller's FailedCreate events
//! say what refused it (Pod Security admission refusing a privileged pod, a ResourceQuota,
//! a missing ServiceAccount), and status passes that on with what to do.

use gk_api::agents::NodeDown;
use gk_api::crd::GlusterCluster;
use gk_api::names::statefulset_name;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::ResourceExt;

use crate::context::Context;

/// Events older than this are taken as settled: the StatefulSet controller retries with
/// backoff, so a refusal that still holds keeps its event fresh.
const FRESH_SECONDS: i64 = 600;

/// What a FailedCreate event's message means, and what to do about it.
pub fn explain(ns: &str, message: &str) -> String {
    if let Some(i) = message.find("violates PodSecurity") {
        format!(
            "Pod Security admission refuses the brick pod ({}); brick pods must be privileged \
             (FUSE and XFS mounts, gluster's trusted xattrs), so their namespace needs that \
             level: kubectl label namespace {ns} pod-security.kubernetes.io/enforce=privileged",
            message[i..].trim()
        )
    } else {
        let detail = message
            .find("forbidden: ")
            .map_or(message, |i| &message[i + "forbidden: ".len()..]);
        format!(
            "its StatefulSet cannot create the brick pod: {}",
            detail.trim()
        )
    }
}

/// The freshest FailedCreate message among `events` for StatefulSet `sts`, if recent.
pub fn latest_refusal<'a>(events: &'a [Event], sts: &str, now: Timestamp) -> Option<&'a str> {
    events
        .iter()
        .filter(|e| {
            e.reason.as_deref() == Some("FailedCreate")
                && e.involved_object.kind.as_deref() == Some("StatefulSet")
                && e.involved_object.name.as_deref() == Some(sts)
        })
        .filter_map(|e| {
            let seen = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))?;
            (now.duration_since(seen).as_secs() <= FRESH_SECONDS).then_some((seen, e))
        })
        .max_by_key(|(seen, _)| *seen)
        .and_then(|(_, e)| e.message.as_deref())
}

/// Replaces "no brick pod yet" with what refused the pod, where an event says so; such a
/// node is stuck (it needs a person). Events that cannot be read leave the message as it is.
pub async fn explain_missing(ctx: &Context, gc: &GlusterCluster, down: &mut [NodeDown]) {
    if !down.iter().any(|d| d.missing_pod) {
        return;
    }
    let ns = gc.namespace().unwrap_or_default();
    let events: Api<Event> = Api::namespaced(ctx.client.clone(), &ns);
    let lp = ListParams::default().fields("reason=FailedCreate,involvedObject.kind=StatefulSet");
    let list = match events.list(&lp).await {
        Ok(l) => l.items,
        Err(e) => {
            tracing::warn!(error = %e, "reading why brick pods are missing");
            return;
        }
    };
    let now = Timestamp::now();
    for d in down.iter_mut().filter(|d| d.missing_pod) {
        let sts = statefulset_name(&gc.name_any(), &d.node);
        if let Some(m) = latest_refusal(&list, &sts, now) {
            d.why = format!("brick pod of StatefulSet {sts}: {}", explain(&ns, m));
            d.stuck = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, reason: &str, message: &str, seconds_ago: i64) -> Event {
        let at = Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(seconds_ago);
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{name}.1")},
            "involvedObject": {"kind": "StatefulSet", "name": name},
            "reason": reason,
            "message": message,
            "lastTimestamp": at.to_string(),
        }))
        .unwrap()
    }

    const REFUSED: &str = "create Pod c-n1-0 in StatefulSet c-n1 failed error: pods \"c-n1-0\" \
        is forbidden: violates PodSecurity \"baseline:latest\": privileged (container \"brick\" \
        must not set securityContext.privileged=true)";

    #[test]
    fn pod_security_refusals_say_which_label_to_set() {
        let why = explain("storage", REFUSED);
        assert!(
            why.contains("violates PodSecurity \"baseline:latest\""),
            "{why}"
        );
        assert!(
            why.contains(
                "kubectl label namespace storage pod-security.kubernetes.io/enforce=privileged"
            ),
            "{why}"
        );
        let quota = explain(
            "storage",
            "create Pod x failed error: pods \"x\" is forbidden: exceeded quota: q",
        );
        assert_eq!(
            quota,
            "its StatefulSet cannot create the brick pod: exceeded quota: q"
        );
    }

    #[test]
    fn only_fresh_refusals_of_that_statefulset_count() {
        let now = Timestamp::now();
        let events = [
            event("c-n1", "FailedCreate", "old", 3600),
            event("c-n1", "FailedCreate", REFUSED, 5),
            event("c-n2", "FailedCreate", "other", 1),
            event("c-n1", "SuccessfulCreate", "made", 0),
        ];
        assert_eq!(latest_refusal(&events, "c-n1", now), Some(REFUSED));
        assert_eq!(latest_refusal(&events[..1], "c-n1", now), None);
        assert_eq!(latest_refusal(&events, "c-n3", now), None);
    }
}
