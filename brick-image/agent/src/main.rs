use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use gk_agent::tls::TlsFiles;
use gk_agent::{Agent, AgentConfig};
use gk_gluster::{Gluster, LogDir, ProcessRunner};
use gk_mount::Mounter;

#[derive(Parser)]
#[command(version, about = "glusterkube brick agent")]
struct Cli {
    /// glusterd's unix socket, when not at gluster's default path.
    #[arg(long, global = true, env = "GK_GLUSTERD_SOCKET")]
    glusterd_socket: Option<PathBuf>,
    /// Seconds to wait for each gluster command before giving up on it.
    #[arg(long, global = true, default_value_t = 120)]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Print glusterd's health as JSON; exit 1 if glusterd does not answer or a peer is
    /// disconnected. Used as the brick pod's probe.
    Health,
    /// Serve the gRPC API over mutual TLS until SIGTERM.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "GK_AGENT_LISTEN", default_value = "0.0.0.0:24050")]
        listen: SocketAddr,
        /// Directory with ca.crt, tls.crt and tls.key (the agent TLS Secret).
        #[arg(long, env = "GK_AGENT_TLS_DIR", default_value = "/etc/glusterkube/tls")]
        tls_dir: PathBuf,
        /// The address this node has in the trusted pool: the pod's stable DNS name.
        #[arg(long, env = "GK_ADVERTISE_ADDRESS")]
        advertise_address: String,
        /// This node's glusterd address, the volfile server of the agent's own mounts.
        #[arg(long, env = "GK_VOLFILE_SERVER", default_value = "localhost")]
        volfile_server: String,
        /// Where the agent mounts volumes to manage subdirectories.
        #[arg(
            long,
            env = "GK_MOUNT_ROOT",
            default_value = "/var/lib/glusterkube/mounts"
        )]
        mount_root: PathBuf,
        /// Directories holding this node's bricks; only paths below them can be released.
        #[arg(
            long = "brick-root",
            env = "GK_BRICK_ROOTS",
            value_delimiter = ',',
            default_value = "/bricks"
        )]
        brick_roots: Vec<PathBuf>,
        /// Where gluster's daemons write their logs; rotated with the agent's own mounts'
        /// client logs.
        #[arg(long, env = "GK_GLUSTER_LOG_DIR", default_value = "/var/log/glusterfs")]
        gluster_log_dir: PathBuf,
        /// Size in MiB at which each gluster log file is rotated (one older copy is kept).
        #[arg(long, env = "GK_LOG_MAX_MIB", default_value_t = 100,
              value_parser = clap::value_parser!(u64).range(1..=10240))]
        log_max_mib: u64,
        /// Seconds a brick process may stay offline in glusterd's eyes after it started
        /// before a forced start kills it as hung.
        #[arg(long, env = "GK_BRICK_HUNG_AFTER_SECS", default_value_t = gk_agent::hung::HUNG_AFTER.as_secs(),
              value_parser = clap::value_parser!(u64).range(10..=3600))]
        brick_hung_after_secs: u64,
        /// For a pool made by hand (docs/external.md): serve the CSI driver only, on these
        /// volumes only (comma-separated): reading them, subdirectories with limits and
        /// snapshots; never changing their settings, peers or bricks.
        #[arg(long, env = "GK_AGENT_EXTERNAL_VOLUMES", value_delimiter = ',',
              value_parser = external_volume)]
        external_volumes: Vec<String>,
    },
    /// Brick-native PV limits (XFS project quotas) on this node's bricks, by hand: what the
    /// agent does for subdirectory PVs, for a person repairing a brick (and for the test
    /// that runs it on a kernel with XFS quotas).
    Projects {
        #[command(subcommand)]
        action: ProjectsCmd,
    },
}

#[derive(Subcommand)]
enum ProjectsCmd {
    /// Print the filesystem holding PATH and whether it enforces project quotas.
    Check { path: PathBuf },
    /// Give DIR (a PV directory on a brick) the limit of a PV of BYTES.
    Enforce {
        /// replicate, arbiter, or disperse:K+M.
        #[arg(long, value_parser = layout)]
        layout: gk_agent::projects::Layout,
        /// The volume's number of replica or disperse sets.
        #[arg(long, default_value_t = 1)]
        sets: u32,
        dir: PathBuf,
        bytes: u64,
    },
    /// Enforce every PV directory of BRICK (those recording a size), as after a heal.
    Reconcile {
        #[arg(long, value_parser = layout)]
        layout: gk_agent::projects::Layout,
        #[arg(long, default_value_t = 1)]
        sets: u32,
        brick: PathBuf,
    },
    /// Lift DIR's limit and forget its project id.
    Release { dir: PathBuf },
    /// Give one PV directory of VOLUME, on each of this node's bricks of it, its project and
    /// limit, as SubdirEnforce does (the volume's layout and bricks read from glusterd).
    EnforceDir {
        #[arg(long)]
        address: String,
        #[arg(long)]
        volume: String,
        /// The directory, absolute inside the volume (/pvc-1).
        path: String,
    },
    /// One standing pass, as the serving agent runs every minute: every PV directory on
    /// this node's bricks of each volume sized by project quotas (its layout read from
    /// glusterd) gets its project and limit; gone directories give theirs back.
    Keep {
        /// This node's address as gluster names its bricks.
        #[arg(long)]
        address: String,
        /// The node's disks (brick roots); the pass asks gluster nothing when none has
        /// project quotas.
        #[arg(long = "brick-root", required = true)]
        brick_roots: Vec<PathBuf>,
    },
}

