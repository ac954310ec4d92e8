use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use gk_csi::controller::ControllerService;
use gk_csi::external::ExternalPools;
use gk_csi::identity::IdentityService;
use gk_csi::kube_pools::KubePools;
use gk_csi::metrics::Metrics;
use gk_csi::mount::Mounter;
use gk_csi::node::NodeService;
use gk_csi::server::Services;

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum Mode {
    /// CreateVolume, DeleteVolume, expansion, capacity: one per cluster, beside csi-provisioner.
    Controller,
    /// Stage, publish and stats: one per node, in the node plugin DaemonSet.
    Node,
    /// A mount pod: keeps one gluster client serving one staged volume (the node plugin
    /// makes these pods, with GK_MOUNT_SPEC).
    Mount,
}

/// Where the node plugin runs the gluster FUSE clients.
#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum FuseClients {
    /// In a mount pod per staged volume: the clients outlive a restart or upgrade of the
    /// plugin.
    MountPods,
    /// In the plugin's own container: they stop with it (for a plugin without API access).
    InPlugin,
}

#[derive(Parser)]
#[command(version, about = "glusterkube CSI driver")]
struct Cli {
    #[arg(long, value_enum)]
    mode: Mode,
    /// The CSI socket, as unix:///path or a plain path.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///csi/csi.sock")]
    csi_endpoint: String,
    /// This node's name (NodeGetInfo and topology).
    #[arg(long, env = "NODE_NAME", default_value = "")]
    node_id: String,
    /// The node plugin's own directory on the node (client logs, and what it staged and
    /// published, so a restarted plugin can repair its mounts).
    #[arg(
        long,
        env = "GK_STATE_DIR",
        default_value = "/var/lib/kubelet/plugins/gluster.glusterkube.dev"
    )]
    state_dir: PathBuf,
    /// The kubelet's root directory (its --root-dir): the node plugin mounts only under its
    /// plugins/ (staging) and pods/ (publishing) directories.
    #[arg(long, env = "GK_KUBELET_DIR", default_value = "/var/lib/kubelet")]
    kubelet_dir: PathBuf,
    /// Where the gluster FUSE clients run.
    #[arg(
        long,
        env = "GK_FUSE_CLIENTS",
        value_enum,
        default_value = "mount-pods"
    )]
    fuse_clients: FuseClients,
    /// The driver's namespace: the node plugin's mount pods run there, beside the client
    /// certificate; the controller reads external pools' Secrets there.
    #[arg(long, env = "POD_NAMESPACE", default_value = "glusterkube-system")]
    namespace: String,
    /// The image of new mount pods (the gluster client version of volumes staged from now on).
    #[arg(long, env = "GK_MOUNT_IMAGE", default_value = "")]
    mount_image: String,
    /// The mount pods' image pull policy.
    #[arg(long, env = "GK_MOUNT_PULL_POLICY", default_value = "IfNotPresent",
          value_parser = ["Always", "IfNotPresent", "Never"])]
    mount_pull_policy: String,
    /// Secrets, by name and comma-separated, that mount pods pull their image with (in the
    /// plugin's namespace).
    #[arg(long, env = "GK_MOUNT_IMAGE_PULL_SECRETS", value_delimiter = ',',
          value_parser = gk_api::names::secret_name)]
    mount_image_pull_secrets: Vec<String>,
    /// The mount pods' priority class; empty for none.
    #[arg(long, env = "GK_MOUNT_PRIORITY_CLASS", default_value = "")]
    mount_priority_class: String,
    /// The mount pods' container resources, as Kubernetes JSON; empty for none.
    #[arg(long, env = "GK_MOUNT_RESOURCES", default_value = "")]
    mount_resources: String,
    /// The Secret with the CSI node plugins' gluster certificate, mounted into mount pods of
    /// TLS volumes.
    #[arg(long, env = "GK_GLUSTER_TLS_SECRET", default_value = gk_api::names::CSI_CLIENT_SECRET)]
    gluster_tls_secret: String,
    /// What a mount pod mounts (JSON; set by the node plugin on the pods it makes).
    #[arg(long, env = "GK_MOUNT_SPEC", default_value = "")]
    mount_spec: String,
    /// How often the node plugin looks for mounts whose gluster client died (it also does at
    /// start-up, before it reports ready) and repairs them.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=3600))]
    repair_interval_seconds: u64,
    /// Whether the repair pass also runs on every change of the node's mount table (a mount
    /// pod's new gluster client mounting, say), besides its timer.
    #[arg(long, env = "GK_REPAIR_ON_MOUNT_CHANGE", default_value_t = true,
          action = clap::ArgAction::Set)]
    repair_on_mount_change: bool,
    /// How long a mount pod that serves nothing may have failed (or been orphaned) before
    /// the node plugin removes it; the plugin looks this often.
    #[arg(long, env = "GK_REAP_GRACE_SECONDS", default_value_t = 60,
          value_parser = clap::value_parser!(u64).range(5..=3600))]
    reap_grace_seconds: u64,
    /// The brick agents' port.
    #[arg(long, default_value_t = 24050)]
    agent_port: u16,
    /// Where /metrics is served (RPC counts, errors and durations; mounts repaired), as
    /// ADDRESS:PORT; empty for nowhere.
    #[arg(long, env = "GK_METRICS_ADDR", default_value = "")]
    metrics_addr: String,
    /// Size in MiB at which each gluster client log in the state directory is rotated (one
    /// older copy is kept).
    #[arg(long, env = "GK_LOG_MAX_MIB", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=10240))]
    log_max_mib: u64,
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
    if cli.mode == Mode::Mount {
        let spec = serde_json::from_str(&cli.mount_spec)
            .context("GK_MOUNT_SPEC must hold the mount pod's spec as JSON")?;
        return gk_csi::mount_client::run(spec).await;
    }
    let path = PathBuf::from(
        cli.csi_endpoint
            .strip_prefix("unix://")
            .unwrap_or(&cli.csi_endpoint),
    );
    let listener =
        gk_csi::server::bind(&path).with_context(|| format!("binding {}", path.display()))?;
    let metrics = Arc::new(Metrics::default());
    if !cli.metrics_addr.is_empty() {
        let addr: std::net::SocketAddr = cli
            .metrics_addr
            .parse()
            .context("--metrics-addr (GK_METRICS_ADDR) must be ADDRESS:PORT")?;
        let metrics_listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr} for /metrics"))?;
        let served = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = gk_csi::metrics::serve(served, metrics_listener).await {
                tracing::error!(error = %e, "serving /metrics stopped");
            }
        });
    }
    let services = match cli.mode {
        Mode::Controller => {
            let client = kube::Client::try_default()
                .await
                .context("connecting to the Kubernetes API")?;
            let pools = KubePools::new(client.clone(), cli.agent_port);
            let recorder = kube::runtime::events::Recorder::new(
                client.clone(),
                kube::runtime::events::Reporter {
                    controller: "gk-csi-controller".into(),
                    instance: std::env::var("HOSTNAME").ok(),
                },
            );
            // Pools made by hand are described by Secrets in this namespace.
            let external = ExternalPools::new(client, cli.namespace.clone());
            Services {
                identity: IdentityService::new(true, Arc::new(AtomicBool::new(true))),
                controller: Some(Arc::new(
                    ControllerService::new(pools)
                        .with_external(external)
                        .with_events(recorder),
                )),
                node: None,
                metrics,
            }
        }
        Mode::Mount => unreachable!("handled above"),
        Mode::Node => {
            anyhow::ensure!(
                !cli.node_id.is_empty(),
                "--node-id (or NODE_NAME) is required in node mode"
            );
            let node = Arc::new(node_service(&cli).await?);
            // The gluster clients' logs (the mount pods write theirs here too).
            tokio::spawn(gk_gluster::cap_logs_forever(
                vec![gk_gluster::LogDir {
                    path: cli.state_dir.clone(),
                    recurse: false,
                }],
                cli.log_max_mib << 20,
                std::time::Duration::from_secs(60),
            ));
            // Not ready until mounts a previous plugin instance left are checked and repaired.
            node.ready.store(false, Ordering::Relaxed);
            let repairing = node.clone();
            let counted = metrics.clone();
            let every = std::time::Duration::from_secs(cli.repair_interval_seconds);
            let changed = match cli.repair_on_mount_change {
                true => Some(
                    gk_csi::node::mount_events::watch()
                        .context("watching the mount table (/proc/thread-self/mountinfo)")?,
                ),
                false => None,
            };
            tokio::spawn(async move {
                loop {
                    let repair = repairing.recover().await;
                    counted.repairs(repair.volumes.len(), repair.failed.len());
                    if !repair.volumes.is_empty() || !repair.failed.is_empty() {
                        tracing::warn!(
                            volumes = ?repair.volumes,
                            reattached_in_containers = ?repair.reattached,
                            failed = ?repair.failed,
                            "repaired mounts whose gluster client had died"
                        );
                    }
                    repairing.ready.store(true, Ordering::Relaxed);
                    match &changed {
                        Some(changed) => tokio::select! {
                            _ = tokio::time::sleep(every) => {}
                            _ = changed.notified() => {
                                tokio::time::sleep(gk_csi::node::mount_events::SETTLE).await;
                            }
                        },
                        None => tokio::time::sleep(every).await,
                    }
                }
            });
            if let Some(pods) = &node.mount_pods {
                // Mount pods that outlived their reason go: at start, then every grace period.
                let recorder = kube::runtime::events::Recorder::new(
                    pods.client.clone(),
                    kube::runtime::events::Reporter {
                        controller: "gk-csi-node".into(),
                        instance: Some(cli.node_id.clone()),
                    },
                );
                let reaping = node.clone();
                let grace = std::time::Duration::from_secs(cli.reap_grace_seconds);
                tokio::spawn(async move {
                    loop {
                        let reaped = reaping.reap(&recorder, grace).await;
                        if !reaped.removed.is_empty() || !reaped.failed.is_empty() {
                            tracing::warn!(removed = ?reaped.removed, failed = ?reaped.failed, "reaped mount pods");
                        }
                        tokio::time::sleep(grace).await;
                    }
                });
            }
            let checked = node.clone();
            Services::<KubePools> {
                identity: IdentityService::new(false, node.ready.clone())
                    .with_liveness(Arc::new(move || checked.self_check())),
                controller: None,
                node: Some(node),
                metrics,
            }
        }
    };
    tracing::info!(endpoint = %path.display(), "serving CSI");
    gk_csi::server::serve(listener, services, shutdown_signal()).await?;
    let _ = std::fs::remove_file(&path);
    tracing::info!("stopped");
    Ok(())
}

