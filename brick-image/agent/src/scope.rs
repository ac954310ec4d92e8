//! An agent for a pool made by hand (external mode): its owners start it on their servers
//! for the CSI driver, and it serves only what the driver needs (reading the volume,
//! subdirectories with limits, snapshots), only on the volumes it was started for. Nothing
//! that creates, stops, deletes or reshapes a volume, touches peers or frees bricks is
//! served, whoever holds a client certificate.

use std::collections::BTreeSet;
use std::convert::Infallible;

use tonic::body::Body;
use tonic::codegen::{http, BoxFuture, Context, Poll, Service};
use tonic::server::NamedService;
use tonic::Status;

use crate::proto::brick_agent_server::BrickAgentServer;

/// The RPCs an external-mode agent serves: read-only ones, and the subdirectory and
/// snapshot RPCs of CSI subdirectory volumes.
pub const EXTERNAL_RPCS: [&str; 18] = [
    "Health",
    "VolumeInfo",
    "VolumeStatus",
    "HealInfo",
    "HealCount",
    "QuotaList",
    "QuotaBacklog",
    "SubdirCreate",
    "SubdirDelete",
    "SubdirExpand",
    "SubdirList",
    "SubdirGet",
    "SubdirEnforce",
    "SubdirFill",
    "SnapshotCreate",
    "SnapshotGet",
    "SnapshotDelete",
    "SnapshotList",
];

/// The volumes an external-mode agent serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub volumes: BTreeSet<String>,
}

impl Scope {
    /// Refuses a volume outside the scope, naming the request field.
    pub fn check(&self, field: &str, volume: &str) -> Result<(), crate::AgentError> {
        if self.volumes.contains(volume) {
            return Ok(());
        }
        Err(crate::AgentError::Denied(format!(
            "{field}: volume {volume:?} is not one this agent serves (it was started with \
             --external-volumes {})",
            self.volumes.iter().cloned().collect::<Vec<_>>().join(",")
        )))
    }
}

/// Whether an external-mode agent serves the gRPC method at `path`
/// (`/glusterkube.agent.v1.BrickAgent/<Rpc>`).
pub fn serves(path: &str) -> bool {
    path.strip_prefix(&format!(
        "/{}/",
        <BrickAgentServer<()> as NamedService>::NAME
    ))
    .is_some_and(|rpc| EXTERNAL_RPCS.contains(&rpc))
}

/// The agent's gRPC service with every RPC outside [`EXTERNAL_RPCS`] refused
/// (PERMISSION_DENIED, naming it) before it reaches the agent.
#[derive(Clone)]
pub struct ExternalOnly<S> {
    pub inner: S,
}

impl<S> Service<http::Request<Body>> for ExternalOnly<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let path = req.uri().path().to_string();
        if serves(&path) {
            return Box::pin(self.inner.call(req));
        }
        tracing::warn!(rpc = %path, "refused: not served to the CSI driver of a pool made by hand");
        let status = Status::permission_denied(format!(
            "{path} is not served by an agent for a pool made by hand: it serves only \
             {} (the CSI driver's subdirectory volumes); manage the pool with the gluster \
             CLI on its servers",
            EXTERNAL_RPCS.join(", ")
        ));
        Box::pin(async move { Ok(status.into_http()) })
    }
}

impl<S: NamedService> NamedService for ExternalOnly<S> {
    const NAME: &'static str = S::NAME;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_csi_drivers_rpcs_are_served() {
        let p = |rpc: &str| format!("/glusterkube.agent.v1.BrickAgent/{rpc}");
        for rpc in ["SubdirCreate", "VolumeStatus", "SnapshotList", "Health"] {
            assert!(serves(&p(rpc)), "{rpc}");
        }
        for rpc in [
            "VolumeCreate",
            "VolumeDelete",
            "VolumeStop",
            "VolumeSet",
            "VolumeReset",
            "PeerDetach",
            "PeerProbe",
            "AddBrick",
            "RemoveBrickCommit",
            "RemoveBrickStop",
            "ReplaceBrick",
            "BrickRelease",
            "RebalanceStart",
            "RebalanceStop",
            "SubdirCreateX",
        ] {
            assert!(!serves(&p(rpc)), "{rpc}");
        }
        assert!(!serves("/other.Service/SubdirCreate"));
        let scope = Scope {
            volumes: BTreeSet::from(["legacy".to_string()]),
        };
        assert!(scope.check("volume", "legacy").is_ok());
        let e = scope.check("volume", "other").unwrap_err().to_string();
        assert!(e.contains("volume") && e.contains("legacy"), "{e}");
    }
}
