//! The process of a mount pod (`gk-csi --mode mount`): it keeps one gluster FUSE client
//! serving the staging path. A client that dies is started again at once, after its dead
//! mount is detached, so the volume is back without waiting for the kubelet's restart
//! back-off; the node plugin's repair pass then binds the published targets again.
//!
//! On SIGTERM it stops only once the plugin has released the volume (NodeUnstageVolume, or
//! a removal of its own: [`release_marker`]): a pod evicted by `kubectl drain` goes on
//! serving the applications that are shutting down beside it, until the last one is gone and
//! the volume is unstaged. A client that stops meanwhile ends it too (nothing to keep), and
//! the kubelet's grace period ([`crate::node::mount_pods::TERMINATION_GRACE`]) bounds it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

use crate::mount::{self, MountSource};
use crate::node::mount_pods::{release_marker, MountSpec};

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
    let released = release_marker(&spec.target);
    let mut stopping = false;
    let mut pause = Duration::ZERO;
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
        loop {
            tokio::select! {
                status = child.wait() => {
                    if stopping {
                        tracing::info!(status = ?status, target = %spec.target.display(), "the gluster client stopped while this pod was stopping");
                        detach(&spec.target);
                        return Ok(());
                    }
                    tracing::warn!(status = ?status, target = %spec.target.display(), "the gluster client stopped; starting it again");
                    let served = mount::is_mounted(&spec.target).unwrap_or(false);
                    pause = restart_pause(served, started.elapsed(), pause);
                    tokio::time::sleep(pause).await;
                    break;
                }
                _ = term.recv(), if !stopping => {
                    stopping = true;
                    tracing::info!(target = %spec.target.display(), "asked to stop: serving until the node plugin releases the volume");
                }
                _ = tokio::time::sleep(Duration::from_millis(200)), if stopping => {
                    if released.exists() {
                        tracing::info!(target = %spec.target.display(), "released: stopping the gluster client");
                        stop(&mut child).await;
                        detach(&spec.target);
                        // Ours, in the kubelet's directory of the volume, which the kubelet
                        // removes after NodeUnstageVolume only when nothing else is in it.
                        let _ = std::fs::remove_file(&released);
                        return Ok(());
                    }
                }
            }
        }
    }
}

/// How long to wait before starting the client again, after one that ran for `ran` and had
/// (`served`) or had not mounted the target, the last wait being `last`. A client that
/// mounted and ran a second is started again at once, however often it died before (each
/// moment without a client fails the applications' I/O). One that fails before it mounts (a
/// volume that is gone, say), or dies as soon as it mounted, is retried more slowly, up to
/// 10 s apart.
pub fn restart_pause(served: bool, ran: Duration, last: Duration) -> Duration {
    if served && ran >= Duration::from_secs(1) {
        Duration::ZERO
    } else {
        (last * 2).clamp(Duration::from_millis(200), Duration::from_secs(10))
    }
}

/// Stops the client (SIGTERM, at most 8 s; it unmounts as it goes).
async fn stop(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let _ = tokio::time::timeout(Duration::from_secs(8), child.wait()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_served_restarts_at_once_and_one_that_cannot_mount_backs_off() {
        let ms = Duration::from_millis;
        // Killed after serving for 8 s, five times over: no wait, ever (the backoff that
        // was here doubled to 10 s across kills 10 s apart, docs/benchmarks/client-crash.md).
        let mut last = Duration::ZERO;
        for _ in 0..5 {
            last = restart_pause(true, Duration::from_secs(8), last);
            assert_eq!(last, Duration::ZERO);
        }
        // Never mounted: 200 ms, doubling, at most 10 s.
        let waits: Vec<Duration> = (0..8)
            .scan(Duration::ZERO, |l, _| {
                *l = restart_pause(false, ms(50), *l);
                Some(*l)
            })
            .collect();
        assert_eq!(waits[..3], [ms(200), ms(400), ms(800)]);
        assert_eq!(*waits.last().unwrap(), Duration::from_secs(10));
        // Mounted, then died at once: a crash loop, backed off too.
        assert_eq!(restart_pause(true, ms(300), ms(400)), ms(800));
    }
}
