//! Wiring: the GlusterCluster and GlusterVolume controllers, their shared context, and the
//! error policy.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::crd::{GlusterCluster, GlusterVolume};
use crate::metrics::Metrics;
use crate::Error;

pub const MANAGER: &str = "glusterkube-operator";

/// Label that assigns a GlusterCluster or GlusterVolume to one operator instance. An operator
/// started with an instance name reconciles only objects carrying it; one started without
/// reconciles only objects without the label. Two operators sharing an apiserver (a test next
/// to a deployed one, or a canary) then never fight over the same objects.
pub const INSTANCE_LABEL: &str = "glusterkube.dev/operator-instance";

/// Settings of one operator process.
#[derive(Clone, Debug)]
pub struct Config {
    /// The brick image for clusters that do not name one.
    pub brick_image: String,
    /// The agents' gRPC port.
    pub agent_port: u16,
    /// How often healthy objects are re-checked (brick and heal state).
    pub refresh: Duration,
    /// The CSI driver name whose PersistentVolumes keep a volume from being deleted.
    pub csi_driver: String,
    /// How long a restarted brick pod may take to serve again, with every brick online and
    /// nothing left to heal, before the rollout stops with a Degraded condition.
    pub rollout_timeout: Duration,
    /// This operator's instance name (see [`INSTANCE_LABEL`]).
    pub instance: Option<String>,
    /// The operator's own namespace: the gluster CA and the CSI node plugins' certificate
    /// live there (see `gluster_tls`).
    pub namespace: String,
}

impl Config {
    /// The label selector of the objects this operator reconciles.
    pub fn selector(&self) -> String {
        match &self.instance {
            Some(i) => format!("{INSTANCE_LABEL}={i}"),
            None => format!("!{INSTANCE_LABEL}"),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            brick_image: format!("glusterkube/brick:{}", env!("CARGO_PKG_VERSION")),
            agent_port: crate::agents::AGENT_PORT,
            refresh: Duration::from_secs(30),
            csi_driver: "gluster.glusterkube.dev".into(),
            rollout_timeout: Duration::from_secs(900),
            instance: None,
            namespace: "glusterkube".into(),
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub config: Config,
    pub metrics: Arc<Metrics>,
}

/// Runs both controllers until `shutdown` resolves.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), Reporter::from(MANAGER)),
        client: client.clone(),
        config,
        metrics,
    });
    // The CSI node plugins wait for their certificate (the chart mounts it), clusters or not.
    let (c, ns) = (client.clone(), ctx.config.namespace.clone());
    let csi_tls = tokio::spawn(async move {
        loop {
            let wait = match crate::gluster_tls::ensure_csi_client(&c, &ns).await {
                Ok(()) => Duration::from_secs(3600),
                Err(e) => {
                    tracing::warn!(error = %e, namespace = %ns, "issuing the CSI node plugins' gluster certificate; retrying");
                    Duration::from_secs(10)
                }
            };
            tokio::time::sleep(wait).await;
        }
    });
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let selector = ctx.config.selector();
    let clusters = Api::<GlusterCluster>::all(client.clone());
    let cluster_ctrl = Controller::new(clusters, watcher::Config::default().labels(&selector))
        .owns(
            Api::<StatefulSet>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<PodDisruptionBudget>::all(client.clone()),
            watcher::Config::default(),
        )
        .owns(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default().labels(crate::cluster::MANAGED_BY_SELECTOR),
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(crate::cluster::BRICK_POD_SELECTOR),
            crate::cluster::pod_to_cluster,
        )
        .graceful_shutdown_on(shutdown.clone())
        .run(crate::cluster::reconcile, error_policy, ctx.clone())
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "cluster reconcile");
            }
        });
    let volumes = Api::<GlusterVolume>::all(client.clone());
    let ctx_for_pvs = ctx.clone();
    let shutdown_for_pvs = shutdown.clone();
    let volume_ctrl = Controller::new(volumes, watcher::Config::default().labels(&selector));
    let known_volumes = volume_ctrl.store();
    let volume_ctrl = volume_ctrl
        // A brick pod going away or coming back changes its volumes' health now, not at the
        // next refresh: a short outage would otherwise never show in status.
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(crate::cluster::BRICK_POD_SELECTOR),
            move |pod| crate::volume::pod_to_volumes(&known_volumes.state(), &pod),
        )
        .graceful_shutdown_on(shutdown)
        .run(crate::volume::reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "volume reconcile");
            }
        });
    let pv_counts = count_persistent_volumes(client, ctx_for_pvs, shutdown_for_pvs);
    futures::join!(cluster_ctrl, volume_ctrl, pv_counts);
    csi_tls.abort();
}

/// Keeps the PersistentVolume count per GlusterVolume in the metrics current: PVs are
/// watched (one list, then events), and counted from that cache every refresh interval.
async fn count_persistent_volumes(
    client: Client,
    ctx: Arc<Context>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    use k8s_openapi::api::core::v1::PersistentVolume;
    use kube::runtime::{reflector, WatchStreamExt};
    let (reader, writer) = reflector::store::<PersistentVolume>();
    let watch = reflector(
        writer,
        watcher(
            Api::<PersistentVolume>::all(client),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .for_each(|_| async {});
    let count = async {
        loop {
            tokio::time::sleep(ctx.config.refresh.min(Duration::from_secs(30))).await;
            if reader.wait_until_ready().await.is_err() {
                return;
            }
            let pvs = reader.state();
            let counts = crate::volume::persistent_volumes_per_volume(
                pvs.iter().map(|p| p.as_ref()),
                &ctx.config.csi_driver,
            );
            ctx.metrics.persistent_volumes(&counts);
        }
    };
    tokio::select! {
        _ = watch => {},
        _ = count => {},
        _ = shutdown => {},
    }
}

/// Spec errors wait for the user to change the spec; everything else is retried soon.
fn error_policy<K>(_: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.error(error.label());
    match error {
        Error::Spec(_) => Action::await_change(),
        Error::NotReady(_) | Error::DeletionBlocked(_) => Action::requeue(Duration::from_secs(5)),
        _ => {
            tracing::warn!(%error, "reconcile failed; retrying");
            Action::requeue(Duration::from_secs(10))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_select_disjoint_objects() {
        assert_eq!(
            Config::default().selector(),
            "!glusterkube.dev/operator-instance"
        );
        let canary = Config {
            instance: Some("canary".into()),
            ..Config::default()
        };
        assert_eq!(
            canary.selector(),
            "glusterkube.dev/operator-instance=canary"
        );
    }
}