/// The node service, with its gluster clients in mount pods (or in this container).
async fn node_service(cli: &Cli) -> anyhow::Result<NodeService> {
    let mut node = NodeService::new(
        cli.node_id.clone(),
        Mounter::default(),
        cli.state_dir.clone(),
    );
    node.kubelet.root = cli.kubelet_dir.clone();
    if cli.fuse_clients == FuseClients::MountPods {
        anyhow::ensure!(
            !cli.mount_image.is_empty(),
            "--mount-image (GK_MOUNT_IMAGE) is required with mount pods"
        );
        let client = kube::Client::try_default()
            .await
            .context("connecting to the Kubernetes API (mount pods need it)")?;
        let resources = (!cli.mount_resources.is_empty())
            .then(|| serde_json::from_str(&cli.mount_resources))
            .transpose()
            .context("--mount-resources must be Kubernetes resources as JSON")?;
        // The mount pods' owner: its Node (drain then evicts them without --force).
        let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
        let node_uid = match nodes.get(&cli.node_id).await {
            Ok(n) => n.metadata.uid,
            Err(e) => {
                tracing::warn!(node = %cli.node_id, error = %e, "cannot read this node's Node object (the chart's csi-node ClusterRole grants it); mount pods get no owner, and `kubectl drain` refuses them without --force");
                None
            }
        };
        // The clients (and their certificate) are in the mount pods, not here.
        node.tls_dir = None;
        node.mount_pods = Some(gk_csi::node::mount_pods::MountPods {
            client,
            namespace: cli.namespace.clone(),
            node: cli.node_id.clone(),
            image: cli.mount_image.clone(),
            pull_policy: cli.mount_pull_policy.clone(),
            pull_secrets: cli.mount_image_pull_secrets.clone(),
            kubelet_dir: cli.kubelet_dir.clone(),
            tls_secret: cli.gluster_tls_secret.clone(),
            priority_class: (!cli.mount_priority_class.is_empty())
                .then(|| cli.mount_priority_class.clone()),
            resources,
            mount_timeout: std::time::Duration::from_secs(90),
            node_uid,
        });
    }
    Ok(node)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}
