//! Data-path, control-plane and failover benchmark, side by side in one run.
//!
//!   cargo bench -p gk-testenv --bench datapath -- [REPS] [ROW_SECONDS] [FAILOVER_REPS]
//!
//! Cases, on three real glusterd nodes in network namespaces (`GlusterNet`) with XFS bricks on
//! loop files, FUSE clients in the client namespace:
//! - (a) `raw`: a loop-backed XFS filesystem made like the bricks, mounted on the host;
//! - (b) `b`: a volume made with `gluster volume create` + `start` and nothing else, mounted
//!   with one volfile server as the seeds do;
//! - (c) `c`: a volume made through the brick agent over mTLS with the operator's default
//!   profile (`gk_operator::plan::options`), mounted with every server as the CSI driver does;
//! - (c+wbc) `cw`: as (c), replicate 3 only, mounted with `kernel-writeback-cache=yes`, to show
//!   what a client-side option would change.
//!
//! Volume types: replicate 3, arbiter (2+1) and disperse 2+1. Every repetition runs each
//! workload on every case back to back, the order rotating between repetitions, so slow
//! phases of the noisy machine hit all cases alike; medians are reported.
//!
//! Writes: docs/benchmarks/datapath.json (raw figures), docs/benchmarks/datapath.svg (plot) and
//! the generated block of docs/benchmarks/datapath.md. Set GK_BENCH_OUT to write elsewhere.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gk_agent::proto::{
    PeerRequest, VolumeCreateRequest, VolumeSetRequest, VolumeSpec, VolumeType as AgentType,
};
use gk_api::crd::TuningProfile;
use gk_gluster::{Brick, VolumeLayout};
use gk_mount::MountSource;
use gk_testenv::agents::AgentSet;
use gk_testenv::gluster_net::GlusterNet;
use serde_json::{json, Value};

const MIB: usize = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Replicate3,
    Arbiter,
    Disperse,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Replicate3, Kind::Arbiter, Kind::Disperse];

    fn name(self) -> &'static str {
        match self {
            Kind::Replicate3 => "replicate 3",
            Kind::Arbiter => "arbiter 2+1",
            Kind::Disperse => "disperse 2+1",
        }
    }

    fn short(self) -> &'static str {
        match self {
            Kind::Replicate3 => "r3",
            Kind::Arbiter => "arb",
            Kind::Disperse => "ec",
        }
    }

    fn layout(self) -> VolumeLayout {
        match self {
            Kind::Replicate3 => VolumeLayout::Replicate { replica: 3 },
            Kind::Arbiter => VolumeLayout::Arbiter,
            Kind::Disperse => VolumeLayout::Disperse {
                data: 2,
                redundancy: 1,
            },
        }
    }

    /// Bytes written to the bricks' disks per byte written by the client (the arbiter brick
    /// holds metadata only). All bricks share one disk here, so raw ÷ this is the ceiling.
    fn write_factor(self) -> f64 {
        match self {
            Kind::Replicate3 => 3.0,
            Kind::Arbiter => 2.0,
            Kind::Disperse => 1.5,
        }
    }
}

/// One place a workload runs.
struct Target {
    /// `raw`, or `<case>-<kind>` such as `b-r3`.
    key: String,
    /// `a`, `b`, `c` or `cw`.
    case: &'static str,
    kind: Option<Kind>,
    /// Gluster volume name (none for raw).
    volume: Option<String>,
    dir: PathBuf,
}

/// Figures of one workload row: higher is better for every unit used here.
#[derive(Clone)]
struct Row {
    id: &'static str,
    label: &'static str,
    unit: &'static str,
    class: RowClass,
}

#[derive(Clone, Copy, PartialEq)]
enum RowClass {
    SmallWrite,
    LargeSequential,
    Other,
}

