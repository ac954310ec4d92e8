//! `kubectl gluster`, a kubectl plugin: installed on PATH as `kubectl-gluster`, kubectl
//! runs it for `kubectl gluster ...`.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kubectl_gluster::cluster::Scope;
use kubectl_gluster::cmd::{self, logs::Which};

#[derive(Parser)]
#[command(
    name = "kubectl gluster",
    version,
    about = "glusterkube storage at a glance: clusters, volumes, heal, bricks, logs and PVs",
    long_about = "Reads only. Status comes from the GlusterCluster and GlusterVolume objects; \
                  gluster's own details from the brick agents' read-only calls, through a \
                  port-forward to a brick pod with the operator's client certificate. Needs \
                  get/list on the glusterkube.dev objects, pods and PVs, get on the cluster's \
                  operator TLS Secret, and create on pods/portforward."
)]
struct Cli {
    /// The namespace of the clusters and volumes (default: the kubeconfig context's).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Every namespace (status and bricks only).
    #[arg(short = 'A', long, global = true, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// The kubeconfig context to use (default: the current one).
    #[arg(long, global = true)]
    context: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Clusters and volumes: nodes, bricks, heal, split-brain, capacity, conditions.
    Status,
    /// A volume's entries waiting for self-heal and in split-brain, per brick, with paths.
    Heal {
        /// The GlusterVolume.
        volume: String,
        /// The most entries listed per brick and list (gluster's counts are whole).
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10000))]
        limit: u32,
    },
    /// Every brick: node, online, process, port, filesystem usage, heal pending.
    Bricks {
        /// Only this GlusterVolume's bricks.
        volume: Option<String>,
    },
    /// The logs of a storage node's brick pod: its container's (glusterd and the agent),
    /// the bricks', the self-heal daemon's.
    Logs {
        /// The storage node (as the GlusterCluster's spec.nodes names it).
        node: String,
        /// The GlusterCluster, when the namespace has more than one.
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long, value_enum, default_value = "all")]
        which: Which,
        /// Lines of the container's log.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(i64).range(1..=100000))]
        tail: i64,
        /// Bytes from the end of each gluster log file (at most 1 MiB).
        #[arg(long, default_value_t = 65536, value_parser = clap::value_parser!(u32).range(1..=1048576))]
        bytes: u32,
    },
    /// A pool volume's subdirectory PVs with their usage, and directories no PV names.
    Pvs {
        /// The pool GlusterVolume.
        pool: String,
    },
}

async fn run(cli: Cli) -> anyhow::Result<String> {
    let options = kube::config::KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match kube::Config::from_kubeconfig(&options).await {
        Ok(c) => c,
        // In a pod, without a kubeconfig.
        Err(_) if cli.context.is_none() => kube::Config::infer().await?,
        Err(e) => return Err(e.into()),
    };
    let default_ns = config.default_namespace.clone();
    let client = kube::Client::try_from(config)?;
    let scope = Scope {
        client,
        namespace: if cli.all_namespaces {
            None
        } else {
            Some(cli.namespace.unwrap_or(default_ns))
        },
    };
    Ok(match cli.command {
        Command::Status => cmd::status::run(&scope).await?,
        Command::Heal { volume, limit } => cmd::heal::run(&scope, &volume, limit).await?,
        Command::Bricks { volume } => cmd::bricks::run(&scope, volume.as_deref()).await?,
        Command::Logs {
            node,
            cluster,
            which,
            tail,
            bytes,
        } => cmd::logs::run(&scope, &node, cluster.as_deref(), which, tail, bytes).await?,
        Command::Pvs { pool } => cmd::pvs::run(&scope, &pool).await?,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