fn layout(s: &str) -> Result<gk_agent::projects::Layout, String> {
    use gk_agent::projects::Layout;
    let bad = || format!("{s:?}: expected replicate, arbiter or disperse:K+M");
    match s {
        "replicate" => Ok(Layout::Replicate),
        "arbiter" => Ok(Layout::Arbiter),
        _ => {
            let (k, m) = s
                .strip_prefix("disperse:")
                .and_then(|km| km.split_once('+'))
                .ok_or_else(bad)?;
            Ok(Layout::Disperse {
                data: k.parse().map_err(|_| bad())?,
                redundancy: m.parse().map_err(|_| bad())?,
            })
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let gluster = Gluster::new(ProcessRunner {
        glusterd_socket: cli.glusterd_socket,
        timeout: Duration::from_secs(cli.timeout),
        ..ProcessRunner::default()
    });
    match cli.command {
        Command::Projects { action } => projects(action, &gluster).await,
        Command::Health => {
            let health = gk_agent::health(&gluster, &Default::default()).await?;
            println!("{}", serde_json::to_string(&health)?);
            Ok(if health.ready() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Serve {
            listen,
            tls_dir,
            advertise_address,
            volfile_server,
            mount_root,
            brick_roots,
            gluster_log_dir,
            log_max_mib,
            external_volumes,
            brick_hung_after_secs,
        } => {
            // The mount root holds the agent's mounts beside their logs: not walked.
            let logs = vec![
                LogDir {
                    path: gluster_log_dir.clone(),
                    recurse: true,
                },
                LogDir {
                    path: mount_root.clone(),
                    recurse: false,
                },
            ];
            tokio::spawn(gk_gluster::cap_logs_forever(
                logs,
                log_max_mib << 20,
                Duration::from_secs(60),
            ));
            let tls = TlsFiles::in_dir(&tls_dir)
                .server_config()
                .with_context(|| {
                    format!("reading the agent certificate from {}", tls_dir.display())
                })?;
            tokio::spawn(gk_agent::projects::keeper::run(
                gluster.clone(),
                advertise_address.clone(),
                brick_roots.clone(),
            ));
            let mut agent = Agent::new(
                gluster,
                AgentConfig {
                    advertise_address,
                    volfile_server,
                    mount_root,
                    mounter: Mounter::default(),
                    brick_roots,
                    gluster_log_dir,
                    brick_hung_after: Duration::from_secs(brick_hung_after_secs),
                },
            );
            if !external_volumes.is_empty() {
                tracing::info!(volumes = ?external_volumes, "serving a pool made by hand: the CSI driver's RPCs on these volumes only");
                agent = agent.for_external_volumes(external_volumes);
            }
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("listening on {listen}"))?;
            tracing::info!(%listen, "serving");
            gk_agent::serve(agent, listener, tls, shutdown_signal()).await?;
            tracing::info!("stopped");
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn projects(
    action: ProjectsCmd,
    gluster: &Gluster<ProcessRunner>,
) -> anyhow::Result<ExitCode> {
    use gk_agent::projects;
    match action {
        ProjectsCmd::Check { path } => {
            let fs = projects::xfs::brick_fs(&path)?;
            println!(
                "{} {} project_quotas={}",
                fs.mount_point.display(),
                fs.fs_type,
                fs.project_quotas
            );
            return Ok(if fs.project_quotas {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        ProjectsCmd::Enforce {
            layout,
            sets,
            dir,
            bytes,
        } => {
            let done = projects::enforce(&dir, layout, sets, bytes).await?;
            println!("{} {done:?}", dir.display());
        }
        ProjectsCmd::Reconcile {
            layout,
            sets,
            brick,
        } => {
            let pass = projects::reconcile(&brick, layout, sets).await?;
            for (dir, done) in &pass.enforced {
                println!("{} {done:?}", dir.display());
            }
            for (dir, e) in &pass.failed {
                eprintln!("{}: {e}", dir.display());
            }
            if !pass.failed.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        ProjectsCmd::Release { dir } => projects::release(&dir).await?,
        ProjectsCmd::EnforceDir {
            address,
            volume,
            path,
        } => {
            let v = gluster
                .volume_info(&volume)
                .await?
                .with_context(|| format!("volume {volume} does not exist"))?;
            anyhow::ensure!(
                projects::volume::by_projects(&v),
                "volume {volume} does not have {}={}",
                gk_agent_proto::pv_quota::OPTION,
                gk_agent_proto::pv_quota::PROJECT
            );
            for (brick, done) in projects::volume::enforce_dir(&v, &address, &path).await? {
                println!("{brick} id={} limit={}", done.id, done.limit);
            }
        }
        ProjectsCmd::Keep {
            address,
            brick_roots,
        } => {
            let s = projects::keeper::pass(gluster, &address, &brick_roots).await?;
            println!("volumes={}", s.volumes);
            for (dir, id, limit) in &s.changed {
                println!("{} id={id} limit={limit}", dir.display());
            }
            for (dir, why) in &s.failed {
                eprintln!("{}: {why}", dir.display());
            }
            if !s.failed.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn external_volume(s: &str) -> Result<String, String> {
    gk_gluster::validate_volume_name(s)
        .map(|_| s.to_string())
        .map_err(|e| e.to_string())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {},
        _ = tokio::signal::ctrl_c() => {},
    }
    tracing::info!("shutting down");
}