fn rows() -> Vec<Row> {
    let r = |id, label, unit, class| Row {
        id,
        label,
        unit,
        class,
    };
    vec![
        r("dd-100B", "dd 100 B blocks", "MB/s", RowClass::SmallWrite),
        r("dd-1KiB", "dd 1 KiB blocks", "MB/s", RowClass::SmallWrite),
        r("dd-10KiB", "dd 10 KiB blocks", "MB/s", RowClass::SmallWrite),
        r("dd-100KiB", "dd 100 KiB blocks", "MB/s", RowClass::Other),
        r(
            "dd-1MiB",
            "dd 1 MiB blocks",
            "MB/s",
            RowClass::LargeSequential,
        ),
        r(
            "dd-100MiB",
            "dd 100 MiB blocks",
            "MB/s",
            RowClass::LargeSequential,
        ),
        r(
            "files-100x1MiB",
            "seed 001: 100 × 1 MiB files",
            "files/s",
            RowClass::Other,
        ),
        r(
            "fio-write",
            "seed 000: 4 writers, file per process, 1 MiB",
            "MB/s",
            RowClass::LargeSequential,
        ),
        r(
            "fio-read",
            "seed 000: 4 readers, file per process, 1 MiB",
            "MB/s",
            RowClass::Other,
        ),
        r(
            "small-create",
            "seed 004: create 4 KiB files",
            "files/s",
            RowClass::Other,
        ),
        r(
            "small-stat",
            "seed 004: stat files",
            "files/s",
            RowClass::Other,
        ),
        r(
            "small-delete",
            "seed 004: delete files",
            "files/s",
            RowClass::Other,
        ),
    ]
}

const DD_BLOCKS: [(&str, usize); 6] = [
    ("dd-100B", 100),
    ("dd-1KiB", 1024),
    ("dd-10KiB", 10 * 1024),
    ("dd-100KiB", 100 * 1024),
    ("dd-1MiB", MIB),
    ("dd-100MiB", 100 * MIB),
];

const FIO_JOBS: usize = 4;
const FIO_MIB_PER_JOB: usize = 64;
const SMALL_FILES: usize = 1000;

// ---------------------------------------------------------------------------------------------
// Workloads (blocking; run on the calling thread).

/// dd-style: `bs`-sized writes into one new file until `budget` has passed or `cap` bytes are
/// written, then fsync (like `conv=fsync`, so the raw filesystem is not measured at page-cache
/// speed). Returns MB/s over the whole time including the fsync.
fn dd(dir: &Path, bs: usize, budget: Duration, cap: usize) -> f64 {
    let path = dir.join("dd.bin");
    let buf = gk_testenv::test_data(bs as u64, bs);
    let mut f = File::create(&path).expect("dd file");
    let t = Instant::now();
    let mut written = 0usize;
    loop {
        f.write_all(&buf).expect("dd write");
        written += bs;
        if written + bs > cap || t.elapsed() >= budget {
            break;
        }
    }
    f.sync_all().expect("dd fsync");
    drop(f);
    let secs = t.elapsed().as_secs_f64();
    std::fs::remove_file(&path).expect("dd cleanup");
    written as f64 / secs / 1e6
}

/// Seed 001: 100 files of 1 MiB written one after the other, each fsynced and closed.
/// Returns files per second.
fn files_1m(dir: &Path) -> f64 {
    let sub = dir.join("seed001");
    std::fs::create_dir_all(&sub).expect("seed001 dir");
    let buf = gk_testenv::test_data(1, MIB);
    let t = Instant::now();
    for i in 0..100 {
        let mut f = File::create(sub.join(format!("f{i}"))).expect("create");
        f.write_all(&buf).expect("write");
        f.sync_all().expect("fsync");
    }
    let secs = t.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&sub).expect("seed001 cleanup");
    100.0 / secs
}

/// Seed 000, IOR-style with fio: FIO_JOBS processes each write their own file with 1 MiB
/// transfers (fsync at the end), then read them back. Returns (write, read) MB/s aggregate.
fn fio(dir: &Path) -> (f64, f64) {
    let sub = dir.join("ior");
    std::fs::create_dir_all(&sub).expect("ior dir");
    let run = |rw: &str| -> f64 {
        let out = Command::new("fio")
            .args([
                "--name=ior",
                &format!("--directory={}", sub.display()),
                &format!("--rw={rw}"),
                "--bs=1M",
                &format!("--size={FIO_MIB_PER_JOB}M"),
                &format!("--numjobs={FIO_JOBS}"),
                "--ioengine=psync",
                "--fallocate=none",
                "--end_fsync=1",
                // Drop the files' cached pages before reading, so reads reach the filesystem.
                "--invalidate=1",
                "--group_reporting",
                "--output-format=json",
            ])
            .output()
            .expect("fio runs (tests/env/install-tools.sh installs it)");
        assert!(
            out.status.success(),
            "fio {rw} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("fio json");
        let dir = if rw == "write" { "write" } else { "read" };
        let bw = v["jobs"][0][dir]["bw_bytes"]
            .as_f64()
            .expect("fio bw_bytes");
        assert!(bw > 0.0, "fio {rw} reported no bandwidth");
        bw / 1e6
    };
    let w = run("write");
    let r = run("read");
    std::fs::remove_dir_all(&sub).expect("ior cleanup");
    (w, r)
}

/// Seed 004, bonnie-style: create SMALL_FILES files of 4 KiB in one directory, stat them
/// all, delete them all. Returns files per second for each phase.
fn small_files(dir: &Path) -> (f64, f64, f64) {
    let sub = dir.join("small");
    std::fs::create_dir_all(&sub).expect("small dir");
    let buf = gk_testenv::test_data(4, 4096);
    let names: Vec<PathBuf> = (0..SMALL_FILES)
        .map(|i| sub.join(format!("s{i:05}")))
        .collect();
    let t = Instant::now();
    for n in &names {
        File::create(n)
            .and_then(|mut f| f.write_all(&buf))
            .expect("small create");
    }
    let create = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        let m = std::fs::metadata(n).expect("small stat");
        assert_eq!(m.len(), 4096);
    }
    let stat = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        std::fs::remove_file(n).expect("small delete");
    }
    let delete = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_dir(&sub).expect("small cleanup");
    (create, stat, delete)
}

