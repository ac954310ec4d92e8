//! The CSI Identity service: who the driver is, what it offers, and whether it is ready.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use crate::DRIVER_NAME;

type Reply<T> = Result<Response<T>, Status>;

/// Why the plugin counts as wedged: Probe fails with it (UNAVAILABLE), and the liveness
/// probe restarts the plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Wedged {
    #[error("the state directory {} takes no write: {error}", .dir.display())]
    StateDir {
        dir: std::path::PathBuf,
        error: String,
    },
    #[error("reading the plugin's mount table: {error}")]
    MountTable { error: String },
    #[error("a FUSE mount covers the plugin's own {}; restart the plugin", .dir.display())]
    Covered { dir: std::path::PathBuf },
    #[error("{}: {error}", .dir.display())]
    Unreadable {
        dir: std::path::PathBuf,
        error: String,
    },
}

/// A check that the plugin is not wedged (its own files answer); blocking, run on a thread of
/// its own under [`LIVENESS_TIMEOUT`].
pub type Liveness = Arc<dyn Fn() -> Result<(), Wedged> + Send + Sync>;

/// How long the liveness check may take before the plugin counts as wedged.
pub const LIVENESS_TIMEOUT: Duration = Duration::from_secs(5);

pub struct IdentityService {
    /// Whether this plugin serves the Controller service (advertised as a capability).
    controller: bool,
    /// Probe's answer: false until the node plugin has checked the mounts it found.
    ready: Arc<AtomicBool>,
    liveness: Option<Liveness>,
}

impl IdentityService {
    pub fn new(controller: bool, ready: Arc<AtomicBool>) -> Self {
        Self {
            controller,
            ready,
            liveness: None,
        }
    }

    /// Probe fails (UNAVAILABLE, so the liveness probe fails and the kubelet restarts the
    /// plugin) when `check` fails or does not return in time.
    pub fn with_liveness(mut self, check: Liveness) -> Self {
        self.liveness = Some(check);
        self
    }
}

#[tonic::async_trait]
impl csi::identity_server::Identity for IdentityService {
    async fn get_plugin_info(
        &self,
        _: Request<csi::GetPluginInfoRequest>,
    ) -> Reply<csi::GetPluginInfoResponse> {
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: DRIVER_NAME.into(),
            vendor_version: env!("CARGO_PKG_VERSION").into(),
            manifest: HashMap::new(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Reply<csi::GetPluginCapabilitiesResponse> {
        use csi::plugin_capability::{
            service::Type as S, volume_expansion::Type as E, Service, Type, VolumeExpansion,
        };
        let mut caps = vec![csi::PluginCapability {
            r#type: Some(Type::VolumeExpansion(VolumeExpansion {
                r#type: E::Online as i32,
            })),
        }];
        if self.controller {
            caps.push(csi::PluginCapability {
                r#type: Some(Type::Service(Service {
                    r#type: S::ControllerService as i32,
                })),
            });
        }
        Ok(Response::new(csi::GetPluginCapabilitiesResponse {
            capabilities: caps,
        }))
    }

    async fn probe(&self, _: Request<csi::ProbeRequest>) -> Reply<csi::ProbeResponse> {
        if let Some(check) = self.liveness.clone() {
            let answered = tokio::time::timeout(
                LIVENESS_TIMEOUT,
                tokio::task::spawn_blocking(move || check()),
            )
            .await;
            match answered {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(why))) => return Err(Status::unavailable(why.to_string())),
                Ok(Err(e)) => return Err(Status::internal(format!("liveness check: {e}"))),
                Err(_) => {
                    return Err(Status::unavailable(format!(
                        "the plugin's own files did not answer within {}s (a hung mount \
                         over them?); restart the plugin",
                        LIVENESS_TIMEOUT.as_secs()
                    )))
                }
            }
        }
        Ok(Response::new(csi::ProbeResponse {
            ready: Some(self.ready.load(Ordering::Relaxed)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csi::identity_server::Identity;

    fn service(check: Liveness) -> IdentityService {
        IdentityService::new(false, Arc::new(AtomicBool::new(true))).with_liveness(check)
    }

    #[tokio::test]
    async fn probe_fails_when_the_plugin_is_wedged() {
        let ok = service(Arc::new(|| Ok(())));
        let r = ok.probe(Request::new(csi::ProbeRequest {})).await.unwrap();
        assert_eq!(r.into_inner().ready, Some(true));

        let broken = service(Arc::new(|| {
            Err(Wedged::StateDir {
                dir: "/var/lib/glusterkube-csi".into(),
                error: "Read-only file system".into(),
            })
        }));
        let e = broken
            .probe(Request::new(csi::ProbeRequest {}))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable);
        assert!(e.message().contains("state directory"), "{e:?}");

        // A check that hangs (a hung mount over the plugin's files) fails by the timeout.
        let hung = service(Arc::new(|| {
            std::thread::sleep(LIVENESS_TIMEOUT + Duration::from_millis(500));
            Ok(())
        }));
        let started = std::time::Instant::now();
        let e = hung
            .probe(Request::new(csi::ProbeRequest {}))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unavailable);
        assert!(e.message().contains("did not answer"), "{e:?}");
        assert!(started.elapsed() < LIVENESS_TIMEOUT + Duration::from_secs(1));
    }
}
