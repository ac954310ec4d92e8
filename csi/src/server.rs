//! Serving the CSI services on a unix socket.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use csi_proto::v1::{
    controller_server::ControllerServer, identity_server::IdentityServer, node_server::NodeServer,
};
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;

use crate::backend::PoolResolver;
use crate::controller::ControllerService;
use crate::identity::IdentityService;
use crate::metrics::{Metrics, RpcMetricsLayer};
use crate::node::NodeService;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{path} exists and is not a socket; refusing to remove it")]
    NotASocket { path: String },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("serving gRPC: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// Binds a private unix socket at `path`: a stale socket from an earlier run is removed, any
/// other file there is an error, and the socket is never world-accessible, not even briefly.
pub fn bind(path: &Path) -> Result<UnixListener, ServeError> {
    let io = |what, source| ServeError::Io {
        what,
        path: path.display().to_string(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|e| io("removing stale socket", e))?
        }
        Ok(_) => {
            return Err(ServeError::NotASocket {
                path: path.display().to_string(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("inspecting", e)),
    }
    let dir = path.parent().ok_or_else(|| {
        io(
            "no parent directory for",
            std::io::ErrorKind::InvalidInput.into(),
        )
    })?;
    std::fs::create_dir_all(dir).map_err(|e| io("creating the directory of", e))?;
    // The umask decides the mode bind() gives the socket; make it private before binding.
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    let listener = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener = listener.map_err(|e| io("binding", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| io("restricting", e))?;
    Ok(listener)
}

/// The services one plugin process serves: Identity always, and the Controller and Node
/// services of its mode; every RPC is counted in `metrics`.
pub struct Services<P> {
    pub identity: IdentityService,
    pub controller: Option<std::sync::Arc<ControllerService<P>>>,
    pub node: Option<std::sync::Arc<NodeService>>,
    pub metrics: std::sync::Arc<Metrics>,
}

/// Serves `services` until `shutdown`.
pub async fn serve<P: PoolResolver>(
    listener: UnixListener,
    services: Services<P>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let router = tonic::transport::Server::builder()
        .layer(RpcMetricsLayer(services.metrics))
        .add_service(IdentityServer::new(services.identity))
        .add_optional_service(services.controller.map(ControllerServer::from_arc))
        .add_optional_service(services.node.map(NodeServer::from_arc));
    router
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn socket_is_private_and_only_stale_sockets_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _enter = rt.enter();
        let sock = dir.path().join("csi.sock");
        let l = bind(&sock).unwrap();
        assert_eq!(
            std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
            0o600
        );
        drop(l);
        bind(&sock).expect("a stale socket is replaced");
        let file = dir.path().join("not-a-socket");
        std::fs::write(&file, b"keep me").unwrap();
        assert!(matches!(bind(&file), Err(ServeError::NotASocket { .. })));
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
    }
}
