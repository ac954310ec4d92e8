//! What a writer sees when its PV's gluster client dies, as the product ships: `demo.sh` on
//! three real kubelets (the chart's defaults, gluster TLS on), a subdirectory PVC, and a pod
//! on gk-node-1 with two writers of 4 KiB with fsync every 50 ms: one opens its file for
//! each write (as `dd` does), the other writes through one descriptor it opened before (as a
//! database does) and opens its file again only after 2 s of failures. The PV's gluster
//! client (in its mount pod) is killed with SIGKILL, KILLS times per round, in ROUNDS rounds;
//! each round takes the two ways the node plugin finds the dead client's targets in turn
//! (`GK_REPAIR_ON_MOUNT_CHANGE`, set on the DaemonSet: on mount-table changes, or on its
//! 3 s timer only). Per kill: when a new client serves the staging path (its process seen
//! from the host), how long the writer waited, its failed writes, and whether the held
//! descriptor ever worked again.
//!
//!   bash tests/env/images.sh build
//!   GK_IMAGES_BUILT=1 cargo bench --profile dev -p gk-testenv --bench client_crash -- [KILLS] [ROUNDS]
//!
//! Writes docs/benchmarks/client-crash.{json,md}. Needs root; leaves no demo behind.

use std::path::Path;
use std::time::{Duration, Instant};

use gk_testenv::bench::client_crash::{window, Kill, Results, MODES};
use gk_testenv::bench::{self, RunInfo};
use gk_testenv::demo::{self, now_ms, until, Demo, NS, RELEASE_NS, STORAGE_CLASS};

/// After each kill, how long the writers are watched before the next.
const SETTLE: Duration = Duration::from_secs(8);

const WRITERS: &str = r#"reopen() {
  while [ ! -e /data/stop ]; do
    if dd if=/dev/zero of=/data/reopen bs=4k count=1 conv=fsync,notrunc status=none 2>/dev/null
    then echo "ok reopen $(date +%s%3N)"; else echo "fail reopen $(date +%s%3N)"; fi
    sleep 0.05
  done
}
held() {
  exec 3<>/data/held; fails=0
  while [ ! -e /data/stop ]; do
    if dd if=/dev/zero bs=4k count=1 conv=fsync status=none >&3 2>/dev/null
    then echo "ok held $(date +%s%3N)"; fails=0
    else echo "fail held $(date +%s%3N)"; fails=$((fails + 1))
      # A redirection that fails on `exec` would end the shell: tried in a subshell first.
      if [ $fails -ge 40 ] && (: 3<>/data/held) 2>/dev/null; then
        exec 3<>/data/held; echo "reopen held $(date +%s%3N)"; fails=0
      fi
    fi
    sleep 0.05
  done
}
reopen & held & wait"#;

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .filter_map(|a| a.parse().ok())
        .collect();
    let kills = args.first().copied().unwrap_or(5);
    let rounds = args.get(1).copied().unwrap_or(2);
    bench::require_quiet(Duration::from_secs(600));
    let run = RunInfo::now(&format!(
        "GK_IMAGES_BUILT=1 cargo bench --profile dev -p gk-testenv --bench client_crash -- \
         {kills} {rounds}"
    ));
    let k = Demo::up(&[]);
    k.apply(&demo::rwx_claim("crash", STORAGE_CLASS, "1Gi"));
    k.wait(
        "pvc",
        "crash",
        "{.status.phase}",
        "Bound",
        Duration::from_secs(180),
    );
    k.apply(&demo::workload_pod(
        "crash-writer",
        &[("crash", "/data")],
        WRITERS,
    ));
    k.wait(
        "pod",
        "crash-writer",
        "{.status.phase}",
        "Running",
        Duration::from_secs(180),
    );
    let pv = k.get("pvc", "crash", "{.spec.volumeName}");
    let storage = bench::storage_of(Path::new("/var/lib/glusterkube-node/gk-node-1/bricks"));

    let mut results = Results {
        run,
        storage,
        kills: Vec::new(),
    };
    for round in 0..rounds {
        for (mode, _) in MODES {
            repair_on_mount_change(&k, mode == "mount-events");
            let staging = staging_of(&k, &pv);
            std::thread::sleep(Duration::from_secs(5));
            for _ in 0..kills {
                let pid = until(
                    "the PV's gluster client",
                    Duration::from_secs(60),
                    Duration::from_millis(100),
                    || gk_mount::fuse_client_pid(Path::new(&staging)),
                );
                let load1 = demo::load1();
                let killed = now_ms();
                let started = Instant::now();
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .unwrap();
                until(
                    "a new gluster client",
                    Duration::from_secs(60),
                    Duration::from_millis(10),
                    || gk_mount::fuse_client_pid(Path::new(&staging)).filter(|p| *p != pid),
                );
                let client_ms = started.elapsed().as_secs_f64() * 1000.0;
                std::thread::sleep(SETTLE);
                let log = k.kubectl(&["-n", NS, "logs", "crash-writer"]);
                let (back_ms, failed, held_failed, held_ok) = window(&log, killed, now_ms());
                eprintln!(
                    "{mode} round {round}: client {client_ms:.0} ms, writer back {back_ms} ms, \
                     {failed} failed, held {held_failed}/{held_ok}, load {load1:.2}"
                );
                results.kills.push(Kill {
                    mode: mode.into(),
                    round,
                    load1,
                    client_ms,
                    back_ms,
                    failed,
                    held_failed,
                    held_ok,
                });
            }
        }
    }
    let _ =
        k.0.kubectl(&["-n", NS, "delete", "pod", "crash-writer", "--wait=true"]);
    let _ =
        k.0.kubectl(&["-n", NS, "delete", "pvc", "crash", "--wait=true"]);
    Demo::clean();

    let block = bench::client_crash::render(&results);
    bench::write_results(
        &bench::out_dir(),
        "client-crash",
        &serde_json::to_value(&results).unwrap(),
        &block,
    )
    .unwrap();
    print!("{block}");
}

/// The node plugin DaemonSet told whether to repair on mount-table changes, and rolled.
fn repair_on_mount_change(k: &Demo, on: bool) {
    let ds = k.kubectl(&[
        "-n",
        RELEASE_NS,
        "get",
        "daemonset",
        "-l",
        "app.kubernetes.io/component=csi-node",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    k.kubectl(&[
        "-n",
        RELEASE_NS,
        "set",
        "env",
        &format!("daemonset/{ds}"),
        "-c",
        "gk-csi",
        &format!("GK_REPAIR_ON_MOUNT_CHANGE={on}"),
    ]);
    k.kubectl(&[
        "-n",
        RELEASE_NS,
        "rollout",
        "status",
        &format!("daemonset/{ds}"),
        "--timeout=300s",
    ]);
}

/// The staging path of `pv` on gk-node-1, from its mount pod's annotation.
fn staging_of(k: &Demo, pv: &str) -> String {
    let handle = k.kubectl(&["get", "pv", pv, "-o", "jsonpath={.spec.csi.volumeHandle}"]);
    until(
        "the PV's mount pod",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let pods = k.json(&[
                "-n",
                RELEASE_NS,
                "get",
                "pods",
                "-l",
                "app.kubernetes.io/component=mount",
            ]);
            pods["items"].as_array()?.iter().find_map(|p| {
                let a = &p["metadata"]["annotations"];
                (a["glusterkube.dev/volume-id"] == handle.as_str())
                    .then(|| a["glusterkube.dev/staging"].as_str().map(str::to_string))?
            })
        },
    )
}
