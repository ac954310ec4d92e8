use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use gk_csi::controller::ControllerService;
use gk_csi::identity::IdentityService;
use gk_csi::kube_pools::KubePools;
use gk_csi::mount::Mounter;
use gk_csi::node::NodeService;
use gk_csi::server::Services;

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    /// CreateVolume, DeleteVolume, expansion, capacity: one per cluster, beside csi-provisioner.
    Controller,
    /// Stage, publish and stats: one per node, in the node plugin DaemonSet.
    Node,
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
    /// Run the gluster FUSE client in the host's namespaces (through nsenter into PID 1), so
    /// mounts outlive the plugin container. Needs hostPID and a privileged container.
    #[arg(long, env = "GK_MOUNT_ON_HOST")]
    mount_on_host: bool,
    /// How often the node plugin looks for mounts whose gluster client died (it also does at
    /// start-up, before it reports ready) and repairs them.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    repair_interval_seconds: u64,
    /// The brick agents' port.
    #[arg(long, default_value_t = 24050)]
    agent_port: u16,
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
    let path = PathBuf::from(
        cli.csi_endpoint
            .strip_prefix("unix://")
            .unwrap_or(&cli.csi_endpoint),
    );
    let listener =
        gk_csi::server::bind(&path).with_context(|| format!("binding {}", path.display()))?;
    let services = match cli.mode {
        Mode::Controller => {
            let client = kube::Client::try_default()
                .await
                .context("connecting to the Kubernetes API")?;
            let pools = KubePools {
                client,
                agent_port: cli.agent_port,
            };
            Services {
                identity: IdentityService::new(true, Arc::new(AtomicBool::new(true))),
                controller: Some(Arc::new(ControllerService::new(pools))),
                node: None,
            }
        }
        Mode::Node => {
            anyhow::ensure!(
                !cli.node_id.is_empty(),
                "--node-id (or NODE_NAME) is required in node mode"
            );
            let node = Arc::new(node_service(&cli));
            // Not ready until mounts a previous plugin instance left are checked and repaired.
            node.ready.store(false, Ordering::Relaxed);
            let repairing = node.clone();
            let every = std::time::Duration::from_secs(cli.repair_interval_seconds);
            tokio::spawn(async move {
                loop {
                    let repair = repairing.recover().await;
                    if !repair.volumes.is_empty() || !repair.failed.is_empty() {
                        tracing::warn!(
                            volumes = ?repair.volumes,
                            reattached_in_containers = ?repair.reattached,
                            failed = ?repair.failed,
                            "repaired mounts whose gluster client had died"
                        );
                    }
                    repairing.ready.store(true, Ordering::Relaxed);
                    tokio::time::sleep(every).await;
                }
            });
            let checked = node.clone();
            Services::<KubePools> {
                identity: IdentityService::new(false, node.ready.clone())
                    .with_liveness(Arc::new(move || checked.self_check())),
                controller: None,
                node: Some(node),
            }
        }
    };
    tracing::info!(endpoint = %path.display(), "serving CSI");
    gk_csi::server::serve(listener, services, shutdown_signal()).await?;
    let _ = std::fs::remove_file(&path);
    tracing::info!("stopped");
    Ok(())
}

/// The node service, with its gluster clients run in the host's namespaces under
/// --mount-on-host (where they have no TLS certificate to read).
fn node_service(cli: &Cli) -> NodeService {
    let mounter = if cli.mount_on_host {
        Mounter {
            wrapper: [
                "nsenter", "--target", "1", "--mount", "--net", "--pid", "--uts", "--ipc", "--",
            ]
            .map(String::from)
            .to_vec(),
        }
    } else {
        Mounter::default()
    };
    let mut node = NodeService::new(cli.node_id.clone(), mounter, cli.state_dir.clone());
    node.kubelet.root = cli.kubelet_dir.clone();
    if cli.mount_on_host {
        node.tls_dir = None;
    }
    node
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
}
