//! Pools made by hand (external mode): a gluster volume that no operator made, described by
//! a Secret of type `glusterkube.dev/external-pool` in the CSI driver's namespace (its
//! servers, the volume, the brick agents its owners started on their servers, and the TLS
//! material). Subdirectory PVs on it work as on a pool GlusterVolume: the controller asks a
//! brick agent for each directory and limit; no brick pod runs. `docs/external.md` says
//! which gluster operations that takes and why an agent, not the gluster CLI's
//! `--remote-host`, does them.

pub mod secret;

use std::time::Duration;

use gk_agent_proto::v1::HealthRequest;
use gk_api::volume_id::EXTERNAL_POOL_SECRET_TYPE;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use tonic::Status;

use crate::backend::Pool;
use crate::params::ObjectKey;
pub use secret::{ExternalPool, SecretError};

/// How long an agent has to answer before the next one is asked.
const AGENT_WAIT: Duration = Duration::from_secs(5);

/// Resolves external pools from their Secrets, which live in the driver's own namespace
/// (the node plugins' mount pods mount the gluster certificate from there).
#[derive(Clone)]
pub struct ExternalPools {
    pub client: kube::Client,
    /// The CSI driver's namespace.
    pub namespace: String,
}

impl ExternalPools {
    pub fn new(client: kube::Client, namespace: String) -> Self {
        Self { client, namespace }
    }

    fn api(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The pool the Secret `key` describes, with a brick agent that answers. A missing or
    /// wrong Secret is FAILED_PRECONDITION, not NOT_FOUND: the pool and its directories
    /// still exist without it, so a PV on it must not count as deleted.
    pub async fn resolve(&self, key: &ObjectKey) -> Result<Pool, Status> {
        if key.namespace != self.namespace {
            return Err(Status::failed_precondition(format!(
                "parameters.pool: {key}: an external pool's Secret must live in the CSI \
                 driver's namespace {} (its mount pods mount the gluster certificate from \
                 there)",
                self.namespace
            )));
        }
        let secret = self
            .api()
            .get_opt(&key.name)
            .await
            .map_err(|e| Status::unavailable(format!("reading Secret {key}: {e}")))?
            .ok_or_else(|| {
                Status::failed_precondition(format!(
                    "external pool Secret {key} does not exist; create it as docs/external.md \
                     shows"
                ))
            })?;
        let pool = parse(key, &secret).map_err(|e| Status::failed_precondition(e.to_string()))?;
        let mut why = Vec::new();
        for (host, port) in &pool.agents {
            let mut agent = gk_api::agents::connect(host, *port, &pool.credentials)
                .map_err(|e| Status::failed_precondition(format!("Secret {key}: {e}")))?;
            match tokio::time::timeout(AGENT_WAIT, agent.health(HealthRequest {})).await {
                Ok(Ok(_)) => {
                    let nodes = pool
                        .agents
                        .iter()
                        .filter_map(|(h, p)| gk_api::agents::connect(h, *p, &pool.credentials).ok())
                        .collect();
                    return Ok(Pool {
                        agent,
                        nodes,
                        volume: pool.volume,
                        servers: pool.servers,
                        tls: pool.management_tls,
                        tls_secret: pool.gluster_certificate.then(|| key.name.clone()),
                        total_bytes: None,
                        // A pool made by hand carries its owners' options, no profile of ours.
                        profile: None,
                    });
                }
                Ok(Err(s)) => why.push(format!("{host}:{port}: {}", s.message())),
                Err(_) => why.push(format!("{host}:{port}: no answer in {AGENT_WAIT:?}")),
            }
        }
        Err(Status::unavailable(format!(
            "external pool {key}: no brick agent answers ({}); gk-agent must run on the \
             pool's servers as docs/external.md shows",
            why.join("; ")
        )))
    }

    /// Every external pool: the Secrets of its type in the driver's namespace.
    pub async fn pools(&self) -> Result<Vec<ObjectKey>, Status> {
        let list = self
            .api()
            .list_metadata(
                &ListParams::default().fields(&format!("type={EXTERNAL_POOL_SECRET_TYPE}")),
            )
            .await
            .map_err(|e| Status::unavailable(format!("listing external pool Secrets: {e}")))?;
        let mut keys: Vec<ObjectKey> = list
            .items
            .into_iter()
            .filter_map(|s| {
                Some(ObjectKey {
                    namespace: self.namespace.clone(),
                    name: s.metadata.name?,
                })
            })
            .collect();
        keys.sort_by_key(|k| k.to_string());
        Ok(keys)
    }
}

/// The pool a Secret describes.
pub fn parse(key: &ObjectKey, secret: &Secret) -> Result<ExternalPool, SecretError> {
    let data = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    ExternalPool::parse(key, secret.type_.as_deref(), &data)
}
