//! Reaching brick agents: gRPC over mutual TLS with the cluster's operator certificate.

use std::time::Duration;

use gk_agent::proto::brick_agent_client::BrickAgentClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// The agent's gRPC port in every brick pod.
pub const AGENT_PORT: u16 = 24050;

/// The name the agents' serving certificate carries and the operator checks, whatever
/// address (pod IP or DNS name) it dials.
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
pub enum DialError {
    #[error("agent address {0:?} is not valid: {1}")]
    Address(String, String),
}

/// A client for the agent at `ip`. The connection is made lazily with a short connect
/// timeout, so a dead node fails its own calls quickly instead of hanging the reconcile.
pub fn connect(
    ip: &str,
    port: u16,
    creds: &AgentCredentials,
) -> Result<BrickAgentClient<Channel>, DialError> {
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
        .map_err(|e| DialError::Address(ip.into(), e.to_string()))?
        .tls_config(tls)
        .map_err(|e| DialError::Address(ip.into(), e.to_string()))?
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(180));
    Ok(BrickAgentClient::new(endpoint.connect_lazy()))
}
