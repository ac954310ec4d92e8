//! Changes to the node plugin's mount table, as the kernel announces them. A `poll` on
//! `/proc/self/mountinfo` wakes with POLLPRI (and POLLERR) each time a mount is added to or
//! removed from the namespace (proc(5)); the kernel re-arms it by itself. The repair pass runs
//! on each change: when a mount pod's gluster client dies and its new client mounts the
//! staging path, the published targets are bound again at once instead of at the next timed
//! pass (docs/benchmarks/client-crash.md measures both).

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use tokio::sync::Notify;

/// The shortest time between two passes started by mount changes: a node where many pods
/// start mounts many volumes of their own (secrets, tokens), and one pass after a burst is
/// enough.
pub const SETTLE: Duration = Duration::from_millis(100);

/// Starts watching; the returned [`Notify`] is notified after each change (a change while
/// nobody waits is kept, so none is lost between two passes).
pub fn watch() -> std::io::Result<Arc<Notify>> {
    // The calling thread's namespace (the process's, but for a test that unshared its own).
    let file = std::fs::File::open("/proc/thread-self/mountinfo")?;
    let changed = Arc::new(Notify::new());
    let notify = changed.clone();
    std::thread::Builder::new()
        .name("mount-events".into())
        .spawn(move || loop {
            let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLPRI)];
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => notify.notify_one(),
                Err(Errno::EINTR) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "watching the mount table failed; repairs run on their timer only");
                    return;
                }
            }
        })?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mount made in a namespace of the test's own wakes the watcher, and nothing else
    /// does meanwhile (the watcher would otherwise spin). Needs root (unshare, mount), as
    /// the test command does.
    #[test]
    fn a_mount_wakes_the_watcher() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // In a thread of its own: unshare(CLONE_NEWNS) changes the calling thread only, and
        // the watcher's thread must be made after it to share its namespace.
        std::thread::spawn(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
            nix::mount::mount(
                None::<&str>,
                "/",
                None::<&str>,
                nix::mount::MsFlags::MS_REC | nix::mount::MsFlags::MS_PRIVATE,
                None::<&str>,
            )
            .unwrap();
            let changed = watch().unwrap();
            rt.block_on(async {
                let quiet = tokio::time::timeout(Duration::from_millis(300), changed.notified());
                assert!(quiet.await.is_err(), "woken with no mount made");
                let dir = tempfile::tempdir().unwrap();
                nix::mount::mount(
                    Some("tmpfs"),
                    dir.path(),
                    Some("tmpfs"),
                    nix::mount::MsFlags::empty(),
                    None::<&str>,
                )
                .unwrap();
                let woke = tokio::time::timeout(Duration::from_secs(5), changed.notified());
                assert!(woke.await.is_ok(), "a mount did not wake the watcher");
                nix::mount::umount(dir.path()).unwrap();
                let woke = tokio::time::timeout(Duration::from_secs(5), changed.notified());
                assert!(woke.await.is_ok(), "an unmount did not wake the watcher");
            });
        })
        .join()
        .unwrap();
    }
}
