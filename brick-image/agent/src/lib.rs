//! The brick agent. For now it answers one question, used as the brick pod's probe:
//! is the local glusterd up, and which of its peers can it reach?

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

/// Asks glusterd for its version and peer status. Fails when glusterd does not answer.
pub async fn health<R: CommandRunner>(gluster: &Gluster<R>) -> Result<Health, GlusterError> {
    let version = gluster.version().await?;
    let peers = gluster.peer_status().await?;
    Ok(Health {
        version,
        peers: peers.len(),
        peers_connected: peers.iter().filter(|p| p.connected).count(),
    })
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
