//! What the kubelet asks of a mounted volume: usage (NodeGetVolumeStats), health
//! (NodeGetVolumeHealth) and its size after an expansion (NodeExpandVolume).

use std::path::{Path, PathBuf};

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{NodeService, Reply};
use crate::request::{invalid, mounted_path};

impl NodeService {
    pub(super) async fn stats(
        &self,
        req: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Reply<csi::NodeGetVolumeStatsResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let path = mounted_path(&self.kubelet, &req.volume_path)?;
        let st = nix::sys::statvfs::statvfs(&path)
            .map_err(|e| Status::internal(format!("statvfs {}: {e}", path.display())))?;
        let frag = st.fragment_size() as i64;
        let usage =
            |unit: csi::volume_usage::Unit, total: i64, avail: i64, free: i64| csi::VolumeUsage {
                available: avail,
                total,
                used: total - free,
                unit: unit as i32,
            };
        Ok(Response::new(csi::NodeGetVolumeStatsResponse {
            usage: vec![
                usage(
                    csi::volume_usage::Unit::Bytes,
                    st.blocks() as i64 * frag,
                    st.blocks_available() as i64 * frag,
                    st.blocks_free() as i64 * frag,
                ),
                usage(
                    csi::volume_usage::Unit::Inodes,
                    st.files() as i64,
                    st.files_available() as i64,
                    st.files_free() as i64,
                ),
            ],
        }))
    }

    pub(super) async fn volume_health(
        &self,
        req: Request<csi::NodeGetVolumeHealthRequest>,
    ) -> Reply<csi::NodeGetVolumeHealthResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        // The paths asked about, or else every target this plugin published the volume at.
        let mut asked = Vec::new();
        for (field, p) in [
            ("volume_publish_path", &req.volume_publish_path),
            ("staging_target_path", &req.staging_target_path),
        ] {
            if !p.is_empty() {
                asked.push(self.kubelet.volume(field, p)?);
            }
        }
        let paths: Vec<PathBuf> = asked
            .into_iter()
            .chain(
                if req.volume_publish_path.is_empty() && req.staging_target_path.is_empty() {
                    self.state
                        .load(&req.volume_id)
                        .ok()
                        .flatten()
                        .map(|v| v.targets.into_iter().map(|t| t.path).collect())
                        .unwrap_or_default()
                } else {
                    Vec::new()
                },
            )
            .collect();
        let entries = paths
            .iter()
            .filter_map(|p| health(p))
            .map(
                |(status, reason, message)| csi::volume_health::VolumeHealthEntry {
                    status: status as i32,
                    reason: reason.into(),
                    message,
                },
            )
            .collect();
        Ok(Response::new(csi::NodeGetVolumeHealthResponse {
            volume_health: Some(csi::VolumeHealth {
                volume_id: req.volume_id,
                health_statuses: entries,
            }),
        }))
    }

    pub(super) async fn expand(
        &self,
        req: Request<csi::NodeExpandVolumeRequest>,
    ) -> Reply<csi::NodeExpandVolumeResponse> {
        let req = req.into_inner();
        if req.volume_id.is_empty() {
            return Err(invalid("volume_id", "is required"));
        }
        let path = mounted_path(&self.kubelet, &req.volume_path)?;
        let st = nix::sys::statvfs::statvfs(&path)
            .map_err(|e| Status::not_found(format!("{}: {e}", path.display())))?;
        // Quotas are enforced by the bricks; the mount already shows the new size.
        Ok(Response::new(csi::NodeExpandVolumeResponse {
            capacity_bytes: (st.blocks() as u64 * st.fragment_size()) as i64,
        }))
    }
}

/// Why a mounted volume is unhealthy, or None when it answers.
pub fn health(path: &Path) -> Option<(csi::VolumeHealthErrorType, &'static str, String)> {
    match nix::sys::statvfs::statvfs(path) {
        Ok(_) => None,
        Err(nix::Error::ENOTCONN) => Some((
            csi::VolumeHealthErrorType::Inaccessible,
            "TransportEndpointNotConnected",
            format!(
                "{}: the gluster client behind this mount is gone",
                path.display()
            ),
        )),
        Err(nix::Error::ENOENT) => Some((
            csi::VolumeHealthErrorType::Inaccessible,
            "NotMounted",
            format!("{} does not exist", path.display()),
        )),
        Err(e) => Some((
            csi::VolumeHealthErrorType::Degraded,
            "StatFailed",
            format!("{}: {e}", path.display()),
        )),
    }
}
