//! Brick processes glusterd has lost: a glusterfsd that lives while glusterd reports its
//! brick offline long after it started. Seen with 25 volumes made at once on 2 cores: two
//! processes for one brick started in the same second and neither finished fetching its
//! volfile. `volume start force` leaves such a brick alone, since its pid file names a live
//! process; the agent kills it first, so that the forced start runs a fresh one.

use std::time::Duration;

/// How long a brick process may take to reach glusterd before it counts as hung: far more
/// than a brick needs to start on a loaded node, so a starting brick is never killed.
pub const HUNG_AFTER: Duration = Duration::from_secs(90);

/// A running glusterfsd as /proc shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickProcess {
    pub pid: i32,
    pub args: Vec<String>,
    /// Time since the process started.
    pub age: Duration,
}

impl BrickProcess {
    /// The value after `flag` in the arguments (`--flag value` or `--flag=value`).
    fn arg(&self, flag: &str) -> Option<&str> {
        let mut it = self.args.iter();
        while let Some(a) = it.next() {
            if a == flag {
                return it.next().map(String::as_str);
            }
            if let Some(v) = a.strip_prefix(flag).and_then(|r| r.strip_prefix('=')) {
                return Some(v);
            }
        }
        None
    }
}

/// The processes to kill: those serving a brick of `volume` whose path is in `offline`
/// (bricks of this node that glusterd reports offline), older than `min_age`.
pub fn hung(
    processes: &[BrickProcess],
    volume: &str,
    offline: &[&str],
    min_age: Duration,
) -> Vec<i32> {
    let prefix = format!("{volume}.");
    processes
        .iter()
        .filter(|p| p.age >= min_age)
        .filter(|p| {
            p.arg("--volfile-id")
                .is_some_and(|v| v.starts_with(&prefix))
        })
        .filter(|p| p.arg("--brick-name").is_some_and(|b| offline.contains(&b)))
        .map(|p| p.pid)
        .collect()
}

/// Kills `pids` (hung brick processes of `volume`) and waits, up to 10 s, until they are
/// reaped: glusterd counts a brick as running while its pid file is locked or its pid is in
/// /proc, a zombie's too, and a forced start would then leave it alone.
pub async fn kill(volume: &str, pids: &[i32]) {
    for &pid in pids {
        tracing::warn!(
            volume,
            pid,
            "killing a brick process glusterd reports offline long after it started"
        );
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while pids
        .iter()
        .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
        && std::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every glusterfsd this process can see, from /proc.
pub fn brick_processes() -> Vec<BrickProcess> {
    use procfs::Current;
    let Ok(uptime) = procfs::Uptime::current() else {
        return Vec::new();
    };
    let ticks = procfs::ticks_per_second().max(1) as f64;
    let Ok(all) = procfs::process::all_processes() else {
        return Vec::new();
    };
    all.flatten()
        .filter_map(|p| {
            let stat = p.stat().ok()?;
            if stat.comm != "glusterfsd" {
                return None;
            }
            let started = stat.starttime as f64 / ticks;
            Some(BrickProcess {
                pid: p.pid,
                args: p.cmdline().ok()?,
                age: Duration::from_secs_f64((uptime.uptime - started).max(0.0)),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn brick(pid: i32, volume: &str, path: &str, age: u64) -> BrickProcess {
        BrickProcess {
            pid,
            args: [
                "/usr/sbin/glusterfsd",
                "-s",
                "n1.pool.svc",
                "--volfile-id",
                &format!(
                    "{volume}.n1.pool.svc.{}",
                    path.trim_start_matches('/').replace('/', "-")
                ),
                "-p",
                "/var/run/gluster/vols/x.pid",
                "--brick-name",
                path,
                "--brick-port",
                "49152",
            ]
            .map(String::from)
            .to_vec(),
            age: Duration::from_secs(age),
        }
    }

    #[test]
    fn only_old_processes_of_the_offline_bricks_of_the_volume_are_hung() {
        let procs = [
            // Two processes for one offline brick, both long past starting: both go.
            brick(10, "ns-v", "/b/ns-v-0", 600),
            brick(11, "ns-v", "/b/ns-v-0", 600),
            // A brick of the volume that is online: kept.
            brick(12, "ns-v", "/b/ns-v-1", 600),
            // Still starting: kept.
            brick(13, "ns-v", "/b/ns-v-2", 5),
            // Another volume whose name shares a prefix, on the same path list: kept.
            brick(14, "ns-v2", "/b/ns-v-0", 600),
        ];
        let offline = ["/b/ns-v-0", "/b/ns-v-2"];
        assert_eq!(hung(&procs, "ns-v", &offline, HUNG_AFTER), [10, 11]);
        assert!(hung(&procs, "ns-v", &[], HUNG_AFTER).is_empty());
        // `--flag=value` is read too.
        let mut eq = brick(15, "ns-v", "/b/ns-v-0", 600);
        eq.args = vec![
            "glusterfsd".into(),
            "--volfile-id=ns-v.n1.b-ns-v-0".into(),
            "--brick-name=/b/ns-v-0".into(),
        ];
        assert_eq!(hung(&[eq], "ns-v", &offline, HUNG_AFTER), [15]);
    }

    #[test]
    fn a_running_glusterfsd_is_found_in_proc_with_its_arguments_and_age() {
        // A shell copied under the name glusterfsd: /proc names the process so, and its
        // arguments after the command are the brick's.
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("glusterfsd");
        std::fs::copy("/bin/sh", &exe).unwrap();
        let mut child = std::process::Command::new(&exe)
            .args([
                "-c",
                "sleep 30",
                "--volfile-id",
                "vol.n1.b-x",
                "--brick-name",
                "/b/x",
            ])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let procs = brick_processes();
        let _ = child.kill();
        let _ = child.wait();
        let me = procs
            .iter()
            .find(|p| p.pid == child.id() as i32)
            .expect("the process is listed");
        assert!(me.age < Duration::from_secs(30), "{me:?}");
        assert_eq!(hung(&procs, "vol", &["/b/x"], Duration::ZERO), [me.pid]);
        assert!(hung(&procs, "vol", &["/b/x"], HUNG_AFTER).is_empty());
    }
}
