//! Reaching a brick agent from wherever kubectl runs: a port-forward to the brick pod's
//! agent port through the apiserver, mutual TLS over it with the operator's client
//! certificate (read from its Secret), and only the agent's read-only calls.

use std::time::Duration;

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use gk_agent_proto::v1::HealthRequest;
use gk_api::agents::{endpoint, read_credentials, AgentCredentials, AGENT_PORT};
use gk_api::crd::GlusterCluster;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use kube::{Api, ResourceExt};
use tonic::transport::Channel;

use crate::cluster::Scope;
use crate::PluginError;

/// How long a brick agent may take to answer the health call that picks it.
const PICK_WAIT: Duration = Duration::from_secs(10);

/// A brick agent reached through a port-forward.
pub struct Agent {
    /// The storage node the agent runs on.
    pub node: String,
    pub client: BrickAgentClient<Channel>,
}

/// A client for the agent of one brick pod. Every connection the channel makes is a new
/// port-forward stream; the certificate is checked against the cluster's agent name.
pub fn through_portforward(
    scope: &Scope,
    pod: &Pod,
    creds: &AgentCredentials,
) -> Result<BrickAgentClient<Channel>, PluginError> {
    let pods: Api<Pod> =
        Api::namespaced(scope.client.clone(), &pod.namespace().unwrap_or_default());
    let name = pod.name_any();
    let connector = tower::service_fn(move |_: tonic::codegen::http::Uri| {
        let (pods, name) = (pods.clone(), name.clone());
        async move {
            let failed = |reason: String| PluginError::PortForward {
                pod: name.clone(),
                port: AGENT_PORT,
                reason,
            };
            let mut pf = pods
                .portforward(&name, &[AGENT_PORT])
                .await
                .map_err(|e| failed(e.to_string()))?;
            let stream = pf
                .take_stream(AGENT_PORT)
                .ok_or_else(|| failed("the apiserver gave no stream for the port".into()))?;
            // The forwarder's task carries the bytes; it ends when the stream is closed.
            tokio::spawn(async move {
                let _ = pf.join().await;
            });
            Ok::<_, PluginError>(TokioIo::new(stream))
        }
    });
    // The address is a placeholder: the connector decides where bytes go.
    let channel = endpoint("localhost", AGENT_PORT, creds)?.connect_with_connector_lazy(connector);
    Ok(BrickAgentClient::new(channel))
}

/// The first brick agent of the cluster that answers, in the spec's node order; or, with
/// `node`, that node's agent only.
pub async fn pick(
    scope: &Scope,
    gc: &GlusterCluster,
    node: Option<&str>,
) -> Result<Agent, PluginError> {
    let creds = read_credentials(&scope.client, gc).await?;
    let pods = scope.brick_pods(gc).await?;
    let mut why = Vec::new();
    for (n, pod) in pods
        .iter()
        .filter(|(n, _)| node.is_none_or(|want| want == n))
    {
        let mut client = through_portforward(scope, pod, &creds)?;
        match tokio::time::timeout(PICK_WAIT, client.health(HealthRequest {})).await {
            Ok(Ok(_)) => {
                return Ok(Agent {
                    node: n.clone(),
                    client,
                })
            }
            Ok(Err(s)) => why.push(format!("{n}: {}", s.message())),
            Err(_) => why.push(format!("{n}: no answer in {PICK_WAIT:?}")),
        }
    }
    if let Some(n) = node {
        if !pods.iter().any(|(p, _)| p == n) {
            why.push(format!(
                "node {n} has no brick pod (the cluster's nodes: {})",
                gc.spec
                    .nodes
                    .iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if why.is_empty() {
        why.push("it has no brick pods".into());
    }
    Err(PluginError::NoAgent {
        cluster: format!("{}/{}", gc.namespace().unwrap_or_default(), gc.name_any()),
        why: why.join("; "),
    })
}
