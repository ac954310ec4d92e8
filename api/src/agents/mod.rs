//! Finding and reaching a GlusterCluster's brick agents: gRPC over mutual TLS with the
//! operator's client certificate. The operator and the CSI controller both use this; `cache`
//! keeps the connections between calls.

pub mod cache;

use std::time::Duration;

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::Api;
use kube::ResourceExt;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::crd::GlusterCluster;
use crate::names;

/// The agent's gRPC port in every brick pod.
pub const AGENT_PORT: u16 = 24050;

/// The name the agents' serving certificate carries and clients check, whatever address
/// (pod IP or DNS name) they dial.
pub fn server_name(cluster: &str, namespace: &str) -> String {
    format!("agent.{cluster}.{namespace}.glusterkube.internal")
}

/// Client credentials for one cluster's agents.
#[derive(Clone)]
pub struct AgentCredentials {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
    pub server_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentsError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("agent address {address:?} is not valid: {reason}")]
    Address { address: String, reason: String },
    /// The operator has not issued the client certificate yet (or it is incomplete).
    #[error("Secret {namespace}/{name} {what}; the operator makes it for each GlusterCluster")]
    Credentials {
        namespace: String,
        name: String,
        what: String,
    },
}

/// A client for the agent at `ip`. The connection is made lazily with a short connect
/// timeout, so a dead node fails its own calls quickly instead of hanging the caller.
pub fn connect(
    ip: &str,
    port: u16,
    creds: &AgentCredentials,
) -> Result<BrickAgentClient<Channel>, AgentsError> {
    Ok(BrickAgentClient::new(
        endpoint(ip, port, creds)?.connect_lazy(),
    ))
}

/// The mutual-TLS endpoint of the agent at `ip`, for callers that bring their own
/// transport (a port-forward, say): the certificate is checked against `creds`' server
/// name whatever `ip` is.
pub fn endpoint(ip: &str, port: u16, creds: &AgentCredentials) -> Result<Endpoint, AgentsError> {
    let bad = |e: &dyn std::fmt::Display| AgentsError::Address {
        address: ip.into(),
        reason: e.to_string(),
    };
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&creds.ca_pem))
        .identity(Identity::from_pem(&creds.cert_pem, &creds.key_pem))
        .domain_name(creds.server_name.clone());
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    };
    let endpoint = Endpoint::from_shared(format!("https://{host}:{port}"))
        .map_err(|e| bad(&e))?
        .tls_config(tls)
        .map_err(|e| bad(&e))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(180))
        // A kept connection to a node that dropped off the network fails its calls within
        // 15 s instead of the 180 s timeout, and the next call connects afresh.
        .http2_keep_alive_interval(Duration::from_secs(10))
        .keep_alive_timeout(Duration::from_secs(5))
        .keep_alive_while_idle(true);
    Ok(endpoint)
}

/// A key of a Secret's data as text.
pub fn secret_text(s: &Secret, key: &str) -> Option<String> {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
}

/// The operator's client credentials for a cluster's agents, as stored; nothing is issued.
pub async fn read_credentials(
    client: &kube::Client,
    gc: &GlusterCluster,
) -> Result<AgentCredentials, AgentsError> {
    let ns = gc.namespace().unwrap_or_default();
    let name = names::operator_tls_secret(&gc.name_any());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let missing = |what: String| AgentsError::Credentials {
        namespace: ns.clone(),
        name: name.clone(),
        what,
    };
    let s = secrets
        .get_opt(&name)
        .await?
        .ok_or_else(|| missing("does not exist yet".into()))?;
    let get = |k: &str| secret_text(&s, k).ok_or_else(|| missing(format!("has no {k}")));
    Ok(AgentCredentials {
        ca_pem: get("ca.crt")?,
        cert_pem: get("tls.crt")?,
        key_pem: get("tls.key")?,
        server_name: server_name(&gc.name_any(), &ns),
    })
}

/// A storage node whose brick agent answered.
pub struct NodeAgent {
    pub node: String,
    /// The address glusterd is known by in the pool.
    pub address: String,
    /// The node's disks, each a directory (as glusterd sees it) that holds bricks.
    pub disks: Vec<AgentDisk>,
    pub client: BrickAgentClient<Channel>,
}

impl NodeAgent {
    /// Size of all the node's disks together.
    pub fn total_bytes(&self) -> u64 {
        self.disks.iter().map(|d| d.total_bytes).sum()
    }

    /// Free space of all the node's disks together.
    pub fn free_bytes(&self) -> u64 {
        self.disks.iter().map(|d| d.free_bytes).sum()
    }
}

