//! The node and its trusted pool: Health, PeerProbe, PeerDetach, PeerStatus.

use super::*;

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn health_rpc(&self, _: Request<HealthRequest>) -> Reply<HealthResponse> {
        tracing::debug!(rpc = "Health", "request");
        let h = crate::health(&self.gluster, &self.version)
            .await
            .map_err(AgentError::from)?;
        let disks: Vec<Disk> = self
            .config
            .brick_roots
            .iter()
            .map(|root| {
                let (total_bytes, free_bytes) = rustix::fs::statvfs(root)
                    .map(|st| (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize))
                    .unwrap_or_default();
                let (project_quotas, project_quotas_reason) = projects::disk_quotas(root);
                Disk {
                    brick_root: root.display().to_string(),
                    total_bytes,
                    free_bytes,
                    project_quotas,
                    project_quotas_reason,
                }
            })
            .collect();
        let first = disks.first().cloned().unwrap_or_default();
        Ok(Response::new(HealthResponse {
            agent_version: env!("CARGO_PKG_VERSION").into(),
            gluster_version: h.version,
            peers: h.peers as u32,
            peers_connected: h.peers_connected as u32,
            address: self.config.advertise_address.clone(),
            brick_root: first.brick_root,
            brick_root_total_bytes: first.total_bytes,
            brick_root_free_bytes: first.free_bytes,
            disks,
        }))
    }

    pub(super) async fn peer_probe_rpc(
        &self,
        req: Request<PeerRequest>,
    ) -> Reply<PeerStatusResponse> {
        let host = req.into_inner().host;
        log_rpc("PeerProbe", "");
        Brick::new(&host, "/x").map_err(|e| AgentError::invalid("host", e.to_string()))?;
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        if !peers.iter().any(|p| p.hostname == host) {
            self.gluster
                .peer_probe(&host)
                .await
                .map_err(AgentError::from)?;
        }
        self.peer_status(Request::new(PeerStatusRequest {})).await
    }

    pub(super) async fn peer_detach_rpc(
        &self,
        req: Request<PeerRequest>,
    ) -> Reply<PeerStatusResponse> {
        let PeerRequest { host, force } = req.into_inner();
        log_rpc("PeerDetach", "");
        Brick::new(&host, "/x").map_err(|e| AgentError::invalid("host", e.to_string()))?;
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        if peers.iter().any(|p| p.hostname == host) {
            if force {
                self.gluster.peer_detach_force(&host).await
            } else {
                self.gluster.peer_detach(&host).await
            }
            .map_err(AgentError::from)?;
        }
        self.peer_status(Request::new(PeerStatusRequest {})).await
    }

    pub(super) async fn peer_status_rpc(
        &self,
        _: Request<PeerStatusRequest>,
    ) -> Reply<PeerStatusResponse> {
        let peers = self.gluster.peer_status().await.map_err(AgentError::from)?;
        Ok(Response::new(PeerStatusResponse {
            peers: peers.iter().map(convert::peer).collect(),
        }))
    }
}
