//! ListVolumes: every subdirectory volume of every pool, paginated.

use csi_proto::v1 as csi;
use tonic::{Request, Response};

use super::{ControllerService, Reply};
use crate::backend::PoolResolver;
use crate::params::VolumeId;
use crate::request::{page, volume_context};

impl<P: PoolResolver> ControllerService<P> {
    pub(super) async fn list(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        let req = req.into_inner();
        let mut all = Vec::new();
        for key in self.all_pools().await? {
            let mut p = self.resolve(&key).await?;
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
                    volume_context: volume_context(
                        &key,
                        &p.volume,
                        &p.servers,
                        &dir,
                        p.tls,
                        p.tls_secret.as_deref(),
                        p.profile,
                    ),
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
                    None,
                    d.profile,
                ),
                content_source: None,
                accessible_topology: vec![],
            });
        }
        let (entries, next_token) = page(&all, req.max_entries, &req.starting_token, "volumes")?;
        Ok(Response::new(csi::ListVolumesResponse {
            entries: entries
                .into_iter()
                .map(|v| csi::list_volumes_response::Entry {
                    volume: Some(v),
                    status: None,
                })
                .collect(),
            next_token,
        }))
    }
}
