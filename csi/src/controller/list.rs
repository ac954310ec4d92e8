//! ListVolumes: every subdirectory volume of every pool, paginated.

use csi_proto::v1 as csi;
use tonic::{Request, Response, Status};

use super::{ControllerService, Reply};
use crate::backend::PoolResolver;
use crate::params::VolumeId;
use crate::request::{invalid, volume_context};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn list(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        let req = req.into_inner();
        if req.max_entries < 0 {
            return Err(invalid("max_entries", "cannot be negative"));
        }
        let start: usize = if req.starting_token.is_empty() {
            0
        } else {
            req.starting_token.parse().map_err(|_| {
                Status::aborted(format!(
                    "starting_token {:?} is not one this driver gave",
                    req.starting_token
                ))
            })?
        };
        let mut all = Vec::new();
        for key in self.pools.pools().await? {
            let mut p = self.pools.resolve(&key).await?;
            let mut dirs = p.dirs(&key).await?;
            dirs.sort();
            for (dir, bytes) in dirs {
                all.push(csi::Volume {
                    capacity_bytes: bytes as i64,
                    volume_id: VolumeId::Subdir {
                        pool: key.clone(),
                        dir: dir.clone(),
                    }
                    .to_string(),
                    volume_context: volume_context(&key, &p.volume, &p.servers, &dir, p.tls),
                    content_source: None,
                    accessible_topology: vec![],
                });
            }
        }
        for (key, d) in self.pools.list_dedicated().await? {
            all.push(csi::Volume {
                capacity_bytes: d.bytes as i64,
                volume_id: VolumeId::Dedicated {
                    volume: key.clone(),
                }
                .to_string(),
                volume_context: volume_context(
                    &key,
                    &d.volume,
                    &d.servers,
                    d.subdir.as_deref().unwrap_or(""),
                    d.tls,
                ),
                content_source: None,
                accessible_topology: vec![],
            });
        }
        if start > all.len() {
            return Err(Status::aborted(format!(
                "starting_token {start} is past the {} volumes",
                all.len()
            )));
        }
        let take = if req.max_entries == 0 {
            usize::MAX
        } else {
            req.max_entries as usize
        };
        let end = start.saturating_add(take).min(all.len());
        let next_token = if end < all.len() {
            end.to_string()
        } else {
            String::new()
        };
        Ok(Response::new(csi::ListVolumesResponse {
            entries: all[start..end]
                .iter()
                .cloned()
                .map(|v| csi::list_volumes_response::Entry {
                    volume: Some(v),
                    status: None,
                })
                .collect(),
            next_token,
        }))
    }
}
