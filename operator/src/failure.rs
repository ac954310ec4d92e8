//! What a reconcile that stopped on an error tells the user. Whatever stops a reconcile
//! (an API refusal, an agent or glusterd error, a spec the operator cannot act on) reaches the
//! resource's conditions with a reason and a message that says what to do, and, through the
//! condition's transition, a Warning event. Pure: the reconcile writes what this decides.

use gk_api::agents::AgentsError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use tonic::Code;

use crate::conditions::Desired;
use crate::Error;

/// A failure as the user sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: &'static str,
    pub message: String,
    /// Retrying cannot help: a person must change something (the spec, the chart's RBAC,
    /// the node). Otherwise the reconcile retries and the failure may pass by itself.
    pub needs_person: bool,
}

fn failure(reason: &'static str, needs_person: bool, message: String) -> Option<Failure> {
    Some(Failure {
        reason,
        message,
        needs_person,
    })
}

/// How `e` reads in status; None for the waits that write their own conditions (a missing
/// cluster, agents not up yet, deletion held by users).
pub fn classify(e: &Error) -> Option<Failure> {
    match e {
        Error::NotReady(_) | Error::DeletionBlocked(_) => None,
        Error::Agents(AgentsError::Credentials { .. }) => None,
        Error::Spec(s) => failure(
            "InvalidSpec",
            true,
            format!("{s}; change the spec to go on"),
        ),
        Error::Kube(kube::Error::Api(r))
        | Error::Agents(AgentsError::Kube(kube::Error::Api(r))) => match r.code {
            403 => failure(
                "Forbidden",
                true,
                format!(
                    "the operator may not do this: {}; its ClusterRole (the chart's \
                         operator-rbac.yaml) lacks the permission: upgrade the chart or grant it",
                    r.message
                ),
            ),
            400 | 422 => failure(
                "Refused",
                true,
                format!(
                    "the apiserver refused an object the operator made from this spec: {}; \
                         fix the field it names",
                    r.message
                ),
            ),
            code => failure(
                "APIError",
                false,
                format!(
                    "the Kubernetes API answered {code}: {}; retrying",
                    r.message
                ),
            ),
        },
        Error::Kube(e) | Error::Agents(AgentsError::Kube(e)) => failure(
            "APIUnavailable",
            false,
            format!("the Kubernetes API did not answer: {e}; retrying"),
        ),
        Error::Zone { source, .. } => {
            let forbidden = matches!(source, kube::Error::Api(r) if r.code == 403);
            failure(
                if forbidden { "Forbidden" } else { "APIError" },
                forbidden,
                if forbidden {
                    format!("{e}: upgrade the chart or grant it")
                } else {
                    format!("{e}; retrying")
                },
            )
        }
        Error::Agents(e @ AgentsError::Address { .. }) => {
            failure("AgentUnreachable", false, format!("{e}; retrying"))
        }
        Error::Pki(e) => failure(
            "CertificateError",
            true,
            format!(
                "{e}; the stored certificates could not be used: delete the broken Secret \
                 and the operator issues a new one"
            ),
        ),
        Error::Agent {
            node,
            code,
            message,
        } => {
            let status = format!("{code:?}: {message}");
            // glusterd serialises management operations with a cluster-wide lock; another
            // operation holding it passes by itself (the agent answers Unavailable).
            let busy = *code == Code::Unavailable && gk_gluster::mentions_lock_contention(message);
            let refused = matches!(
                code,
                Code::InvalidArgument | Code::FailedPrecondition | Code::AlreadyExists
            );
            if busy {
                failure(
                    "GlusterBusy",
                    false,
                    format!(
                        "glusterd is busy with another operation (it holds the pool's lock), \
                         asked through {node}: {status}; retrying"
                    ),
                )
            } else if refused {
                failure(
                    "GlusterRefused",
                    true,
                    format!(
                        "gluster refused, asked through the brick agent on {node}: {status}; \
                         the spec or the volume's state must change (see the agent's log in \
                         that node's brick pod)"
                    ),
                )
            } else {
                failure(
                    "AgentError",
                    false,
                    format!(
                        "the brick agent on {node} failed: {status}; retrying (see the agent's \
                         log in that node's brick pod)"
                    ),
                )
            }
        }
        Error::Finalizer(m) => failure(
            "FinalizerError",
            false,
            format!("updating the finalizer failed: {m}; retrying"),
        ),
    }
}