/// One disk of a storage node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentDisk {
    /// The directory, as glusterd sees it, under which this disk's bricks live.
    pub brick_root: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
    /// Its filesystem enforces project quotas (XFS with prjquota): PVs on it can be sized by
    /// the disk itself. `Err` says why not (an agent from before it was asked: unknown).
    pub project_quotas: Result<(), String>,
}

/// A storage node whose agent did not answer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDown {
    pub node: String,
    pub why: String,
    /// The brick pod cannot run as it is (it cannot be scheduled, its image cannot be
    /// pulled, its container keeps failing): it needs a person, not time.
    pub stuck: bool,
    /// There is no brick pod at all (its StatefulSet may be unable to create it).
    pub missing_pod: bool,
}

/// Why a brick pod serves no agent, from its status: what the scheduler, the kubelet or the
/// container said, and whether it is stuck there. None when it runs with an address.
pub fn pod_problem(pod: &Pod) -> Option<(String, bool)> {
    let status = pod.status.as_ref();
    // A pod with an address was placed; a PodScheduled condition saying otherwise is stale.
    let has_ip = status.and_then(|s| s.pod_ip.as_ref()).is_some();
    let unscheduled = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| {
            c.iter()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
        })
        .filter(|_| !has_ip);
    if let Some(c) = unscheduled {
        return Some((
            format!(
                "brick pod {} cannot be scheduled: {}",
                pod.name_any(),
                c.message
                    .as_deref()
                    .or(c.reason.as_deref())
                    .unwrap_or("no reason given")
            ),
            true,
        ));
    }
    let containers = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .chain(
            status
                .and_then(|s| s.init_container_statuses.as_ref())
                .into_iter()
                .flatten(),
        );
    for c in containers {
        let waiting = c.state.as_ref().and_then(|s| s.waiting.as_ref());
        let Some(w) = waiting else { continue };
        let reason = w.reason.as_deref().unwrap_or("");
        let message = w.message.as_deref().unwrap_or("");
        let last = c
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| {
                format!(
                    "; it last exited with code {}{}",
                    t.exit_code,
                    t.message
                        .as_deref()
                        .or(t.reason.as_deref())
                        .map(|m| format!(" ({m})"))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        let stuck = matches!(
            reason,
            "ErrImagePull"
                | "ImagePullBackOff"
                | "InvalidImageName"
                | "CrashLoopBackOff"
                | "CreateContainerConfigError"
                | "CreateContainerError"
                | "RunContainerError"
        );
        if reason.is_empty() || reason == "ContainerCreating" || reason == "PodInitializing" {
            continue;
        }
        let what = match reason {
            "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" => {
                format!("image {} cannot be pulled", c.image)
            }
            "CrashLoopBackOff" => format!("container {} keeps failing", c.name),
            _ => format!("container {} cannot start", c.name),
        };
        let detail = if message.is_empty() {
            reason.to_string()
        } else {
            format!("{reason}: {message}")
        };
        return Some((
            format!("brick pod {}: {what} ({detail}){last}", pod.name_any()),
            stuck,
        ));
    }
    if !has_ip {
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        return Some((
            format!(
                "brick pod {} is {phase} and has no address yet",
                pod.name_any()
            ),
            false,
        ));
    }
    None
}

impl std::fmt::Display for NodeDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.node, self.why)
    }
}

/// "node: why; node: why", for messages.
pub fn describe_down(down: &[NodeDown]) -> String {
    down.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A storage node whose brick pod runs with an address, so its agent can be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub node: String,
    pub ip: String,
    /// What the pod's status says is not right yet (not ready, say), for messages when its
    /// agent does not answer either.
    pub problem: Option<String>,
}

