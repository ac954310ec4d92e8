//! The process of a mount pod (`gk-csi --mode mount`): it keeps one gluster FUSE client
//! serving the staging path. A client that dies is started again at once, after its dead
//! mount is detached, so the volume is back without waiting for the kubelet's restart
//! back-off; the node plugin's repair pass then binds the published targets again. On
//! SIGTERM (the plugin deleted the pod at NodeUnstageVolume) the client stops and unmounts.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

use crate::mount::{self, MountSource};
use crate::node::mount_pods::MountSpec;

/// Detaches whatever is mounted at `target` (a dead client's mount), if anything is.
fn detach(target: &Path) {
    if mount::is_mounted(target).unwrap_or(false) {
        let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// Runs the client for `spec` until SIGTERM.
pub async fn run(spec: MountSpec) -> anyhow::Result<()> {
    anyhow::ensure!(
        spec.target.is_absolute(),
        "the mount target {} must be absolute",
        spec.target.display()
    );
    let source = MountSource {
        servers: spec.servers.clone(),
        volume: spec.volume.clone(),
        subdir: spec.subdir.clone(),
    };
    // glusterd's log goes to this container's standard error ("-"): `kubectl logs`.
    let words =
        mount::foreground_client(&source, &spec.target, Path::new("-"), &spec.flags, spec.tls)
            .context("the mount spec")?;
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut pause = Duration::from_millis(100);
    loop {
        detach(&spec.target);
        std::fs::create_dir_all(&spec.target)
            .with_context(|| format!("creating {}", spec.target.display()))?;
        tracing::info!(target = %spec.target.display(), volume = %spec.volume, "starting the gluster client");
        let started = Instant::now();
        let mut child = Command::new(&words[0])
            .args(&words[1..])
            .kill_on_drop(true)
            .spawn()
            .context("starting glusterfs")?;
        tokio::select! {
            status = child.wait() => {
                tracing::warn!(status = ?status, target = %spec.target.display(), "the gluster client stopped; starting it again");
                // A client that keeps failing at once (a volume that is gone, say) is retried
                // more slowly; one that served a while is restarted at once.
                pause = if started.elapsed() > Duration::from_secs(30) {
                    Duration::from_millis(100)
                } else {
                    (pause * 2).min(Duration::from_secs(10))
                };
                tokio::time::sleep(pause).await;
            }
            _ = term.recv() => {
                tracing::info!(target = %spec.target.display(), "stopping the gluster client");
                if let Some(pid) = child.id() {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid as i32),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
                let _ = tokio::time::timeout(Duration::from_secs(8), child.wait()).await;
                detach(&spec.target);
                return Ok(());
            }
        }
    }
}
