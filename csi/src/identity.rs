//! The CSI Identity service: who the driver is, what it offers, and whether it is ready.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use crate::DRIVER_NAME;

type Reply<T> = Result<Response<T>, Status>;

pub struct IdentityService {
    /// Whether this plugin serves the Controller service (advertised as a capability).
    controller: bool,
    /// Probe's answer: false until the node plugin has checked the mounts it found.
    ready: Arc<AtomicBool>,
}

impl IdentityService {
    pub fn new(controller: bool, ready: Arc<AtomicBool>) -> Self {
        Self { controller, ready }
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
        Ok(Response::new(csi::ProbeResponse {
            ready: Some(self.ready.load(Ordering::Relaxed)),
        }))
    }
}
