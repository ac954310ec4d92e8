use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use gk_gluster::{Gluster, ProcessRunner};

#[derive(Parser)]
#[command(version, about = "glusterkube brick agent")]
struct Cli {
    /// glusterd's unix socket, when not at gluster's default path.
    #[arg(long, global = true)]
    glusterd_socket: Option<PathBuf>,
    /// Seconds to wait for each gluster command.
    #[arg(long, global = true, default_value_t = 10)]
    timeout: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print glusterd's health as JSON; exit 1 if glusterd does not answer or a peer is
    /// disconnected.
    Health,
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let gluster = Gluster::new(ProcessRunner {
        glusterd_socket: cli.glusterd_socket,
        timeout: Duration::from_secs(cli.timeout),
        ..ProcessRunner::default()
    });
    match cli.command {
        Command::Health => {
            let health = gk_agent::health(&gluster).await?;
            println!("{}", serde_json::to_string(&health)?);
            Ok(if health.ready() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
