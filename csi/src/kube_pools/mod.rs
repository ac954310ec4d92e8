//! The production pool resolver: a pool is a GlusterVolume; its gluster name and mount
//! servers come from its status, and its agents from its GlusterCluster, reached with the
//! operator's client certificate (which the CSI controller may read, not issue).
//!
//! - `watched`: GlusterVolumes, GlusterClusters and brick pods, kept current by watches;
//! - the agent connections and certificates are kept between calls by gk-api's
//!   `agents::cache`, which the operator uses too.
//!
//! Writes (a dedicated volume's creation, growth and deletion) go to the API; reads come
//! from the watches.

mod watched;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_api::agents::cache::AgentCache;
use gk_api::agents::candidates;
use gk_api::crd::GlusterVolume;
use gk_api::names::INSTANCE_LABEL;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use tonic::Status;

use crate::backend::{Dedicated, Pool, PoolResolver};
use crate::params::{ObjectKey, Provisioning};

/// The claim a dedicated GlusterVolume was made for (namespace/name), when the provisioner
/// named it.
pub const CLAIM_ANNOTATION: &str = "glusterkube.dev/claim";

fn claim_gone(claim: &ObjectKey, key: &ObjectKey) -> Status {
    Status::failed_precondition(format!(
        "PersistentVolumeClaim {claim} no longer exists, so GlusterVolume {key} is not made \
         for it (or was deleted again)"
    ))
}

/// How long CreateVolume waits for a new GlusterVolume before telling the provisioner to
/// call again (it retries with the same name, which finds the same volume).
const READY_WAIT: Duration = Duration::from_secs(120);

/// The label the driver puts on the GlusterVolumes it makes for dedicated PVs.
fn is_dedicated(gv: &GlusterVolume) -> bool {
    gv.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/managed-by"))
        .map(String::as_str)
        == Some(crate::DRIVER_NAME)
}

fn ready(gv: &GlusterVolume) -> Option<Dedicated> {
    let s = gv.status.as_ref()?;
    let ready = s
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let m = s.mount.as_ref()?;
    ready.then(|| {
        let mut servers = vec![m.volfile_server.clone()];
        servers.extend(m.backup_volfile_servers.iter().cloned());
        Dedicated {
            volume: m.volume.clone(),
            servers,
            bytes: gv
                .spec
                .size
                .as_ref()
                .and_then(|q| gk_api::units::quantity_bytes("spec.size", &q.0).ok())
                .unwrap_or(0),
            tls: m.tls,
            subdir: Some(crate::backend::DEDICATED_DIR.to_string()),
            profile: gv.spec.profile,
        }
    })
}

fn not_ready_message(gv: &GlusterVolume) -> String {
    gv.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_else(|| "no status yet".into())
}

#[derive(Clone)]
pub struct KubePools {
    pub client: kube::Client,
    /// How long a dedicated volume's creation, deletion or growth is waited for before the
    /// sidecar is told to call again.
    pub wait: Duration,
    watched: Arc<watched::Watched>,
    agents: Arc<AgentCache>,
}

impl KubePools {
    /// Starts the watches; must be called inside a runtime.
    pub fn new(client: kube::Client, agent_port: u16) -> Self {
        Self {
            watched: Arc::new(watched::Watched::start(client.clone())),
            agents: Arc::new(AgentCache::new(agent_port)),
            client,
            wait: READY_WAIT,
        }
    }

    /// The same, waiting `wait` for a dedicated volume's creation, deletion or growth.
    pub fn with_wait(self, wait: Duration) -> Self {
        Self { wait, ..self }
    }

    /// A dedicated volume as clients mount it, its profile its own or its cluster's default.
    fn dedicated(&self, gv: &GlusterVolume) -> Option<Dedicated> {
        let mut d = ready(gv)?;
        if d.profile.is_none() {
            let ns = gv.metadata.namespace.as_deref().unwrap_or_default();
            d.profile = self
                .watched
                .cluster(ns, &gv.spec.cluster)
                .map(|c| c.spec.default_profile);
        }
        Some(d)
    }

    /// A GlusterVolume as last watched, once the watches have listed.
    async fn watched_volume(&self, key: &ObjectKey) -> Result<Option<Arc<GlusterVolume>>, Status> {
        self.watched.synced().await?;
        Ok(self.watched.volume(&key.namespace, &key.name))
    }

    /// Whether the PersistentVolumeClaim still exists (and is not being deleted).
    async fn claim_exists(&self, claim: &ObjectKey) -> Result<bool, Status> {
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &claim.namespace);
        match api.get_opt(&claim.name).await {
            Ok(c) => Ok(c.is_some_and(|c| c.metadata.deletion_timestamp.is_none())),
            Err(e) => Err(Status::unavailable(format!(
                "reading PersistentVolumeClaim {claim}: {e}"
            ))),
        }
    }
}

fn unavailable(pool: &ObjectKey, e: impl std::fmt::Display) -> Status {
    Status::unavailable(format!("pool {pool}: {e}"))
}