/// The conditions after `f`, from the `old` ones: a failure that needs a person is
/// Degraded and stops Progressing (and Ready stays false until it is fixed, or turns false
/// if it never was); one that may pass is Progressing ("retrying") and leaves Ready and
/// Degraded as they were. Conditions it does not concern are kept.
pub fn conditions(old: &[Condition], f: &Failure) -> Vec<Desired> {
    let kept = |t: &str| {
        old.iter()
            .find(|c| c.type_ == t)
            .map(Desired::from_condition)
    };
    let mut out: Vec<Desired> = old
        .iter()
        .filter(|c| !matches!(c.type_.as_str(), "Ready" | "Degraded" | "Progressing"))
        .map(Desired::from_condition)
        .collect();
    let message = f.message.clone();
    if f.needs_person {
        let ready_true = kept("Ready").is_some_and(|r| r.status);
        out.push(if ready_true {
            // A volume that serves keeps serving; what failed is a change to it.
            kept("Ready").expect("checked")
        } else {
            Desired::new("Ready", false, f.reason, message.clone())
        });
        out.push(Desired::new("Degraded", true, f.reason, message.clone()));
        out.push(Desired::new("Progressing", false, f.reason, message));
    } else {
        out.push(
            kept("Ready")
                .unwrap_or_else(|| Desired::new("Ready", false, f.reason, message.clone())),
        );
        out.extend(kept("Degraded"));
        out.push(Desired::new("Progressing", true, f.reason, message));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::merge;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn api(code: u16, message: &str) -> Error {
        Error::Kube(kube::Error::Api(
            kube::core::Status::failure(message, "Invalid")
                .with_code(code)
                .boxed(),
        ))
    }

    fn agent(status: &str) -> Error {
        let (code, message) = status.split_once(": ").unwrap();
        let code = match code {
            "Unavailable" => Code::Unavailable,
            "FailedPrecondition" => Code::FailedPrecondition,
            other => panic!("no test code {other}"),
        };
        Error::agent("n1", tonic::Status::new(code, message))
    }

    #[test]
    fn every_error_class_reads_with_a_reason_and_what_to_do() {
        let cases = [
            (api(422, "StatefulSet.apps \"c-n1\" is invalid: spec.template.spec.containers[0].resources.requests[example]: Invalid value"), "Refused", true, "resources.requests[example]"),
            (api(403, "statefulsets.apps \"c-n1\" is forbidden: User cannot delete"), "Forbidden", true, "ClusterRole"),
            (api(409, "the object has been modified"), "APIError", false, "retrying"),
            (agent("Unavailable: Another transaction is in progress for ns-v. Please try again after some time."), "GlusterBusy", false, "lock"),
            (agent("FailedPrecondition: volume add-brick: failed: Brick may be containing or be contained by an existing brick"), "GlusterRefused", true, "spec or the volume's state"),
            (agent("Unavailable: tcp connect error"), "AgentError", false, "retrying"),
            (Error::Spec(crate::plan::SpecError { field: "spec.options.performance.cache-size".into(), reason: "\"--1\" must not start with \"--\"".into() }), "InvalidSpec", true, "spec.options.performance.cache-size"),
            (Error::Agents(AgentsError::Address { address: "x y".into(), reason: "bad".into() }), "AgentUnreachable", false, "retrying"),
        ];
        for (e, reason, person, says) in cases {
            let f = classify(&e).unwrap();
            assert_eq!((f.reason, f.needs_person), (reason, person), "{e}");
            assert!(f.message.contains(says), "{reason}: {}", f.message);
        }
        assert_eq!(
            classify(&Error::NotReady(crate::Waiting::NoOtherAgent)),
            None
        );
        assert_eq!(classify(&Error::DeletionBlocked("x".into())), None);
    }

    fn at(d: &[Desired]) -> Vec<Condition> {
        merge(
            &[],
            d,
            Some(1),
            &Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        )
    }

    fn find<'a>(d: &'a [Desired], t: &str) -> &'a Desired {
        d.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn a_failure_that_needs_a_person_is_degraded_and_keeps_a_serving_volume_ready() {
        let old = at(&[
            Desired::new("Ready", true, "Started", "serving"),
            Desired::new("Degraded", false, "Healthy", ""),
            Desired::new("Progressing", false, "Stable", ""),
            Desired::new("OptionsApplied", true, "Applied", ""),
        ]);
        let f = classify(&agent("FailedPrecondition: refused")).unwrap();
        let d = conditions(&old, &f);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(find(&d, "Ready").status);
        assert_eq!(find(&d, "Degraded").reason, "GlusterRefused");
        assert!(find(&d, "Degraded").status);
        assert!(!find(&d, "Progressing").status);
        assert_eq!(find(&d, "OptionsApplied").reason, "Applied");

        // Nothing served yet: Ready says why not.
        let d = conditions(&[], &f);
        assert_eq!(
            (find(&d, "Ready").status, find(&d, "Ready").reason.as_str()),
            (false, "GlusterRefused")
        );
    }

    #[test]
    fn a_failure_that_may_pass_is_progress_and_changes_nothing_else() {
        let old = at(&[
            Desired::new("Ready", false, "Creating", "creating"),
            Desired::new("Degraded", false, "NotCreated", ""),
            Desired::new("Progressing", true, "Creating", "creating"),
        ]);
        let f = classify(&agent("Unavailable: Another transaction is in progress")).unwrap();
        let d = conditions(&old, &f);
        assert_eq!(find(&d, "Ready").reason, "Creating");
        assert_eq!(find(&d, "Degraded").reason, "NotCreated");
        let p = find(&d, "Progressing");
        assert_eq!((p.status, p.reason.as_str()), (true, "GlusterBusy"));
        assert!(p.message.contains("busy"), "{}", p.message);
    }
}
