//! Finding and reaching a GlusterCluster's brick agents: gRPC over mutual TLS with the
//! operator's client certificate. The operator and the CSI controller both use this.

use std::time::Duration;

use gk_agent::proto::brick_agent_client::BrickAgentClient;
use gk_agent::proto::HealthRequest;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
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
        .timeout(Duration::from_secs(180));
    Ok(BrickAgentClient::new(endpoint.connect_lazy()))
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
    /// The directory, as glusterd sees it, under which this node's bricks live.
    pub brick_root: String,
    pub total_bytes: u64,
    pub free_bytes: u64,
    pub client: BrickAgentClient<Channel>,
}

/// A storage node whose agent did not answer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeDown {
    pub node: String,
    pub why: String,
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

/// The cluster's brick agents that answer a health call, in spec order, and the nodes whose
/// agent does not (with why). Brick pods are found by the cluster label and the node
/// annotation the operator puts on them.
pub async fn discover(
    client: &kube::Client,
    port: u16,
    gc: &GlusterCluster,
    creds: &AgentCredentials,
) -> Result<(Vec<NodeAgent>, Vec<NodeDown>), AgentsError> {
    let ns = gc.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("{}={}", names::LABEL_CLUSTER, gc.name_any())))
        .await?;
    let mut up = Vec::new();
    let mut down = Vec::new();
    for node in &gc.spec.nodes {
        let pod = list
            .items
            .iter()
            .find(|p| p.annotations().get(names::ANNOTATION_NODE) == Some(&node.name));
        let ip = pod
            .and_then(|p| p.status.as_ref())
            .and_then(|s| s.pod_ip.clone());
        let Some(ip) = ip else {
            down.push(NodeDown {
                node: node.name.clone(),
                why: "brick pod not running yet".into(),
            });
            continue;
        };
        let mut client = connect(&ip, port, creds)?;
        match client.health(HealthRequest {}).await {
            Ok(h) => {
                let h = h.into_inner();
                up.push(NodeAgent {
                    node: node.name.clone(),
                    address: h.address,
                    brick_root: h.brick_root,
                    total_bytes: h.brick_root_total_bytes,
                    free_bytes: h.brick_root_free_bytes,
                    client,
                });
            }
            Err(s) => down.push(NodeDown {
                node: node.name.clone(),
                why: format!("agent at {ip} did not answer: {}", s.message()),
            }),
        }
    }
    Ok((up, down))
}