// ---------------------------------------------------------------------------------------------
// Setup helpers.

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Gives the blocks of deleted files back to the loop files' backing store, so a run needs
/// only as much host space as its largest workload.
fn trim(net: &GlusterNet, raw: &Path) {
    for dir in net
        .nodes()
        .iter()
        .map(|n| n.brick_root())
        .chain([raw.to_path_buf()])
    {
        run("fstrim", &[dir.to_str().unwrap()]);
    }
}

/// The filesystem type under the loop files (`tmpfs` or a disk filesystem).
fn backing_fs() -> String {
    let out = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(std::env::temp_dir())
        .output()
        .expect("stat");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn bricks(net: &GlusterNet, name: &str) -> Vec<Brick> {
    net.nodes()
        .iter()
        .map(|n| Brick::new(&n.address, format!("{}/{name}", n.brick_root().display())).unwrap())
        .collect()
}

/// Waits until every node sees every other one connected and in the pool.
async fn wait_pool(net: &GlusterNet) {
    let deadline = Instant::now() + Duration::from_secs(120);
    for i in 0..net.nodes().len() {
        loop {
            let ok = matches!(net.gluster(i).peer_status().await, Ok(p)
                if p.len() == net.nodes().len() - 1
                    && p.iter().all(|p| p.connected && p.state == "Peer in Cluster"));
            if ok {
                break;
            }
            assert!(Instant::now() < deadline, "pool did not form");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn detach_all(net: &GlusterNet) {
    for n in &net.nodes()[1..] {
        net.gluster(0)
            .peer_detach(&n.address)
            .await
            .expect("detach");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..net.nodes().len() {
        while !net.gluster(i).peer_status().await.unwrap().is_empty() {
            assert!(Instant::now() < deadline, "peers did not leave");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

async fn wait_bricks_online(net: &GlusterNet, volume: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(st) = net.gluster(0).volume_status(volume).await {
            if !st.bricks.is_empty() && st.bricks.iter().all(|b| b.online) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{volume}: bricks not online");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_healed(net: &GlusterNet, volume: &str, limit: Duration) -> Option<Duration> {
    let t = Instant::now();
    loop {
        if let Ok(h) = net.gluster(0).heal_info_summary(volume).await {
            if !h.is_empty() && h.iter().all(|b| b.connected && b.pending == Some(0)) {
                return Some(t.elapsed());
            }
        }
        if t.elapsed() > limit {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// (b): the seeds' route, `gluster volume create` and `start`, no options.
async fn create_by_hand(net: &GlusterNet, kind: Kind, name: &str) -> Duration {
    let t = Instant::now();
    let g = net.gluster(0);
    g.volume_create(name, kind.layout(), &bricks(net, name), false)
        .await
        .expect("gluster volume create");
    g.volume_start(name).await.expect("gluster volume start");
    wait_bricks_online(net, name).await;
    t.elapsed()
}

/// (c): through the brick agent with the options the operator applies for the default
/// profile, as the GlusterVolume controller does (create and start, then set the profile).
async fn create_by_agent(
    net: &GlusterNet,
    agents: &AgentSet,
    kind: Kind,
    name: &str,
) -> (Duration, BTreeMap<String, String>) {
    let options =
        gk_operator::plan::options(TuningProfile::default(), kind.layout(), &BTreeMap::new());
    let (ty, replica, data, redundancy) = match kind.layout() {
        VolumeLayout::Replicate { replica } => (AgentType::Replicate, replica, 0, 0),
        VolumeLayout::Arbiter => (AgentType::Arbiter, 0, 0, 0),
        VolumeLayout::Disperse { data, redundancy } => (AgentType::Disperse, 0, data, redundancy),
        VolumeLayout::Distribute => unreachable!(),
    };
    let t = Instant::now();
    let mut agent = agents.client(0).await.expect("agent client");
    agent
        .volume_create(VolumeCreateRequest {
            spec: Some(VolumeSpec {
                name: name.into(),
                r#type: ty as i32,
                replica,
                disperse_data: data,
                disperse_redundancy: redundancy,
                bricks: bricks(net, name).iter().map(|b| b.to_string()).collect(),
                ..Default::default()
            }),
            start: true,
        })
        .await
        .expect("agent VolumeCreate");
    let set = agent
        .volume_set(VolumeSetRequest {
            name: name.into(),
            options: options.clone().into_iter().collect(),
        })
        .await
        .expect("agent VolumeSet")
        .into_inner();
    assert!(
        set.rejected.is_empty(),
        "{name}: profile options refused: {:?}",
        set.rejected
    );
    wait_bricks_online(net, name).await;
    (t.elapsed(), options)
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

// ---------------------------------------------------------------------------------------------
// Failover.

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

async fn failover(
    net: &GlusterNet,
    targets: &[Target],
    event: &str,
    reps: usize,
) -> Vec<(String, Vec<Value>)> {
    let victim = &net.nodes()[2];
    let gl: Vec<&Target> = targets
        .iter()
        .filter(|t| matches!(t.case, "b" | "c"))
        .collect();
    let mut out: Vec<(String, Vec<Value>)> = gl.iter().map(|t| (t.key.clone(), vec![])).collect();
    for rep in 0..reps {
        let writers: Vec<Writer> = gl.iter().map(|t| Writer::start(&t.key, &t.dir)).collect();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // The victim: node 3's brick of every volume, or node 3 as a whole.
        let mut pids = Vec::new();
        if event == "brick-kill" {
            for t in &gl {
                let v = t.volume.as_deref().unwrap();
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
        for (w, (_, samples)) in writers.iter().zip(out.iter_mut()) {
            let (errors, gap) = w.errors_and_gap(t0);
            println!(
                "failover {event} rep {rep} {}: longest gap between writes {gap:.2} s, {errors} failed",
                w.key
            );
            samples.push(json!({"longest_gap_s": gap, "failed_ops": errors}));
        }
        for w in writers {
            w.finish();
        }
        // Restore and heal before the next event.
        if event == "brick-kill" {
            for t in &gl {
                let v = t.volume.as_deref().unwrap();
                net.gluster(0)
                    .volume_start_force(v)
                    .await
                    .expect("start force");
            }
        } else {
            run("ip", &["-n", victim.netns(), "link", "set", "eth0", "up"]);
        }
        for t in &gl {
            let v = t.volume.as_deref().unwrap();
            wait_bricks_online(net, v).await;
            let _ = net.gluster(0).heal_start(v).await;
            let healed = wait_healed(net, v, Duration::from_secs(240)).await;
            assert!(healed.is_some(), "{v} did not heal after {event}");
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Output.

struct Results {
    /// row id -> target key -> samples
    samples: BTreeMap<&'static str, BTreeMap<String, Vec<f64>>>,
}

impl Results {
    fn push(&mut self, row: &'static str, key: &str, v: f64) {
        self.samples
            .entry(row)
            .or_default()
            .entry(key.to_string())
            .or_default()
            .push(v);
    }

    fn med(&self, row: &str, key: &str) -> Option<f64> {
        self.samples
            .get(row)
            .and_then(|m| m.get(key))
            .map(|v| median(v))
    }

    /// (max - min) / median of a row's samples on one target, as a percentage.
    fn spread(&self, row: &str, key: &str) -> Option<f64> {
        let v = self.samples.get(row)?.get(key)?;
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        Some((hi - lo) / median(v) * 100.0)
    }
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The verdict on one (c) figure against the targets.
fn verdict(row: &Row, kind: Kind, a: f64, b: f64, c: f64) -> String {
    let vs_b = c / b;
    let mut missed = Vec::new();
    let need_b = if row.class == RowClass::SmallWrite {
        1.5
    } else {
        1.0
    };
    if vs_b < need_b {
        missed.push(format!("≥ {need_b:.1}× (b)"));
    }
    if row.class == RowClass::LargeSequential {
        let ceiling = a / kind.write_factor();
        if c < 0.8 * ceiling {
            missed.push(format!(
                "≥ 80 % of (a)/{} = {}",
                kind.write_factor(),
                fmt(0.8 * ceiling)
            ));
        }
    }
    if missed.is_empty() {
        "met".into()
    } else {
        format!("**missed** {}", missed.join(", "))
    }
}

fn table(res: &Results, rows: &[Row], kinds: &[Kind], case: &str) -> String {
    let mut s = String::new();
    s.push_str(&format!(
        "| workload | type | unit | (a) raw | (b) by hand | ({case}) ours | ({case}) ÷ (b) | ({case}) ÷ (a) | (b) ÷ (a) | spread (b) / ({case}) | target |\n"
    ));
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in rows {
        for &k in kinds {
            let bk = format!("b-{}", k.short());
            let ck = format!("{case}-{}", k.short());
            let (Some(a), Some(b), Some(c)) = (
                res.med(row.id, "raw"),
                res.med(row.id, &bk),
                res.med(row.id, &ck),
            ) else {
                continue;
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {:.2} | {:.3} | {:.3} | {:.0} % / {:.0} % | {} |\n",
                row.label,
                k.name(),
                row.unit,
                fmt(a),
                fmt(b),
                fmt(c),
                c / b,
                c / a,
                b / a,
                res.spread(row.id, &bk).unwrap_or(0.0),
                res.spread(row.id, &ck).unwrap_or(0.0),
                verdict(row, k, a, b, c),
            ));
        }
    }
    s
}

fn plot(path: &Path, res: &Results, rows: &[Row]) {
    use plotters::prelude::*;
    let bars: Vec<(String, [Option<f64>; 3])> = rows
        .iter()
        .map(|r| {
            let ratio = |k: Kind| {
                Some(
                    res.med(r.id, &format!("c-{}", k.short()))?
                        / res.med(r.id, &format!("b-{}", k.short()))?,
                )
            };
            (
                r.id.to_string(),
                [
                    ratio(Kind::Replicate3),
                    ratio(Kind::Arbiter),
                    ratio(Kind::Disperse),
                ],
            )
        })
        .collect();
    let ymax = bars
        .iter()
        .flat_map(|(_, v)| v.iter().flatten())
        .cloned()
        .fold(1.6f64, f64::max)
        * 1.1;
    let n = bars.len();
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    root.fill(&WHITE).unwrap();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "glusterkube (c) ÷ hand-made gluster volume (b), median; higher is better",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(110)
        .y_label_area_size(50)
        .build_cartesian_2d(0f64..n as f64, 0f64..ymax)
        .unwrap();
    chart
        .configure_mesh()
        .disable_x_mesh()
        // Key points every half unit; the name goes under the middle of each group.
        .x_labels(2 * n + 2)
        .x_label_formatter(&|x| {
            if (x.fract() - 0.5).abs() > 0.1 {
                return String::new();
            }
            bars.get(x.floor() as usize)
                .map(|b| b.0.clone())
                .unwrap_or_default()
        })
        .x_label_style(
            ("sans-serif", 12)
                .into_font()
                .transform(FontTransform::Rotate90),
        )
        .y_desc("ratio to (b)")
        .draw()
        .unwrap();
    let colors = [BLUE, RED, GREEN];
    for (j, k) in Kind::ALL.iter().enumerate() {
        let color = colors[j];
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, (_, v))| {
                let y = v[j]?;
                let x0 = i as f64 + 0.1 + j as f64 * 0.27;
                Some(Rectangle::new([(x0, 0.0), (x0 + 0.25, y)], color.filled()))
            }))
            .unwrap()
            .label(k.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], color.filled()));
    }
    for (level, label) in [(1.0, "1.0× (b)"), (1.5, "1.5× (b): writes ≤ 10 KiB")] {
        chart
            .draw_series(LineSeries::new(
                [(0.0, level), (n as f64, level)],
                BLACK.stroke_width(1),
            ))
            .unwrap()
            .label(label)
            .legend(|(x, y)| PathElement::new([(x, y), (x + 10, y)], BLACK));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .unwrap();
    root.present().unwrap();
}

// ---------------------------------------------------------------------------------------------

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<f64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let reps = args.first().map(|v| *v as usize).unwrap_or(3);
    let budget = Duration::from_secs_f64(args.get(1).copied().unwrap_or(3.0));
    let failover_reps = args.get(2).map(|v| *v as usize).unwrap_or(2);
    let out_dir = std::env::var_os("GK_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| gk_testenv::repo_root().join("docs/benchmarks"));
    if std::env::args().nth(1).as_deref() == Some("replot") {
        replot(&out_dir);
        return;
    }
    let started = Instant::now();

    let net = GlusterNet::start(3).expect("glusterd nodes");
    let agents = AgentSet::start(&net).await.expect("agents");

    // Pool formation: by hand (CLI probes from node 1) and through the agents, alternating.
    let mut pool_b = Vec::new();
    let mut pool_c = Vec::new();
    // ABBA order, so a trend in the machine's load does not favour either side.
    let order = [false, true, true, false];
    for (i, by_agent) in order.into_iter().enumerate() {
        let t = Instant::now();
        if by_agent {
            let mut a = agents.client(0).await.unwrap();
            for n in &net.nodes()[1..] {
                a.peer_probe(PeerRequest {
                    host: n.address.clone(),
                    force: false,
                })
                .await
                .expect("agent PeerProbe");
            }
        } else {
            for n in &net.nodes()[1..] {
                net.gluster(0).peer_probe(&n.address).await.expect("probe");
            }
        }
        wait_pool(&net).await;
        let d = t.elapsed().as_secs_f64();
        if by_agent {
            pool_c.push(d);
        } else {
            pool_b.push(d);
        }
        println!("pool formed in {d:.2} s (through the agent: {by_agent})");
        if i + 1 < order.len() {
            detach_all(&net).await;
        }
    }

    // (a): a loop-backed XFS like the bricks.
    let raw_dir = net.scratch_dir("raw").unwrap();
    let img = net.scratch_dir("raw-img").unwrap().join("raw.xfs");
    let img_s = img.to_str().unwrap();
    run("truncate", &["-s", "2G", img_s]);
    run("mkfs.xfs", &["-q", "-f", "-i", "size=512", img_s]);
    run("mount", &["-o", "loop", img_s, raw_dir.to_str().unwrap()]);

    let mut targets = vec![Target {
        key: "raw".into(),
        case: "a",
        kind: None,
        volume: None,
        dir: raw_dir,
    }];
    let mut create_b: BTreeMap<Kind, f64> = BTreeMap::new();
    let mut create_c: BTreeMap<Kind, f64> = BTreeMap::new();
    let mut profile = BTreeMap::new();
    let servers: Vec<String> = net.nodes().iter().map(|n| n.address.clone()).collect();
    let logs = net.scratch_dir("client-logs").unwrap();
    let mounter = net.client_mounter();
    for (i, kind) in Kind::ALL.into_iter().enumerate() {
        let mut cases = vec!["b", "c"];
        if i % 2 == 1 {
            cases.reverse();
        }
        if kind == Kind::Replicate3 {
            cases.push("cw");
        }
        for case in cases {
            let key = format!("{case}-{}", kind.short());
            let volume = format!("bench-{key}");
            let secs = if case == "b" {
                create_by_hand(&net, kind, &volume).await
            } else {
                let (d, o) = create_by_agent(&net, &agents, kind, &volume).await;
                profile = o;
                d
            }
            .as_secs_f64();
            match case {
                "b" => create_b.insert(kind, secs),
                "c" => create_c.insert(kind, secs),
                _ => None,
            };
            println!("{volume} ready in {secs:.2} s");
            let dir = net.scratch_dir(&format!("mnt-{key}")).unwrap();
            let (source, flags) = match case {
                // The seeds: `mount -t glusterfs server1:/vol /mnt`.
                "b" => (servers[..1].to_vec(), vec![]),
                // The CSI node plugin: every server, no flags.
                "c" => (servers.clone(), vec![]),
                _ => (
                    servers.clone(),
                    vec!["kernel-writeback-cache=yes".to_string()],
                ),
            };
            mounter
                .mount(
                    &MountSource {
                        servers: source,
                        volume: volume.clone(),
                        subdir: None,
                    },
                    &dir,
                    &logs.join(format!("{key}.log")),
                    &flags,
                )
                .await
                .expect("FUSE mount");
            targets.push(Target {
                key,
                case: match case {
                    "b" => "b",
                    "c" => "c",
                    _ => "cw",
                },
                kind: Some(kind),
                volume: Some(volume),
                dir,
            });
        }
    }

    // Data path: every repetition runs each workload on every target back to back, starting
    // from a different target each time.
    let rows = rows();
    let mut res = Results {
        samples: BTreeMap::new(),
    };
    let n = targets.len();
    for rep in 0..reps {
        let order: Vec<&Target> = (0..n).map(|j| &targets[(j + rep * 3) % n]).collect();
        tokio::task::block_in_place(|| {
            for (id, bs) in DD_BLOCKS {
                for t in &order {
                    let v = dd(&t.dir, bs, budget, 512 * MIB);
                    println!("rep {rep} {id} {}: {v:.2} MB/s", t.key);
                    res.push(id, &t.key, v);
                }
                trim(&net, &targets[0].dir);
            }
            for t in &order {
                let v = files_1m(&t.dir);
                println!("rep {rep} files-100x1MiB {}: {v:.1} files/s", t.key);
                res.push("files-100x1MiB", &t.key, v);
            }
            trim(&net, &targets[0].dir);
            for t in &order {
                let (w, r) = fio(&t.dir);
                println!(
                    "rep {rep} fio {}: write {w:.1} MB/s, read {r:.1} MB/s",
                    t.key
                );
                res.push("fio-write", &t.key, w);
                res.push("fio-read", &t.key, r);
                trim(&net, &targets[0].dir);
            }
            for t in &order {
                let (c, s, d) = small_files(&t.dir);
                println!(
                    "rep {rep} small {}: create {c:.0}/s, stat {s:.0}/s, delete {d:.0}/s",
                    t.key
                );
                res.push("small-create", &t.key, c);
                res.push("small-stat", &t.key, s);
                res.push("small-delete", &t.key, d);
            }
            trim(&net, &targets[0].dir);
        });
    }
    let datapath_secs = started.elapsed().as_secs_f64();

    // Failover, with gluster's default ping-timeout on (b) and ours on (c), side by side: the
    // same event hits every volume at the same moment.
    let mut failovers = BTreeMap::new();
    for event in ["brick-kill", "node-cut"] {
        failovers.insert(event, failover(&net, &targets, event, failover_reps).await);
    }

    // ------------------------------------------------------------------ output
    let kinds = Kind::ALL;
    let mut md = String::new();
    md.push_str(&format!(
        "Run of {} with {reps} repetitions, {:.1} s per dd row, {failover_reps} failover repetitions; \
         glusterfs {}; loop files (bricks and (a)) on {}; {:.0} s in all. Medians; \"spread\" is (max − min) ÷ median over the repetitions.\n\n",
        chrono_like_now(),
        budget.as_secs_f64(),
        gluster_version(),
        backing_fs(),
        started.elapsed().as_secs_f64()
    ));
    md.push_str("### Data path: (c) our default profile\n\n");
    md.push_str(&table(&res, &rows, &kinds, "c"));
    md.push_str(
        "\n### Data path: (c+wbc) our profile with the `kernel-writeback-cache=yes` mount option, replicate 3\n\n",
    );
    md.push_str(&table(&res, &rows, &[Kind::Replicate3], "cw"));

    md.push_str(
        "\n### Failover: stall of a durable writer (4 KiB pwrite + fdatasync every 20 ms), the \
         longest gap between two completed writes after the event; median\n\n",
    );
    md.push_str("| event | type | (b) stall, ping-timeout 42 s (gluster's default) | (c) stall, our profile | (b) ÷ (c), higher is better | failed writes (b) / (c) |\n|---|---|---|---|---|---|\n");
    let mut fo_json = serde_json::Map::new();
    for (event, per) in &failovers {
        let get = |key: &str, field: &str| -> Vec<f64> {
            per.iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.iter().filter_map(|s| s[field].as_f64()).collect())
                .unwrap_or_default()
        };
        for k in kinds {
            let (bk, ck) = (format!("b-{}", k.short()), format!("c-{}", k.short()));
            let (gb, gc) = (get(&bk, "longest_gap_s"), get(&ck, "longest_gap_s"));
            let (eb, ec) = (get(&bk, "failed_ops"), get(&ck, "failed_ops"));
            md.push_str(&format!(
                "| {event} | {} | {:.2} s | {:.2} s | {:.2} | {} / {} |\n",
                k.name(),
                median(&gb),
                median(&gc),
                median(&gb) / median(&gc),
                eb.iter().sum::<f64>(),
                ec.iter().sum::<f64>(),
            ));
        }
        fo_json.insert(
            event.to_string(),
            Value::Object(
                per.iter()
                    .map(|(k, v)| (k.clone(), Value::Array(v.clone())))
                    .collect(),
            ),
        );
    }

    // Every ping-timer expiry the clients logged over the whole run: the node cuts account
    // for one per client per cut; any more would be spurious disconnects under load.
    let mut expiries = BTreeMap::new();
    for t in targets.iter().filter(|t| t.case != "a") {
        let log = std::fs::read_to_string(logs.join(format!("{}.log", t.key))).unwrap_or_default();
        let n = log
            .lines()
            .filter(|l| l.contains("has not responded in the last"))
            .count();
        expiries.insert(t.key.clone(), n);
    }
    md.push_str(&format!(
        "\nPing-timer expiries logged by each client over the whole run ({} node cuts; one brick \
         per client was on the cut node): {}.\n",
        failover_reps,
        expiries
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));

    md.push_str("\n### Control plane (times; ratio is (b) ÷ (c), higher is better)\n\n");
    md.push_str(
        "| measure | (b) by hand | (c) through the agents | (b) ÷ (c) |\n|---|---|---|---|\n",
    );
    md.push_str(&format!(
        "| 3-node pool: probes until every node sees every peer connected (median of {}) | {:.2} s | {:.2} s | {:.2} |\n",
        pool_b.len(),
        median(&pool_b),
        median(&pool_c),
        median(&pool_b) / median(&pool_c)
    ));
    for k in kinds {
        md.push_str(&format!(
            "| {} volume: create, start{}, every brick online | {:.2} s | {:.2} s | {:.2} |\n",
            k.name(),
            ", profile set (c)",
            create_b[&k],
            create_c[&k],
            create_b[&k] / create_c[&k]
        ));
    }

    let raw = json!({
        "date": chrono_like_now(),
        "glusterfs": gluster_version(),
        "loop_files_on": backing_fs(),
        "reps": reps,
        "dd_row_seconds": budget.as_secs_f64(),
        "fio": {"jobs": FIO_JOBS, "mib_per_job": FIO_MIB_PER_JOB, "bs": "1M"},
        "small_files": SMALL_FILES,
        "profile_c": profile,
        "targets": targets.iter().map(|t| json!({
            "key": t.key, "case": t.case, "type": t.kind.map(|k| k.name()), "volume": t.volume,
        })).collect::<Vec<_>>(),
        "datapath": res.samples.iter().map(|(row, m)| (row.to_string(), json!(m))).collect::<serde_json::Map<_, _>>(),
        "datapath_seconds": datapath_secs,
        "failover": fo_json,
        "ping_timer_expiries": expiries,
        "pool_formation_s": {"b": pool_b, "c": pool_c},
        "volume_ready_s": {
            "b": create_b.iter().map(|(k, v)| (k.name().to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "c": create_c.iter().map(|(k, v)| (k.name().to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        },
        "total_seconds": started.elapsed().as_secs_f64(),
    });
    std::fs::create_dir_all(&out_dir).unwrap();
    std::fs::write(
        out_dir.join("datapath.json"),
        serde_json::to_string_pretty(&raw).unwrap() + "\n",
    )
    .unwrap();
    plot(&out_dir.join("datapath.svg"), &res, &rows);
    let doc = out_dir.join("datapath.md");
    let (begin, end) = ("<!-- BEGIN GENERATED -->", "<!-- END GENERATED -->");
    let text = std::fs::read_to_string(&doc).unwrap_or_default();
    let updated = match (text.find(begin), text.find(end)) {
        (Some(b), Some(e)) if b < e => {
            format!("{}{begin}\n{md}{}", &text[..b], &text[e..])
        }
        _ => format!("{text}\n{begin}\n{md}{end}\n"),
    };
    std::fs::write(&doc, updated).unwrap();
    println!("{md}");
    println!("wrote {}, datapath.json and datapath.svg", doc.display());
    // Mounts, namespaces, loop devices and processes go with `net`.
    drop(agents);
    drop(net);
}

/// Redraws datapath.svg from the samples in datapath.json (`-- replot`).
fn replot(out_dir: &Path) {
    let raw: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("datapath.json")).unwrap())
            .unwrap();
    let rows = rows();
    let mut res = Results {
        samples: BTreeMap::new(),
    };
    for row in &rows {
        for (key, v) in raw["datapath"][row.id].as_object().into_iter().flatten() {
            for x in v.as_array().unwrap() {
                res.push(row.id, key, x.as_f64().unwrap());
            }
        }
    }
    plot(&out_dir.join("datapath.svg"), &res, &rows);
}

fn gluster_version() -> String {
    Command::new("gluster")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim_start_matches("glusterfs ").to_string())
        })
        .unwrap_or_default()
}

fn chrono_like_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}
