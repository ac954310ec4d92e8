//! Answers the kubelet's liveness probe for the CSI node plugin: GET /healthz calls the
//! plugin's CSI Probe. Takes livenessprobe's flags, so it runs in its place.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use axum::http::StatusCode;
use clap::Parser;
use gk_csi::sidecars;

#[derive(Parser)]
#[command(version, about = "Liveness endpoint for the glusterkube CSI plugin")]
struct Cli {
    /// The plugin's CSI socket inside this container.
    #[arg(long, default_value = "/csi/csi.sock")]
    csi_address: PathBuf,
    /// Port of /healthz on all addresses, unless --http-endpoint names one.
    #[arg(long, default_value_t = 9808)]
    health_port: u16,
    /// Address and port of /healthz, e.g. $(POD_IP):9808.
    #[arg(long)]
    http_endpoint: Option<SocketAddr>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().json().init();
    let cli = Cli::parse();
    let addr = cli
        .http_endpoint
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], cli.health_port)));
    let channel = sidecars::csi_channel(&cli.csi_address);
    let app = axum::Router::new().route(
        "/healthz",
        axum::routing::get(move || {
            let channel = channel.clone();
            async move {
                match sidecars::probe(channel).await {
                    Ok(true) => (StatusCode::OK, "ok".to_string()),
                    Ok(false) => (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "the CSI plugin reports not ready".to_string(),
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e.message(), "CSI Probe failed");
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("CSI Probe failed: {}", e.message()),
                        )
                    }
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    tracing::info!(%addr, socket = %cli.csi_address.display(), "serving /healthz");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("installing the SIGTERM handler");
            term.recv().await;
        })
        .await?;
    Ok(())
}
