//! Wiring: the GlusterCluster and GlusterVolume controllers, the loop that keeps the CSI node
//! plugins' certificate, the PersistentVolume count, and the error policy.

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

use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_api::names::{BRICK_POD_SELECTOR, MANAGED_BY_SELECTOR, OPERATOR};

use crate::context::{Config, Context};
use crate::metrics::Metrics;
use crate::Error;

/// Runs both controllers until `shutdown` resolves.
pub async fn run(
    client: Client,
    config: Config,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let agent_port = config.agent_port;
    let ctx = Arc::new(Context {
        recorder: Recorder::new(client.clone(), Reporter::from(OPERATOR)),
        client: client.clone(),
        config,
        metrics,
        heals: Default::default(),
        agents: gk_api::agents::cache::AgentCache::new(agent_port),
    });
    // The CSI node plugins wait for their certificate (the chart mounts it), clusters or not.
    let (c, ns, m) = (
        client.clone(),
        ctx.config.namespace.clone(),
        ctx.metrics.clone(),
    );
    let csi_tls = tokio::spawn(async move {
        loop {
            let wait = match crate::tls::gluster::ensure_csi_client(&c, &ns).await {
                Ok(expiry) => {
                    if let Some(at) = expiry {
                        m.certificate_expiry(&ns, gk_api::names::CSI_CLIENT_SECRET, at);
                    }
                    Duration::from_secs(3600)
                }
                Err(e) => {
                    tracing::warn!(error = %e, namespace = %ns, "issuing the CSI node plugins' gluster certificate; retrying");
                    Duration::from_secs(10)
                }
            };
            tokio::time::sleep(wait).await;
        }
    });
    let shutdown = futures::future::FutureExt::shared(Box::pin(shutdown));
    let health = ctx.config.health.clone();
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
            watcher::Config::default().labels(MANAGED_BY_SELECTOR),
        )
        .watches(
            Api::<Pod>::all(client.clone()),
            watcher::Config::default().labels(BRICK_POD_SELECTOR),
            crate::cluster::pod_to_cluster,
        )
        .graceful_shutdown_on(shutdown.clone())
        .run(crate::cluster::reconcile, error_policy, ctx.clone())
        .for_each(|r| {
            report(&health, "GlusterCluster", &r);
            async move {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "cluster reconcile");
                }
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
            watcher::Config::default().labels(BRICK_POD_SELECTOR),
            move |pod| crate::volume::pod_to_volumes(&known_volumes.state(), &pod),
        )
        .graceful_shutdown_on(shutdown)
        .run(crate::volume::reconcile, error_policy, ctx)
        .for_each(|r| {
            report(&health, "GlusterVolume", &r);
            async move {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "volume reconcile");
                }
            }
        });
    let pv_counts = count_persistent_volumes(client, ctx_for_pvs, shutdown_for_pvs);
    futures::join!(cluster_ctrl, volume_ctrl, pv_counts);
    csi_tls.abort();
}

/// Tells `health` what a controller's stream yielded: a failed watch, or an object delivered
/// (reconciled, well or not).
fn report<T, E: std::fmt::Display>(
    health: &crate::health::Health,
    controller: &str,
    result: &Result<T, kube::runtime::controller::Error<E, watcher::Error>>,
) {
    use kube::runtime::controller::Error as C;
    match result {
        Err(C::QueueError(e)) => {
            tracing::warn!(controller, error = %e, "watch failed; retrying");
            health.watch_failed(controller, &e.to_string(), std::time::Instant::now())
        }
        Err(C::RunnerError(_)) => {}
        _ => health.delivered(),
    }
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
    let driver = ctx.config.csi_driver.clone();
    // Only what the count needs is kept of each PV: the store holds every PV of the cluster.
    let watch = reflector(
        writer,
        watcher(
            Api::<PersistentVolume>::all(client),
            watcher::Config::default(),
        )
        .modify(move |pv| crate::volume::users::slim(pv, &driver)),
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
            let counts = crate::volume::users::per_volume(
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
        e if e.is_wait() => Action::requeue(Duration::from_secs(5)),
        _ => {
            tracing::warn!(%error, "reconcile failed; retrying");
            Action::requeue(Duration::from_secs(10))
        }
    }
}
