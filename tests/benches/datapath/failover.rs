//! Failover: a durable writer on each volume while one node's brick process is killed, or
//! the node's link is cut (nothing closed, packets lost); the same event hits every volume
//! at the same moment.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_testenv::bench::datapath::Stall;
use gk_testenv::gluster_net::GlusterNet;

use crate::cases::Target;
use crate::{run, wait_bricks_online, wait_healed};

/// One durable 4 KiB write (pwrite + fsync) every 20 ms, as a database would issue them.
struct Writer {
    key: String,
    stop: Arc<AtomicBool>,
    /// (start, end, ok) of each operation.
    ops: Arc<Mutex<Vec<(Instant, Instant, bool)>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(key: &str, dir: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(Mutex::new(Vec::new()));
        let path = dir.join("failover.bin");
        let (s, o) = (stop.clone(), ops.clone());
        let handle = std::thread::spawn(move || {
            let f = File::create(&path).expect("failover file");
            let buf = gk_testenv::test_data(9, 4096);
            let mut i = 0u64;
            while !s.load(Ordering::SeqCst) {
                let start = Instant::now();
                let ok = f.write_all_at(&buf, (i % 256) * 4096).is_ok() && f.sync_data().is_ok();
                o.lock().unwrap().push((start, Instant::now(), ok));
                i += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(f);
            let _ = std::fs::remove_file(&path);
        });
        Self {
            key: key.into(),
            stop,
            ops,
            handle: Some(handle),
        }
    }

    /// Whether the writer stalled (a gap of 1 s or more after `t0`) and has since completed
    /// writes for 3 s.
    fn resumed(&self, t0: Instant) -> bool {
        let ops = self.ops.lock().unwrap();
        let mut last = t0;
        let mut resumed_at = None;
        for (_, e, _) in ops.iter().filter(|(_, e, _)| *e >= t0) {
            if *e - last >= Duration::from_secs(1) {
                resumed_at = Some(*e);
            }
            last = *e;
        }
        resumed_at.is_some_and(|r| last >= r + Duration::from_secs(3))
    }

    /// Failed operations and the longest gap between completions after `t0`.
    fn errors_and_gap(&self, t0: Instant) -> (usize, f64) {
        let ops = self.ops.lock().unwrap();
        let errors = ops.iter().filter(|(s, _, ok)| *s >= t0 && !ok).count();
        let mut last = t0;
        let mut gap = 0f64;
        for (_, e, _) in ops.iter().filter(|(_, e, _)| *e >= t0) {
            gap = gap.max((*e - last).as_secs_f64());
            last = *e;
        }
        (errors, gap)
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.join().expect("writer thread");
        }
    }
}

/// Runs `event` (`brick-kill` or `node-cut`) `reps` times on node 3 with a writer on every
/// gluster target, healing in between.
pub async fn failover(
    net: &GlusterNet,
    targets: &[&Target],
    event: &str,
    reps: usize,
) -> Vec<Stall> {
    let victim = &net.nodes()[2];
    // Targets may share a volume (one volume mounted two ways): each is hit and healed once.
    let mut volumes: Vec<&str> = targets.iter().map(|t| t.volume.as_str()).collect();
    volumes.sort();
    volumes.dedup();
    let mut out = Vec::new();
    for rep in 0..reps {
        let writers: Vec<Writer> = targets
            .iter()
            .map(|t| Writer::start(&t.key, &t.dir))
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The victim: node 3's brick of every volume, or node 3 as a whole.
        let mut pids = Vec::new();
        if event == "brick-kill" {
            for v in &volumes {
                let st = net.gluster(0).volume_status(v).await.expect("status");
                let b = st
                    .bricks
                    .iter()
                    .find(|b| b.brick.host == victim.address)
                    .expect("brick on node 3");
                pids.push(b.pid.expect("brick pid"));
            }
        }
        let t0 = Instant::now();
        if event == "brick-kill" {
            for pid in &pids {
                nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                )
                .expect("kill glusterfsd");
            }
        } else {
            // The node vanishes: its link goes down, nothing is closed, packets are lost.
            run("ip", &["-n", victim.netns(), "link", "set", "eth0", "down"]);
        }
        // A killed brick closes its connections, so clients carry on at once; a vanished
        // node stalls them until the ping timer expires.
        let deadline = t0 + Duration::from_secs(if event == "brick-kill" { 8 } else { 120 });
        while Instant::now() < deadline && !writers.iter().all(|w| w.resumed(t0)) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A few more seconds so the window is not cut right at the resume.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for w in &writers {
            let (errors, gap) = w.errors_and_gap(t0);
            println!(
                "failover {event} rep {rep} {}: longest gap between writes {gap:.2} s, {errors} failed",
                w.key
            );
            out.push(Stall {
                event: event.into(),
                case: w.key.clone(),
                rep,
                stall_s: gap,
                failed_writes: errors,
            });
        }
        for w in writers {
            w.finish();
        }
        // Restore and heal before the next event.
        if event == "brick-kill" {
            for v in &volumes {
                net.gluster(0)
                    .volume_start_force(v)
                    .await
                    .expect("start force");
            }
        } else {
            run("ip", &["-n", victim.netns(), "link", "set", "eth0", "up"]);
        }
        for v in &volumes {
            wait_bricks_online(net, v).await;
            let _ = net.gluster(0).heal_start(v).await;
            let healed = wait_healed(net, v, Duration::from_secs(240)).await;
            assert!(healed.is_some(), "{v} did not heal after {event}");
        }
    }
    out
}
