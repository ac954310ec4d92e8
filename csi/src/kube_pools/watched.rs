//! What the CSI controller reads from the API, kept current by watches: GlusterVolumes (pools
//! and dedicated volumes), GlusterClusters and brick pods. A CreateVolume then reads memory
//! instead of making four API calls.
//!
//! A watch's cache can only lag the API by the time its events take to arrive; nothing here
//! is refreshed by a timer. Until each watch has listed once, readers wait (bounded), so a
//! freshly started controller never answers from an empty cache.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_api::names::{BRICK_POD_SELECTOR, LABEL_CLUSTER};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tonic::Status;

/// How long a call waits for the watches' first lists before it is answered Unavailable.
const SYNC_WAIT: Duration = Duration::from_secs(30);

/// The watched objects. Dropping it stops the watches.
pub struct Watched {
    volumes: Store<GlusterVolume>,
    clusters: Store<GlusterCluster>,
    pods: Store<Pod>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts a watch of `api` (with `config`) that fills a store, retrying with backoff when
/// the API is unreachable.
fn watch<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, JoinHandle<()>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(error = %e, "watch of the API failed; retrying");
            }
        });
    (reader, tokio::spawn(stream))
}

impl Watched {
    /// Starts the watches (cluster-wide: pools and clusters may live in any namespace; only
    /// pods carrying the brick pod label are watched). Must be called inside a runtime.
    pub fn start(client: kube::Client) -> Self {
        let (volumes, v) = watch(
            Api::<GlusterVolume>::all(client.clone()),
            watcher::Config::default(),
        );
        let (clusters, c) = watch(
            Api::<GlusterCluster>::all(client.clone()),
            watcher::Config::default(),
        );
        let (pods, p) = watch(
            Api::<Pod>::all(client),
            watcher::Config::default().labels(BRICK_POD_SELECTOR),
        );
        Self {
            volumes,
            clusters,
            pods,
            tasks: vec![v, c, p],
        }
    }

    /// Waits until every watch has listed once.
    pub async fn synced(&self) -> Result<(), Status> {
        let all = async {
            self.volumes.wait_until_ready().await?;
            self.clusters.wait_until_ready().await?;
            self.pods.wait_until_ready().await
        };
        match tokio::time::timeout(SYNC_WAIT, all).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Status::unavailable(
                "the watches of GlusterVolumes, GlusterClusters and brick pods stopped",
            )),
            Err(_) => Err(Status::unavailable(format!(
                "GlusterVolumes, GlusterClusters and brick pods not listed within {}s; is the \
                 Kubernetes API reachable and may this service account list and watch them?",
                SYNC_WAIT.as_secs()
            ))),
        }
    }

    pub fn volume(&self, namespace: &str, name: &str) -> Option<Arc<GlusterVolume>> {
        self.volumes.get(&ObjectRef::new(name).within(namespace))
    }

    pub fn volumes(&self) -> Vec<Arc<GlusterVolume>> {
        self.volumes.state()
    }

    pub fn cluster(&self, namespace: &str, name: &str) -> Option<Arc<GlusterCluster>> {
        self.clusters.get(&ObjectRef::new(name).within(namespace))
    }

    /// The brick pods of `gc` (its namespace, its cluster label).
    pub fn brick_pods(&self, gc: &GlusterCluster) -> Vec<Arc<Pod>> {
        let ns = gc.namespace();
        let name = gc.name_any();
        self.pods
            .state_filter(|p| p.namespace() == ns && p.labels().get(LABEL_CLUSTER) == Some(&name))
    }
}
