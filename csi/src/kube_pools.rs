//! The production pool resolver: a pool is a GlusterVolume; its gluster name and mount
//! servers come from its status, and its agents from its GlusterCluster, reached with the
//! operator's client certificate (which the CSI controller may read, not issue).

use gk_operator::cluster::{agents_with, read_credentials};
use gk_operator::crd::{GlusterCluster, GlusterVolume};
use kube::api::Api;
use tonic::Status;

use crate::backend::{Pool, PoolResolver};
use crate::params::ObjectKey;

#[derive(Clone)]
pub struct KubePools {
    pub client: kube::Client,
    pub agent_port: u16,
}

fn unavailable(pool: &ObjectKey, e: impl std::fmt::Display) -> Status {
    Status::unavailable(format!("pool {pool}: {e}"))
}

impl PoolResolver for KubePools {
    async fn resolve(&self, pool: &ObjectKey) -> Result<Pool, Status> {
        let volumes: Api<GlusterVolume> = Api::namespaced(self.client.clone(), &pool.namespace);
        let gv = volumes
            .get_opt(&pool.name)
            .await
            .map_err(|e| unavailable(pool, e))?
            .ok_or_else(|| {
                Status::not_found(format!("pool GlusterVolume {pool} does not exist"))
            })?;
        let mount = gv
            .status
            .as_ref()
            .and_then(|s| s.mount.clone())
            .ok_or_else(|| {
                unavailable(
                    pool,
                    "the GlusterVolume is not ready yet (no mount servers in its status)",
                )
            })?;
        let clusters: Api<GlusterCluster> = Api::namespaced(self.client.clone(), &pool.namespace);
        let gc = clusters
            .get(&gv.spec.cluster)
            .await
            .map_err(|e| unavailable(pool, format!("cluster {}: {e}", gv.spec.cluster)))?;
        let creds = read_credentials(&self.client, &gc)
            .await
            .map_err(|e| unavailable(pool, e))?;
        let (mut up, down) = agents_with(&self.client, self.agent_port, &gc, &creds)
            .await
            .map_err(|e| unavailable(pool, e))?;
        if up.is_empty() {
            return Err(unavailable(
                pool,
                format!("no brick agent answers: {down:?}"),
            ));
        }
        let agent = up.swap_remove(0).client;
        let mut servers = vec![mount.volfile_server];
        servers.extend(mount.backup_volfile_servers);
        Ok(Pool {
            agent,
            volume: mount.volume,
            servers,
        })
    }

    async fn pools(&self) -> Result<Vec<ObjectKey>, Status> {
        let volumes: Api<GlusterVolume> = Api::all(self.client.clone());
        let list = volumes
            .list(&Default::default())
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        let mut keys: Vec<ObjectKey> = list
            .items
            .into_iter()
            .filter(|v| v.status.as_ref().is_some_and(|s| s.mount.is_some()))
            .filter_map(|v| {
                Some(ObjectKey {
                    namespace: v.metadata.namespace?,
                    name: v.metadata.name?,
                })
            })
            .collect();
        keys.sort_by_key(|k| k.to_string());
        Ok(keys)
    }
}
