//! Forming the trusted pool: one node's glusterd probes every other node it does not know.

use gk_agent_proto::v1::{Peer, PeerRequest, PeerStatusRequest};
use gk_api::agents::NodeAgent;

use crate::Error;

/// Whether glusterd's name for a peer is the agent's address: the same name, or that name
/// completed with the cluster's DNS domain. glusterd names a peer that probed it by the reverse
/// lookup of its address, which cluster DNS answers fully qualified
/// (`<pod>.<cluster>-bricks.<ns>.svc.cluster.local`).
pub fn same_host(peer_hostname: &str, address: &str) -> bool {
    peer_hostname
        .strip_prefix(address)
        .is_some_and(|rest| rest.is_empty() || (rest.starts_with('.') && address.contains('.')))
}

async fn peers(agent: &mut NodeAgent) -> Result<Vec<Peer>, Error> {
    Ok(agent
        .client
        .peer_status(PeerStatusRequest {})
        .await
        .map_err(|s| Error::agent(&agent.node, s))?
        .into_inner()
        .peers)
}

/// Makes every answering node a member of one pool and returns the peers of the anchor, the
/// node that formed it, which `up` then holds first.
///
/// The anchor is the node that already has the most peers (the first one in spec order on a
/// tie): a node that answered late joins the pool formed without it, instead of being asked
/// to probe nodes that are already in a pool, which glusterd refuses ("already part of
/// another cluster").
pub async fn form(up: &mut Vec<NodeAgent>) -> Result<Vec<Peer>, Error> {
    if up.len() > 1 {
        let mut best = (0, 0);
        for (i, a) in up.iter_mut().enumerate() {
            let count = peers(a).await?.len();
            if count > best.1 {
                best = (i, count);
            }
        }
        let anchor = up.remove(best.0);
        up.insert(0, anchor);
    }
    let Some((anchor, rest)) = up.split_first_mut() else {
        return Ok(Vec::new());
    };
    let known = peers(anchor).await?;
    let mut probed = false;
    for other in rest.iter() {
        if !known.iter().any(|p| same_host(&p.hostname, &other.address)) {
            tracing::info!(node = %other.node, address = %other.address, "probing peer");
            anchor
                .client
                .peer_probe(PeerRequest {
                    host: other.address.clone(),
                    force: false,
                })
                .await
                .map_err(|s| Error::agent(&anchor.node, s))?;
            probed = true;
        }
    }
    if probed {
        peers(anchor).await
    } else {
        Ok(known)
    }
}

/// Whether every serving node's glusterd sees all its peers connected. A restarted node can
/// take a while to be reconnected (its address changed, and peers re-resolve its name only
/// when DNS caches expire); until then management operations fail on the nodes that do not
/// see it. Err says which.
pub async fn all_connected(up: &mut [NodeAgent]) -> Result<(), crate::plan::NotSafe> {
    use crate::plan::NotSafe;
    for a in up.iter_mut() {
        let peers = match a.client.peer_status(PeerStatusRequest {}).await {
            Ok(r) => r.into_inner().peers,
            Err(s) => {
                return Err(NotSafe::PeerStatus {
                    node: a.node.clone(),
                    message: s.message().to_string(),
                })
            }
        };
        if let Some(p) = peers.iter().find(|p| !p.connected) {
            return Err(NotSafe::PeerDisconnected {
                node: a.node.clone(),
                peer: p.hostname.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_match_by_name_or_its_fully_qualified_form() {
        let a = "demo-gk-node-2-0.demo-bricks.gk-demo.svc";
        assert!(same_host(a, a));
        assert!(same_host(&format!("{a}.cluster.local"), a));
        assert!(!same_host("demo-gk-node-2-0.demo-bricks.gk-demo.svcx", a));
        assert!(!same_host(
            "demo-gk-node-20.demo-bricks.gk-demo.svc",
            "demo-gk-node-2"
        ));
        assert!(!same_host("10.214.2.2", a));
    }
}
