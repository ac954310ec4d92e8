//! Repairing mounts whose gluster client died (the plugin container that ran it was
//! restarted, or the client crashed): the staging mount is mounted again, every published
//! target bound again, and inside every running container that still holds the dead mount
//! the repaired one is attached in its place.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::NodeService;
use crate::mount::{self, reattach, MountSource};
use crate::state::Published;

impl NodeService {
    /// Repairs this plugin's mounts after a restart, or after a gluster client died: a staging
    /// mount whose client is gone (ENOTCONN) or that vanished is mounted again, every
    /// published target on the dead mount is bound again, and in every other mount namespace
    /// (running containers) a mount of the dead filesystem is replaced by the repaired one.
    pub async fn recover(&self) -> Repair {
        let mut report = Repair::default();
        // Read once: paths of different volumes never overlap, so repairing one volume does
        // not change what this says about the next.
        let table = match reattach::own_mounts() {
            Ok(t) => t,
            Err(e) => {
                report.failed.push(e.to_string());
                return report;
            }
        };
        let clients = mount::fuse_clients();
        for v in self.state.all() {
            let _guard = match self.locks.try_lock(&v.volume_id) {
                Ok(g) => g,
                Err(_) => continue,
            };
            let staging_device = reattach::device_at(&table, &v.staging);
            let staging_dead = staging_device.is_none() || client_gone(&clients, &v.staging);
            // Read before anything is unmounted: containers are found by these devices.
            let mut dead_devices: Vec<reattach::Device> = Vec::new();
            if staging_dead {
                dead_devices.extend(staging_device);
            }
            // A target is a bind mount of the staging mount, so it shares its device; one
            // that does not was bound before the staging mount was last repaired.
            let mut dead_targets: Vec<&Published> = Vec::new();
            for t in &v.targets {
                let device = reattach::device_at(&table, &t.path);
                if staging_dead || device.is_none() || device != staging_device {
                    dead_devices.extend(device);
                    dead_targets.push(t);
                }
            }
            let first = !staging_dead
                && self
                    .swept
                    .lock()
                    .map(|mut s| s.insert(v.volume_id.clone()))
                    .unwrap_or(false);
            if first {
                // Containers a previous plugin left on a dead copy of this mount, if any.
                let live = (
                    staging_device,
                    table.iter().rev().find(|e| e.mount_point == v.staging),
                );
                if let (Some(live), Some(entry)) = live {
                    let source = entry.source.clone();
                    let stale = tokio::task::spawn_blocking(move || {
                        reattach::stale_copies_anywhere(&source, live)
                    })
                    .await
                    .unwrap_or_default();
                    if !stale.is_empty() {
                        tracing::warn!(volume_id = %v.volume_id, devices = ?stale, "containers hold a dead copy of the mount; re-attaching");
                        let mut owed = self.unattached_of(&v.volume_id);
                        owed.extend(stale);
                        self.owe_unattached(&v.volume_id, owed);
                    }
                }
            }
            let owed = self.unattached_of(&v.volume_id);
            dead_devices.extend(owed.iter().copied());
            dead_devices.sort();
            dead_devices.dedup();
            if !staging_dead && dead_targets.is_empty() && owed.is_empty() {
                continue;
            }
            if staging_dead {
                if let (Some(pods), Some(_)) = (&self.mount_pods, &v.mount_pod) {
                    // The mount pod starts its client again by itself; a pod that is gone
                    // is made again. Targets are bound once the staging mount serves.
                    if let Err(e) = pods.ensure(&v).await {
                        report
                            .failed
                            .push(format!("{}: {}", v.volume_id, e.message()));
                    }
                    continue;
                }
                tracing::warn!(volume_id = %v.volume_id, staging = %v.staging.display(), "staging mount is broken; remounting");
                let _ = nix::mount::umount2(&v.staging, nix::mount::MntFlags::MNT_DETACH);
                let source = MountSource {
                    servers: v.servers.clone(),
                    volume: v.volume.clone(),
                    subdir: v.subdir.clone(),
                };
                if let Err(e) = self
                    .mount_volume(
                        &source,
                        &v.staging,
                        &self.log_file(&v.volume_id),
                        &v.flags,
                        v.tls,
                        v.tls_secret.is_some(),
                    )
                    .await
                {
                    tracing::error!(volume_id = %v.volume_id, error = %e, "remount failed; the volume stays reported unhealthy and the next repair tries again");
                    report.failed.push(format!("{}: {e}", v.volume_id));
                    continue;
                }
            }
            for t in dead_targets {
                tracing::warn!(volume_id = %v.volume_id, target = %t.path.display(), "published mount is broken; binding again");
                let _ = nix::mount::umount2(&t.path, nix::mount::MntFlags::MNT_DETACH);
                if let Err(e) = mount::bind(&v.staging, &t.path, t.readonly) {
                    tracing::error!(volume_id = %v.volume_id, error = %e, "re-binding failed");
                    report.failed.push(format!("{}: {e}", v.volume_id));
                }
            }
            let staging = v.staging.clone();
            let devices = dead_devices.clone();
            let (done, failed) =
                tokio::task::spawn_blocking(move || reattach_in_containers(&staging, &devices))
                    .await
                    .unwrap_or_default();
            // A container left on a dead device is tried again by the next passes, until it
            // is reattached or gone.
            let owed = if failed.is_empty() {
                Vec::new()
            } else {
                dead_devices
            };
            self.owe_unattached(&v.volume_id, owed);
            for m in &done {
                tracing::warn!(volume_id = %v.volume_id, mount = %m, "re-attached the repaired mount inside a running container");
            }
            for e in &failed {
                tracing::error!(volume_id = %v.volume_id, error = %e, "could not re-attach the repaired mount inside a container; restart that pod");
            }
            report.reattached.extend(done);
            report
                .failed
                .extend(failed.into_iter().map(|e| format!("{}: {e}", v.volume_id)));
            report.volumes.push(v.volume_id.clone());
        }
        report
    }
}

