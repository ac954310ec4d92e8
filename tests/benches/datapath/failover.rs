//! Failover: a durable writer on each volume while one node's brick process is killed, or
//! the node's link is cut (nothing closed, packets lost); the same event hits every volume
//! at the same moment. `restart-cut` is a node cut that follows, each time, the restart of
//! node 3's brick of another volume with quota on, as the operator restarts an offline brick
//! (`volume start force`, which makes glusterd restart quotad on every node).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_testenv::bench::datapath::{Heal, Stall};
use gk_testenv::gluster_net::GlusterNet;

use crate::cases::Target;
use crate::{wait_bricks_online, wait_healed};

/// One durable 4 KiB write (pwrite + fsync) every 20 ms, as a database would issue them.
struct Writer {
    key: String,
    stop: Arc<AtomicBool>,
    /// (start, end, ok) of each operation.
    ops: Arc<Mutex<Vec<(Instant, Instant, bool)>>>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    /// Writes to `path`, which it creates, and deletes once stopped.
    fn start(key: &str, path: &Path) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let ops = Arc::new(Mutex::new(Vec::new()));
        let path = path.to_path_buf();
        let (s, o) = (stop.clone(), ops.clone());
        let handle = std::thread::spawn(move || {
            let start = Instant::now();
            let f = File::create(&path).expect("failover file");
            o.lock().unwrap().push((start, Instant::now(), true));
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
            // Printed rather than ignored: a delete that failed would leave a copy behind
            // that has nothing to do with healing.
            if let Err(e) = std::fs::remove_file(&path) {
                println!("failover writer: deleting {} failed: {e}", path.display());
            }
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

    /// Failed operations that ended after `t0` (one sent just before the event counts: it
    /// is the event that failed it), and the longest gap between completions after `t0`.
    fn errors_and_gap(&self, t0: Instant) -> (usize, f64) {
        let ops = self.ops.lock().unwrap();
        let errors = ops.iter().filter(|(_, e, ok)| *e >= t0 && !ok).count();
        let mut last = t0;
        let mut gap = 0f64;
        for (_, e, _) in ops.iter().filter(|(_, e, _)| *e >= t0) {
            gap = gap.max((*e - last).as_secs_f64());
            last = *e;
        }
        (errors, gap)
    }

    /// Prints every operation after `t0` that took 0.3 s or more, in seconds from `t0`, so a
    /// stall can be laid beside the client's log.
    fn print_slow_ops(&self, t0: Instant) {
        let ops = self.ops.lock().unwrap();
        for (s, e, ok) in ops.iter().filter(|(_, e, _)| *e >= t0) {
            if *e - *s >= Duration::from_millis(300) {
                let from = |i: Instant| {
                    i.checked_duration_since(t0)
                        .map_or_else(|| -(t0 - i).as_secs_f64(), |d| d.as_secs_f64())
                };
                println!(
                    "  {}: write from {:+.3} s to {:+.3} s{}",
                    self.key,
                    from(*s),
                    from(*e),
                    if *ok { "" } else { " (failed)" }
                );
            }
        }
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            h.join().expect("writer thread");
        }
    }
}

/// How long a volume may take to heal once the event is undone before its heal counts as
/// stuck (the stuck heals seen never finished; healthy ones took seconds).
const HEAL_LIMIT: Duration = Duration::from_secs(120);

/// The process id of `volume`'s brick on `host`.
async fn brick_pid(net: &GlusterNet, volume: &str, host: &str) -> u32 {
    let st = net.gluster(0).volume_status(volume).await.expect("status");
    let b = st
        .bricks
        .iter()
        .find(|b| b.brick.host == host)
        .unwrap_or_else(|| panic!("{volume} has no brick on {host}"));
    b.pid.expect("brick pid")
}

/// Kills a brick process the way a crash would: no signal it can catch.
fn kill_brick(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill glusterfsd");
}

/// Kills `volume`'s brick on `host` and starts it again: the remedy for a heal stuck on that
/// brick.
async fn restart_victim_brick(net: &GlusterNet, volume: &str, host: &str) {
    let pid = brick_pid(net, volume, host).await;
    kill_brick(pid);
    // glusterd starts a brick again only once its process is gone.
    let proc = format!("/proc/{pid}");
    let gone = Instant::now() + Duration::from_secs(30);
    while Path::new(&proc).exists() && Instant::now() < gone {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    net.gluster(0)
        .volume_start_force(volume)
        .await
        .expect("start force");
    wait_bricks_online(net, volume).await;
    let _ = net.gluster(0).heal_start(volume).await;
}

/// A replica-3 volume with quota on that none of the writers use: the one whose brick
/// `restart-cut` restarts.
const BYSTANDER: &str = "bench-bystander";

async fn make_bystander(net: &GlusterNet) {
    let g = net.gluster(0);
    let layout = crate::cases::Kind::Replicate3.layout();
    g.volume_create(BYSTANDER, layout, &net.bricks(BYSTANDER), false)
        .await
        .expect("create the bystander volume");
    g.volume_start(BYSTANDER)
        .await
        .expect("start the bystander volume");
    g.quota_enable(BYSTANDER)
        .await
        .expect("enable quota on the bystander volume");
    wait_bricks_online(net, BYSTANDER).await;
}

/// Runs `event` (`brick-kill`, `node-cut` or `restart-cut`) `reps` times on node 3 with a writer on every
/// gluster target, healing in between.
pub async fn failover(
    net: &GlusterNet,
    targets: &[&Target],
    event: &str,
    reps: usize,
    client_log: &dyn Fn(&Target) -> String,
) -> Vec<Stall> {
    let victim = &net.nodes()[2];
    // Targets may share a volume (one volume mounted two ways): each is hit and healed once.
    let mut volumes: Vec<&str> = targets.iter().map(|t| t.volume.as_str()).collect();
    volumes.sort();
    volumes.dedup();
    let cut = event != "brick-kill";
    if event == "restart-cut" {
        make_bystander(net).await;
    }
    let mut out = Vec::new();
    for rep in 0..reps {
        if event == "restart-cut" {
            restart_victim_brick(net, BYSTANDER, &victim.address).await;
            let healed = wait_healed(net, BYSTANDER, Duration::from_secs(60)).await;
            assert!(
                healed.is_some(),
                "{BYSTANDER} did not heal after its brick restarted"
            );
        }
        // A fresh name each time: the writer deletes its file while the event is on, and a
        // copy of a deleted file left on the returning brick must not be taken up again by the
        // next repetition's writer (that is measured below, not hidden).
        let file = format!("failover-{event}-{rep}.bin");
        let writers: Vec<Writer> = targets
            .iter()
            .map(|t| Writer::start(&t.key, &t.dir.join(&file)))
            .collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The victim: node 3's brick of every volume, or node 3 as a whole.
        let mut pids = Vec::new();
        if event == "brick-kill" {
            for v in &volumes {
                pids.push(brick_pid(net, v, &victim.address).await);
            }
        }
        let load = gk_testenv::bench::load_average()[0];
        let t0 = Instant::now();
        let wall0 = jiff::Timestamp::now();
        if event == "brick-kill" {
            for pid in &pids {
                kill_brick(*pid);
            }
        } else {
            // The node vanishes: its link goes down, nothing is closed, packets are lost.
            victim.set_link(false).expect("cut node 3's link");
        }
        // A killed brick closes its connections, so clients carry on at once; a vanished
        // node stalls them until the ping timer expires.
        let deadline = t0 + Duration::from_secs(if cut { 120 } else { 8 });
        while Instant::now() < deadline && !writers.iter().all(|w| w.resumed(t0)) {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // A few more seconds so the window is not cut right at the resume.
        tokio::time::sleep(Duration::from_secs(2)).await;
        println!("failover {event} rep {rep}: event at {wall0}");
        let mut rep_out = Vec::new();
        for (w, t) in writers.iter().zip(targets) {
            w.print_slow_ops(t0);
            print_log_window(&client_log(t), wall0, Duration::from_secs(12), &w.key);
        }
        for w in &writers {
            let (errors, gap) = w.errors_and_gap(t0);
            println!(
                "failover {event} rep {rep} {}: longest gap between writes {gap:.2} s, {errors} failed",
                w.key
            );
            rep_out.push(Stall {
                event: event.into(),
                case: w.key.clone(),
                rep,
                stall_s: gap,
                failed_writes: errors,
                heal: None,
                load: Some(load),
                deleted_file_left: false,
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
            victim.set_link(true).expect("restore node 3's link");
        }
        let back = Instant::now();
        for v in &volumes {
            wait_bricks_online(net, v).await;
            let _ = net.gluster(0).heal_start(v).await;
        }
        // Every volume is checked in each round, so that one volume's stuck heal neither
        // delays nor inflates the time recorded for the others.
        let mut heals = std::collections::BTreeMap::new();
        loop {
            for v in &volumes {
                if !heals.contains_key(*v) && wait_healed(net, v, Duration::ZERO).await.is_some() {
                    let seconds = back.elapsed().as_secs_f64();
                    heals.insert(v.to_string(), Heal::Healed { seconds });
                }
            }
            if heals.len() == volumes.len() || back.elapsed() > HEAL_LIMIT {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        for v in &volumes {
            if heals.contains_key(*v) {
                continue;
            }
            println!("failover {event} rep {rep}: {v} not healed in {HEAL_LIMIT:?}; restarting node 3's brick");
            restart_victim_brick(net, v, &victim.address).await;
            let healed = wait_healed(net, v, Duration::from_secs(240)).await;
            assert!(
                healed.is_some(),
                "{v} did not heal after {event}, even after its brick on node 3 was restarted"
            );
            let limit_s = HEAL_LIMIT.as_secs_f64();
            heals.insert(v.to_string(), Heal::Stuck { limit_s });
        }
        // The writers deleted their files while the event was on: once healed, no brick may
        // still hold one.
        let mut left = std::collections::BTreeMap::new();
        for v in &volumes {
            let copies = copies_on_bricks(net, v, &file);
            for c in &copies {
                println!("failover {event} rep {rep}: {v} healed, yet a deleted file is still on a brick: {}", c.display());
            }
            left.insert(*v, !copies.is_empty());
        }
        for (mut s, t) in rep_out.into_iter().zip(targets) {
            s.heal = heals.get(t.volume.as_str()).copied();
            s.deleted_file_left = left.get(t.volume.as_str()).copied().unwrap_or(false);
            out.push(s);
        }
    }
    out
}

/// Every copy of a file named `name` on `volume`'s bricks (on any node, in any directory, not
/// counting gluster's own `.glusterfs` store).
fn copies_on_bricks(net: &GlusterNet, volume: &str, name: &str) -> Vec<std::path::PathBuf> {
    fn walk(dir: &Path, name: &str, found: &mut Vec<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_name() == name {
                found.push(path);
            } else if e.file_name() != ".glusterfs" && e.file_type().is_ok_and(|t| t.is_dir()) {
                walk(&path, name, found);
            }
        }
    }
    let mut found = Vec::new();
    for n in net.nodes() {
        walk(&n.brick_root().join(volume), name, &mut found);
    }
    found
}

/// Prints the lines of a gluster log stamped from 1 s before `at` to `span` after it (gluster
/// stamps `[YYYY-MM-DD HH:MM:SS.ffffff +0000]` in UTC, which sorts as text).
fn print_log_window(text: &str, at: jiff::Timestamp, span: Duration, key: &str) {
    let stamp = |t: jiff::Timestamp| {
        format!(
            "{}.{:06}",
            t.strftime("%Y-%m-%d %H:%M:%S"),
            t.subsec_microsecond()
        )
    };
    let from = stamp(at - Duration::from_secs(1));
    let to = stamp(at + span);
    for line in text.lines() {
        let Some(ts) = line.get(1..27) else { continue };
        if ts >= from.as_str() && ts <= to.as_str() {
            println!("  {key} log: {line}");
        }
    }
}