/// The brick pods of `gc` among `pods` that may serve an agent, in spec order, and the
/// nodes whose pod cannot (with why). Brick pods are matched by the node annotation the
/// operator puts on them; `pods` are the cluster's (its label), from a list or a watch.
pub fn candidates<'a>(
    gc: &GlusterCluster,
    pods: impl IntoIterator<Item = &'a Pod> + Clone,
) -> (Vec<Candidate>, Vec<NodeDown>) {
    let mut up = Vec::new();
    let mut down = Vec::new();
    for node in &gc.spec.nodes {
        let pod = pods
            .clone()
            .into_iter()
            .find(|p| p.annotations().get(names::ANNOTATION_NODE) == Some(&node.name));
        let Some(pod) = pod else {
            down.push(NodeDown {
                node: node.name.clone(),
                why: format!(
                    "no brick pod yet (StatefulSet {})",
                    names::statefulset_name(&gc.name_any(), &node.name)
                ),
                stuck: false,
                missing_pod: true,
            });
            continue;
        };
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        let problem = pod_problem(pod);
        match ip.filter(|_| !problem.as_ref().is_some_and(|(_, stuck)| *stuck)) {
            Some(ip) => up.push(Candidate {
                node: node.name.clone(),
                ip,
                problem: problem.map(|(why, _)| why),
            }),
            None => {
                let (why, stuck) =
                    problem.unwrap_or_else(|| ("brick pod not running yet".into(), false));
                down.push(NodeDown {
                    node: node.name.clone(),
                    why,
                    stuck,
                    missing_pod: false,
                });
            }
        }
    }
    (up, down)
}

/// Why `candidate`'s agent is down, given the error its call returned.
pub fn not_answering(candidate: &Candidate, error: &tonic::Status) -> NodeDown {
    let ip = &candidate.ip;
    NodeDown {
        node: candidate.node.clone(),
        why: match &candidate.problem {
            // Not ready yet, say: what the pod's status says explains more.
            Some(why) => format!(
                "{why}; its agent at {ip} did not answer: {}",
                error.message()
            ),
            None => format!("agent at {ip} did not answer: {}", error.message()),
        },
        stuck: false,
        missing_pod: false,
    }
}

/// The node's agent as its health answer describes it.
pub fn node_agent(
    node: &str,
    health: gk_agent_proto::v1::HealthResponse,
    client: BrickAgentClient<Channel>,
) -> NodeAgent {
    let disks: Vec<AgentDisk> = if health.disks.is_empty() {
        // An agent from before several disks per node: its one brick root.
        vec![AgentDisk {
            brick_root: health.brick_root,
            total_bytes: health.brick_root_total_bytes,
            free_bytes: health.brick_root_free_bytes,
            project_quotas: Err("its agent does not say whether it has project quotas".into()),
        }]
    } else {
        health
            .disks
            .into_iter()
            .map(|d| AgentDisk {
                project_quotas: match (d.project_quotas, d.project_quotas_reason.is_empty()) {
                    (true, _) => Ok(()),
                    (false, false) => Err(d.project_quotas_reason),
                    (false, true) => {
                        Err("its agent does not say whether it has project quotas".into())
                    }
                },
                brick_root: d.brick_root,
                total_bytes: d.total_bytes,
                free_bytes: d.free_bytes,
            })
            .collect()
    };
    NodeAgent {
        node: node.to_string(),
        address: health.address,
        disks,
        client,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c-n1-0"}, "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn pod_problems_say_what_the_scheduler_or_kubelet_said() {
        let (why, stuck) =
            pod_problem(&pod(serde_json::json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/3 nodes are available: 3 node(s) had untolerated taint {x: y}."}]})))
            .unwrap();
        assert!(
            stuck && why.contains("cannot be scheduled: 0/3 nodes are available"),
            "{why}"
        );

        let (why, stuck) = pod_problem(&pod(
            serde_json::json!({"phase": "Pending", "containerStatuses": [
            {"name": "brick", "image": "127.0.0.1:9/brick:bad", "imageID": "", "ready": false,
             "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff",
             "message": "Back-off pulling image"}}}]}),
        ))
        .unwrap();
        assert!(stuck, "{why}");
        assert!(why.contains("image 127.0.0.1:9/brick:bad cannot be pulled (ImagePullBackOff: Back-off pulling image)"), "{why}");

        let (why, stuck) = pod_problem(&pod(serde_json::json!({"phase": "Running", "podIP": "10.0.0.5",
            "containerStatuses": [{"name": "brick", "image": "i", "imageID": "", "ready": false,
             "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "message": "refusing /dev/sdb: it holds ext4"}}}]})))
        .unwrap();
        assert!(
            stuck && why.contains("keeps failing") && why.contains("code 1 (refusing /dev/sdb"),
            "{why}"
        );

        let (why, stuck) = pod_problem(&pod(serde_json::json!({"phase": "Pending",
            "containerStatuses": [{"name": "brick", "image": "i", "imageID": "", "ready": false,
             "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}]})))
        .unwrap();
        assert!(
            !stuck && why.contains("Pending and has no address yet"),
            "{why}"
        );

        assert_eq!(
            pod_problem(&pod(
                serde_json::json!({"phase": "Running", "podIP": "10.0.0.5"})
            )),
            None
        );
    }
}
