//! The brick agent: runs beside glusterd in every brick pod. The operator and the CSI
//! controller manage gluster only through its gRPC API, served over mutual TLS.

mod convert;
mod error;
pub mod hung;
mod locks;
pub mod projects;
pub mod quota;
pub mod scope;
pub mod server;
pub mod snapshot;
pub mod spec;
pub mod tls;

pub use error::AgentError;
pub use server::{Agent, AgentConfig};

/// The agent's gRPC API (the `gk-agent-proto` crate), which it serves.
pub use gk_agent_proto::v1 as proto;

use gk_gluster::{CommandRunner, Gluster, GlusterError};
use serde::Serialize;

/// The local glusterd's health as the agent reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Health {
    pub version: String,
    pub peers: usize,
    pub peers_connected: usize,
}

impl Health {
    /// Ready means glusterd answers and every peer it knows is connected.
    pub fn ready(&self) -> bool {
        self.peers_connected == self.peers
    }
}

/// Asks glusterd for its peer status. Fails when glusterd does not answer. The CLI's
/// version is asked once per `version` cell: the binary does not change under a running
/// agent, and every CLI run costs a process start.
pub async fn health<R: CommandRunner>(
    gluster: &Gluster<R>,
    version: &tokio::sync::OnceCell<String>,
) -> Result<Health, GlusterError> {
    let version = version.get_or_try_init(|| gluster.version()).await?.clone();
    let peers = gluster.peer_status().await?;
    Ok(Health {
        version,
        peers: peers.len(),
        peers_connected: peers.iter().filter(|p| p.connected).count(),
    })
}

/// Serves the agent on `listener` with mutual TLS until `shutdown` resolves. An agent for a
/// pool made by hand ([`Agent::for_external_volumes`]) serves only the CSI driver's RPCs.
pub async fn serve<R: CommandRunner + Clone + 'static>(
    agent: Agent<R>,
    listener: tokio::net::TcpListener,
    tls: tonic::transport::ServerTlsConfig,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    let external = agent.scope().is_some();
    let service = proto::brick_agent_server::BrickAgentServer::new(agent);
    let mut server = tonic::transport::Server::builder().tls_config(tls)?;
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    if external {
        server
            .add_service(scope::ExternalOnly { inner: service })
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
    } else {
        server
            .add_service(service)
            .serve_with_incoming_shutdown(incoming, shutdown)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_peer_is_connected() {
        let h = |peers, peers_connected| Health {
            version: "glusterfs 10.3".into(),
            peers,
            peers_connected,
        };
        assert!(h(0, 0).ready());
        assert!(h(2, 2).ready());
        assert!(!h(2, 1).ready());
    }
}
