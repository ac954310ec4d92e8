//! Client side of the node plugin's liveness helper (`gk-csi-liveness`, in place of the
//! kubernetes-csi livenessprobe sidecar, whose Go module the module proxy here does not serve):
//! the plugin's CSI `Probe`, over its unix socket.

use std::path::Path;
use std::time::Duration;

use csi_proto::v1::identity_client::IdentityClient;
use csi_proto::v1::ProbeRequest;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::Status;

/// A lazy gRPC channel to the plugin's CSI socket: every call connects anew if the socket
/// went away, so a restarted plugin is picked up.
pub fn csi_channel(socket: &Path) -> Channel {
    let socket = socket.to_path_buf();
    Endpoint::from_static("http://[::]:50051")
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
}

/// Whether the plugin says it is ready (CSI `Probe`; an unset `ready` means ready).
pub async fn probe(channel: Channel) -> Result<bool, Status> {
    let r = IdentityClient::new(channel)
        .probe(ProbeRequest {})
        .await?
        .into_inner();
    Ok(r.ready.unwrap_or(true))
}