impl NodeService {
    fn unattached_of(&self, volume_id: &str) -> Vec<reattach::Device> {
        self.unattached
            .lock()
            .map(|m| m.get(volume_id).cloned().unwrap_or_default())
            .unwrap_or_default()
    }

    fn owe_unattached(&self, volume_id: &str, devices: Vec<reattach::Device>) {
        if let Ok(mut m) = self.unattached.lock() {
            if devices.is_empty() {
                m.remove(volume_id);
            } else {
                m.insert(volume_id.to_string(), devices);
            }
        }
    }
}

/// Whether the gluster client of the mounted `staging` is gone: no live process serves it
/// (`clients`, from [`mount::fuse_clients`]) and the mount answers ENOTCONN. A live client
/// answers ENOTCONN too while no brick is reachable; that is the volume's failure, which a
/// remount would not mend. Mounts with a live client are not asked at all, so a repair pass
/// costs no round trip to the bricks.
fn client_gone(clients: &HashMap<PathBuf, i32>, staging: &Path) -> bool {
    !clients.contains_key(staging)
        && nix::sys::statvfs::statvfs(staging).err() == Some(nix::Error::ENOTCONN)
}

/// What one repair pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repair {
    /// Volumes whose staging or published mounts were mounted again.
    pub volumes: Vec<String>,
    /// Mounts replaced inside running containers, as `pid <n>: <path in the container>`.
    pub reattached: Vec<String>,
    /// What could not be repaired, and why.
    pub failed: Vec<String>,
}

/// Replaces the mounts of `dead` devices in other mount namespaces with the matching part
/// of the repaired mount at `staging`. Returns what was replaced and what failed.
fn reattach_in_containers(staging: &Path, dead: &[reattach::Device]) -> (Vec<String>, Vec<String>) {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    if dead.is_empty() {
        return (done, failed);
    }
    for holder in reattach::holders(dead) {
        for m in &holder.mounts {
            let Some(source) = reattach::source_for(staging, m) else {
                failed.push(format!(
                    "pids {:?}: {}: unusable mount root {:?}",
                    holder.pids,
                    m.mount_point.display(),
                    m.root
                ));
                continue;
            };
            // Through any process of the namespace: the first found may be one that ends
            // meanwhile (a writer's `dd`; seen once pids wrapped around).
            let mut last = None;
            for pid in &holder.pids {
                match reattach::reattach(*pid, m, &source) {
                    Ok(()) => {
                        done.push(format!("pid {pid}: {}", m.mount_point.display()));
                        last = None;
                        break;
                    }
                    Err(e) => last = Some(format!("pid {pid}: {}: {e}", m.mount_point.display())),
                }
            }
            failed.extend(last);
        }
    }
    (done, failed)
}