impl PoolResolver for KubePools {
    async fn resolve(&self, pool: &ObjectKey) -> Result<Pool, Status> {
        let gv = self.watched_volume(pool).await?.ok_or_else(|| {
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
        let gc = self
            .watched
            .cluster(&pool.namespace, &gv.spec.cluster)
            .ok_or_else(|| {
                unavailable(
                    pool,
                    format!("its GlusterCluster {} does not exist", gv.spec.cluster),
                )
            })?;
        let pods = self.watched.brick_pods(&gc);
        let (up, down) = candidates(&gc, pods.iter().map(|p| p.as_ref()));
        let agent = self
            .agents
            .pick(&self.client, &gc, &up, down)
            .await
            .map_err(|why| unavailable(pool, why))?;
        let nodes = self
            .agents
            .every(&gc, &up)
            .map_err(|why| unavailable(pool, why))?;
        let mut servers = vec![mount.volfile_server];
        servers.extend(mount.backup_volfile_servers);
        let total_bytes = gv
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .map(|c| c.total_bytes.max(0) as u64);
        Ok(Pool {
            agent,
            nodes,
            volume: mount.volume,
            servers,
            tls: mount.tls,
            tls_secret: None,
            total_bytes,
            profile: Some(gv.spec.profile.unwrap_or(gc.spec.default_profile)),
        })
    }

    async fn pools(&self) -> Result<Vec<ObjectKey>, Status> {
        self.watched.synced().await?;
        let mut keys: Vec<ObjectKey> = self
            .watched
            .volumes()
            .iter()
            // A dedicated PV's volume is no pool: its one directory is that PV.
            .filter(|v| !is_dedicated(v))
            .filter(|v| v.status.as_ref().is_some_and(|s| s.mount.is_some()))
            .filter_map(|v| {
                Some(ObjectKey {
                    namespace: v.metadata.namespace.clone()?,
                    name: v.metadata.name.clone()?,
                })
            })
            .collect();
        keys.sort_by_key(|k| k.to_string());
        Ok(keys)
    }

    async fn create_dedicated(
        &self,
        key: &ObjectKey,
        spec: &Provisioning,
        bytes: u64,
        claim: Option<&ObjectKey>,
    ) -> Result<Dedicated, Status> {
        let Provisioning::Dedicated {
            cluster,
            volume_type,
            replica,
            disperse_data,
            disperse_redundancy,
            brick_count,
            profile,
        } = spec
        else {
            return Err(Status::invalid_argument(
                "invalid parameters.mode: not dedicated",
            ));
        };
        let api: Api<GlusterVolume> = Api::namespaced(self.client.clone(), &key.namespace);
        let mut want = json!({
            "cluster": cluster.name, "type": volume_type, "brickCount": brick_count,
            "size": bytes.to_string(), "deletionPolicy": "Delete",
        });
        if let Some(r) = replica {
            want["replica"] = json!(r);
        }
        if let (Some(d), Some(r)) = (disperse_data, disperse_redundancy) {
            want["disperse"] = json!({"data": d, "redundancy": r});
        }
        if let Some(p) = profile {
            want["profile"] = json!(p);
        }
        match api
            .get_opt(&key.name)
            .await
            .map_err(|e| unavailable(key, e))?
        {
            Some(gv) => {
                let have =
                    serde_json::to_value(&gv.spec).map_err(|e| Status::internal(e.to_string()))?;
                for field in ["cluster", "type", "replica", "disperse", "brickCount"] {
                    if have.get(field) != want.get(field) {
                        return Err(Status::already_exists(format!(
                            "GlusterVolume {key} exists with {field} {}, not {}",
                            have.get(field).unwrap_or(&json!(null)),
                            want.get(field).unwrap_or(&json!(null))
                        )));
                    }
                }
            }
            None => {
                // A provisioner's call can still be pending when its claim is deleted.
                if let Some(c) = claim {
                    if !self.claim_exists(c).await? {
                        return Err(claim_gone(c, key));
                    }
                }
                // The volume goes to the operator instance that runs its cluster.
                self.watched.synced().await?;
                let mut labels = json!({"app.kubernetes.io/managed-by": crate::DRIVER_NAME});
                if let Some(instance) = self
                    .watched
                    .cluster(&cluster.namespace, &cluster.name)
                    .and_then(|gc| gc.labels().get(INSTANCE_LABEL).cloned())
                {
                    labels[INSTANCE_LABEL] = json!(instance);
                }
                let annotations = match claim {
                    Some(c) => json!({CLAIM_ANNOTATION: c.to_string()}),
                    None => json!({}),
                };
                let gv: GlusterVolume = serde_json::from_value(json!({
                    "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                    "metadata": {"name": key.name, "namespace": key.namespace, "labels": labels,
                                 "annotations": annotations},
                    "spec": want,
                }))
                .map_err(|e| Status::invalid_argument(format!("invalid parameters: {e}")))?;
                api.create(&PostParams::default(), &gv)
                    .await
                    .map_err(|e| match e {
                        kube::Error::Api(s) if s.code == 422 => {
                            Status::invalid_argument(format!("invalid parameters: {}", s.message))
                        }
                        other => unavailable(key, other),
                    })?;
            }
        }
        let deadline = Instant::now() + self.wait;
        let mut claim_checked = Instant::now();
        loop {
            // Seen through the watch; a volume just made may take a moment to appear there.
            let Some(gv) = self.watched_volume(key).await? else {
                if Instant::now() > deadline {
                    return Err(Status::deadline_exceeded(format!(
                        "GlusterVolume {key} is not in the watch yet; the provisioner will call again"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            if let Some(d) = self.dedicated(&gv) {
                return Ok(d);
            }
            // The claim deleted while its volume was being made: nothing will ever use or
            // delete the volume, so it goes now (only one made for that claim).
            if let Some(c) = claim {
                if claim_checked.elapsed() > Duration::from_secs(5) {
                    claim_checked = Instant::now();
                    let ours = gv.annotations().get(CLAIM_ANNOTATION) == Some(&c.to_string());
                    if ours && !self.claim_exists(c).await? {
                        api.delete(&key.name, &DeleteParams::default())
                            .await
                            .map_err(|e| unavailable(key, e))?;
                        return Err(claim_gone(c, key));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(Status::deadline_exceeded(format!(
                    "GlusterVolume {key} is not ready yet ({}); the provisioner will call again",
                    not_ready_message(&gv)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn get_dedicated(&self, key: &ObjectKey) -> Result<Option<Dedicated>, Status> {
        Ok(self
            .watched_volume(key)
            .await?
            .as_deref()
            .and_then(|gv| self.dedicated(gv)))
    }

    async fn delete_dedicated(&self, key: &ObjectKey) -> Result<(), Status> {
        let api: Api<GlusterVolume> = Api::namespaced(self.client.clone(), &key.namespace);
        match api.delete(&key.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) => return Err(unavailable(key, e)),
        }
        let deadline = Instant::now() + self.wait;
        loop {
            match self.watched_volume(key).await? {
                None => return Ok(()),
                Some(gv) if Instant::now() > deadline => {
                    return Err(Status::deadline_exceeded(format!(
                        "GlusterVolume {key} is still being deleted ({}); the provisioner will call again",
                        not_ready_message(&gv)
                    )))
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    async fn expand_dedicated(&self, key: &ObjectKey, bytes: u64) -> Result<(), Status> {
        let api: Api<GlusterVolume> = Api::namespaced(self.client.clone(), &key.namespace);
        let patched = api
            .patch(
                &key.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"size": bytes.to_string()}})),
            )
            .await
            .map_err(|e| unavailable(key, e))?;
        let generation = patched.metadata.generation;
        let deadline = Instant::now() + self.wait;
        loop {
            let gv = self
                .watched_volume(key)
                .await?
                .ok_or_else(|| Status::not_found(format!("GlusterVolume {key} is gone")))?;
            let status = gv.status.as_ref();
            let observed = status.and_then(|s| s.observed_generation) >= generation;
            let holds = status
                .and_then(|s| s.capacity.as_ref())
                .is_some_and(|c| c.total_bytes.max(0) as u64 >= bytes);
            if observed && holds {
                return Ok(());
            }
            let refused = status.into_iter().flat_map(|s| &s.conditions).find(|c| {
                observed
                    && c.status == "False"
                    && c.type_ == "Progressing"
                    && (c.reason.ends_with("Refused") || c.reason == "InvalidSpec")
            });
            if let Some(c) = refused {
                return Err(Status::failed_precondition(format!(
                    "GlusterVolume {key} cannot grow to {bytes} bytes: {}: {}",
                    c.reason, c.message
                )));
            }
            if Instant::now() > deadline {
                return Err(Status::deadline_exceeded(format!(
                    "GlusterVolume {key} has not grown to {bytes} bytes yet ({}); the resizer \
                     will call again",
                    not_ready_message(&gv)
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn list_dedicated(&self) -> Result<Vec<(ObjectKey, Dedicated)>, Status> {
        self.watched.synced().await?;
        let mut out: Vec<(ObjectKey, Dedicated)> = self
            .watched
            .volumes()
            .iter()
            .filter(|v| is_dedicated(v))
            .filter_map(|v| {
                let key = ObjectKey {
                    namespace: v.metadata.namespace.clone()?,
                    name: v.metadata.name.clone()?,
                };
                Some((key, self.dedicated(v)?))
            })
            .collect();
        out.sort_by_key(|(k, _)| k.to_string());
        Ok(out)
    }

    async fn dedicated_capacity(&self, spec: &Provisioning) -> Result<u64, Status> {
        let (Provisioning::Dedicated { cluster, .. }, Some((data, set))) =
            (spec, spec.data_share())
        else {
            return Err(Status::invalid_argument(
                "invalid parameters.mode: not dedicated",
            ));
        };
        self.watched.synced().await?;
        let gc = self
            .watched
            .cluster(&cluster.namespace, &cluster.name)
            .ok_or_else(|| Status::not_found(format!("GlusterCluster {cluster} does not exist")))?;
        let free = gc
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .map(|c| c.free_bytes.max(0) as u64)
            .unwrap_or(0);
        Ok(free / set * data)
    }
}
