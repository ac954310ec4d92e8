use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use gk_operator::context::{BrickPods, Config};
use gk_operator::leader::{Election, Ended};
use gk_operator::metrics::Metrics;

#[derive(Parser)]
#[command(
    version,
    about = "glusterkube operator: GlusterCluster and GlusterVolume controllers"
)]
struct Cli {
    /// Where /metrics and /healthz are served.
    #[arg(long, env = "GK_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Brick image for clusters that do not name one.
    #[arg(long, env = "GK_BRICK_IMAGE")]
    brick_image: Option<String>,
    /// Secrets, by name and comma-separated, that brick pods pull their image with (each
    /// GlusterCluster's namespace needs its own copy).
    #[arg(long, env = "GK_BRICK_IMAGE_PULL_SECRETS", value_delimiter = ',',
          value_parser = gk_api::names::secret_name)]
    brick_image_pull_secrets: Vec<String>,
    /// The brick agents' log filter (RUST_LOG syntax: a level, or `gk_agent=debug,info`).
    #[arg(long, env = "GK_BRICK_AGENT_LOG_LEVEL", default_value = "info",
          value_parser = log_filter)]
    brick_agent_log_level: String,
    /// Size in MiB at which each gluster log file in a brick pod is rotated (one older copy
    /// is kept beside it).
    #[arg(long, env = "GK_BRICK_LOG_MAX_MIB", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=10240))]
    brick_log_max_mib: u32,
    /// Seconds between health refreshes of healthy objects.
    #[arg(long, env = "GK_REFRESH_SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(5..=3600))]
    refresh_seconds: u64,
    /// Seconds a restarted brick pod may take to serve with nothing left to heal before a
    /// rolling restart stops.
    #[arg(long, env = "GK_ROLLOUT_TIMEOUT_SECONDS", default_value_t = 900,
          value_parser = clap::value_parser!(u64).range(10..=86400))]
    rollout_timeout_seconds: u64,
    /// Seconds a rebalance or remove-brick migration may show no change in gluster's counts
    /// before it is reported as stalled.
    #[arg(long, env = "GK_MIGRATION_STALL_SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(60..=86400))]
    migration_stall_seconds: u64,
    /// Reconcile only GlusterClusters and GlusterVolumes labelled
    /// glusterkube.dev/operator-instance=<this>; without it, only those without the label.
    #[arg(long, env = "GK_OPERATOR_INSTANCE")]
    instance: Option<String>,
    /// At start, upgrade the glusterkube CRDs in the cluster that an older version wrote to
    /// this version's (helm upgrade leaves a chart's CRDs as they were installed).
    #[arg(long, env = "GK_UPGRADE_CRDS", default_value_t = false, action = clap::ArgAction::Set)]
    upgrade_crds: bool,
    /// Reconcile only while holding the leader Lease (in the operator's namespace), so that
    /// several replicas can run: one reconciles, the others stand by.
    #[arg(long, env = "GK_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// The leader Lease's name.
    #[arg(long, env = "GK_LEADER_ELECTION_LEASE", default_value = "glusterkube-operator",
          value_parser = gk_api::names::lease_name)]
    leader_election_lease: String,
    /// This replica's name in the Lease (the pod's name).
    #[arg(long, env = "POD_NAME", default_value = "")]
    pod_name: String,
    /// The operator's own namespace, where the gluster CA and the CSI node plugins'
    /// certificate are kept.
    #[arg(long, env = "POD_NAMESPACE", default_value = "glusterkube")]
    namespace: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API")?;
    let mut config = Config {
        refresh: Duration::from_secs(cli.refresh_seconds),
        rollout_timeout: Duration::from_secs(cli.rollout_timeout_seconds),
        migration_stall: Duration::from_secs(cli.migration_stall_seconds),
        instance: cli.instance,
        namespace: cli.namespace,
        brick_pods: BrickPods {
            pull_secrets: cli.brick_image_pull_secrets,
            agent_log_level: cli.brick_agent_log_level,
            log_max_mib: cli.brick_log_max_mib,
            ..BrickPods::default()
        },
        ..Config::default()
    };
    if let Some(image) = cli.brick_image {
        config.brick_pods.image = image;
    }
    if cli.upgrade_crds {
        // Before waiting for the Lease: a new replica's CRDs are in place before it leads.
        // A failure is logged, not fatal: the CRDs in place may still serve this version.
        match gk_operator::crd_upgrade::upgrade(&client, &gk_api::crd::all()).await {
            Ok(outcomes) => {
                for o in outcomes {
                    tracing::info!(outcome = ?o, "CRD");
                }
            }
            Err(e) => tracing::error!(error = %e, "upgrading the CRDs failed"),
        }
    }
    let metrics = Arc::new(Metrics::default());
    let m = metrics.clone();
    let health = config.health.clone();
    let app = axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || async move { m.encode() }),
        )
        .route(
            "/healthz",
            axum::routing::get(move || async move {
                match health.verdict(std::time::Instant::now()) {
                    Ok(()) => (axum::http::StatusCode::OK, "ok".to_string()),
                    Err(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, why.to_string()),
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind(cli.metrics_addr)
        .await
        .with_context(|| format!("listening on {}", cli.metrics_addr))?;
    tokio::spawn(async move { axum::serve(listener, app).await });
    if !cli.leader_election {
        tracing::info!("starting controllers (no leader election)");
        gk_operator::run(client, config, metrics, shutdown_signal()).await;
        tracing::info!("stopped");
        return Ok(());
    }
    anyhow::ensure!(
        !cli.pod_name.is_empty(),
        "--pod-name (POD_NAME) is required with leader election: it names this replica in the Lease"
    );
    let election = Election {
        namespace: config.namespace.clone(),
        lease: cli.leader_election_lease,
        identity: cli.pod_name,
        duration_seconds: 15,
        grace_seconds: 5,
    };
    let c = client.clone();
    let ended = gk_operator::leader::lead(c, &election, shutdown_signal(), |stop| {
        tracing::info!("starting controllers");
        gk_operator::run(client, config, metrics, stop)
    })
    .await?;
    tracing::info!("stopped");
    anyhow::ensure!(
        ended == Ended::Shutdown,
        "another replica holds the leader Lease {} now; exiting to restart as a follower",
        election.lease
    );
    Ok(())
}

/// A log filter the agent will accept, refused here rather than in every brick pod.
fn log_filter(s: &str) -> Result<String, String> {
    tracing_subscriber::EnvFilter::try_new(s)
        .map(|_| s.to_string())
        .map_err(|e| format!("not a log filter (RUST_LOG syntax): {e}"))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}
