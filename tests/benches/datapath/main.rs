//! Data-path and failover benchmark: the product as it ships against volumes made by hand,
//! side by side in one run.
//!
//!   cargo bench -p gk-testenv --bench datapath -- [REPS] [ROW_SECONDS] [FAILOVER_REPS]
//!       [--types r3,arb,ec] [--cases raw,b,bt,pv,dv] [--rows ROW,ROW] [--variant SPEC]...
//!       [--cpu-profile] [--fop-profile] [--fuse-calls] [--events brick-kill,node-cut]
//!
//! Three real glusterd nodes in network namespaces (`GlusterNet`) with XFS bricks on loop
//! files, management TLS on as the operator sets it up (a certificate per node, a
//! `secure-access` file); the FUSE clients run in a client namespace holding the CSI node
//! plugins' certificate. Cases (see `cases.rs`):
//! - `raw` (a): a loop-backed XFS filesystem made like the bricks;
//! - `b`: `gluster volume create` + `start`, nothing else, mounted `mount -t glusterfs
//!   node1:/vol` as the seeds do;
//! - `bt` (b-tls): the same with gluster's I/O TLS switched on the documented way
//!   (`client.ssl on`, `server.ssl on`);
//! - `pv`: a subdirectory PV of a pool volume, all as shipped: the volume made through the
//!   agent with the operator's access and profile options, the PV's directory and quota made
//!   by the CSI controller's CreateVolume, staged and published by the CSI node plugin;
//! - `dv`: a dedicated PV (a volume of its own, its data in the quota'd directory the CSI
//!   controller makes), staged and published the same way;
//! - `--variant KEY=BASE:opt=val,...[:mountflag,...]`: BASE (`pv`, `dv` or `bt`) with more
//!   options, to try a lever side by side; shown in tables of their own.
//!
//! Every repetition runs each workload on every case back to back, the order rotating, and
//! records the 1-minute load average before each sample. With `--cpu-profile`, every dd and
//! fio sample runs under `perf record` and the document gets a table of where the CPU went
//! (`gk_testenv::bench::cpu`); perf takes CPU of its own, so such a run's figures are not
//! the ones to compare with a plain run's. With `--fop-profile`, gluster's `volume profile`
//! counts each brick's calls during every small-file and 1 MiB-file sample
//! (`gk_testenv::bench::fops`);
//! counting costs the bricks a little too. With `--fuse-calls`, perf counts the requests the
//! kernel sends each gluster case's FUSE client during every dd sample
//! (`gk_testenv::bench::fuse_calls`); tracing slows each request, so read the counts, not
//! the rates. Refuses to start above load 1.0
//! (`GK_BENCH_ANY_LOAD=1` overrides; the document says so). Writes datapath.json, .svg and
//! the generated block of datapath.md in docs/benchmarks (`GK_BENCH_OUT` elsewhere).

mod cases;
mod failover;
mod workloads;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use csi_proto::v1 as csi;
use gk_api::crd::TuningProfile;
use gk_operator::pki::{Ca, Usage};
use gk_operator::tls::access::CSI_CLIENT_IDENTITY;
use gk_testenv::agents::AgentSet;
use gk_testenv::bench::datapath::{self as dp, Case, Results, Sample, Target as Goal};
use gk_testenv::bench::{self, RunInfo};
use gk_testenv::bench::{cpu, fops, fuse_calls};
use gk_testenv::gluster_net::{GlusterNet, TlsFiles};

use cases::{Kind, Maker, Target, Variant};
use workloads::{DD_BLOCKS, FIO_MB, MIB};

pub fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().expect(cmd);
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub async fn wait_bricks_online(net: &GlusterNet, volume: &str) {
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

pub async fn wait_healed(net: &GlusterNet, volume: &str, limit: Duration) -> Option<Duration> {
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

/// Gives the blocks of deleted files back to the loop files' backing store.
fn trim(net: &GlusterNet, raw: Option<&Path>) {
    for dir in net
        .nodes()
        .iter()
        .map(|n| n.brick_root())
        .chain(raw.map(Path::to_path_buf))
    {
        run("fstrim", &[dir.to_str().unwrap()]);
    }
}

struct Args {
    reps: usize,
    row_seconds: f64,
    failover_reps: usize,
    types: Vec<Kind>,
    cases: Vec<String>,
    rows: Option<Vec<String>>,
    variants: Vec<Variant>,
    cpu_profile: bool,
    /// Count each brick's calls during the small-file and 1 MiB-file samples (gluster's
    /// `volume profile`).
    fop_profile: bool,
    fuse_calls: bool,
    /// Which failover events to run (`brick-kill` and `node-cut` unless `--events` says
    /// otherwise; `restart-cut` only when asked for).
    events: Vec<String>,
    command: String,
}

fn args() -> Args {
    let all: Vec<String> = std::env::args().skip(1).collect();
    let mut a = Args {
        reps: 5,
        row_seconds: 2.0,
        failover_reps: 2,
        types: vec![Kind::Replicate3],
        cases: ["raw", "b", "bt", "pv", "dv"].map(String::from).to_vec(),
        rows: None,
        variants: vec![],
        cpu_profile: false,
        fop_profile: false,
        fuse_calls: false,
        events: ["brick-kill", "node-cut"].map(String::from).to_vec(),
        command: format!(
            "cargo bench -p gk-testenv --bench datapath -- {}",
            all.join(" ")
        ),
    };
    let mut numbers = Vec::new();
    let mut it = all.into_iter().filter(|a| a != "--bench");
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--types" => {
                a.types = value()
                    .split(',')
                    .map(|t| {
                        Kind::parse(t)
                            .unwrap_or_else(|| panic!("--types: {t:?} is not r3, arb or ec"))
                    })
                    .collect()
            }
            "--cases" => a.cases = value().split(',').map(String::from).collect(),
            "--rows" => a.rows = Some(value().split(',').map(String::from).collect()),
            "--cpu-profile" => a.cpu_profile = true,
            "--fop-profile" => a.fop_profile = true,
            "--fuse-calls" => a.fuse_calls = true,
            "--events" => a.events = value().split(',').map(String::from).collect(),
            "--variant" => a
                .variants
                .push(Variant::parse(&value()).unwrap_or_else(|e| panic!("--variant: {e}"))),
            n => numbers.push(
                n.parse::<f64>()
                    .unwrap_or_else(|_| panic!("unknown argument {n:?}")),
            ),
        }
    }
    if let Some(v) = numbers.first() {
        a.reps = *v as usize;
    }
    if let Some(v) = numbers.get(1) {
        a.row_seconds = *v;
    }
    if let Some(v) = numbers.get(2) {
        a.failover_reps = *v as usize;
    }
    for e in &a.events {
        assert!(
            ["brick-kill", "node-cut", "restart-cut"].contains(&e.as_str()),
            "--events: {e:?} is not brick-kill, node-cut or restart-cut"
        );
    }
    for r in a.rows.iter().flatten() {
        assert!(dp::row_by_id(r).is_some(), "--rows: unknown row {r:?}");
    }
    a
}

/// The targets the shipped cases must reach (the performance issue's).
fn product_goals() -> Vec<Goal> {
    let all: Vec<String> = dp::ROWS.iter().map(|r| r.id.to_string()).collect();
    vec![
        Goal {
            rows: ["dd-1MiB", "dd-100MiB", "fio-write", "fio-read"]
                .map(String::from)
                .to_vec(),
            against: "b".into(),
            at_least: 0.9,
        },
        Goal {
            rows: all,
            against: "bt".into(),
            at_least: 1.0,
        },
    ]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let args = args();
    let waited = bench::require_quiet(Duration::from_secs(1800));
    // What was built and is measured, read before the run so later edits do not show.
    let run_info = RunInfo::now(&args.command);
    let started = Instant::now();

    // Management TLS as the operator sets it up: a certificate per node from one CA.
    let now = std::time::SystemTime::now();
    let ca = Ca::generate("gk-bench-ca", now).unwrap();
    let files = |leaf: gk_operator::pki::CertKey| TlsFiles {
        cert_pem: leaf.cert_pem,
        key_pem: leaf.key_pem,
        ca_pem: ca.pem().cert_pem.clone(),
    };
    let node_names: Vec<String> = (1..=3).map(|i| format!("gk-node-{i}")).collect();
    let node_files = node_names
        .iter()
        .enumerate()
        .map(|(i, cn)| {
            let address = format!("10.213.0.{}", i + 1);
            files(ca.issue(cn, &[address], Usage::Peer, now).unwrap())
        })
        .collect();
    let net = GlusterNet::start_tls(node_files).expect("glusterd nodes");
    let agents = AgentSet::start_as_pods(&net).await.expect("agents");
    net.form_pool().await.expect("pool");
    let client = net
        .add_client(
            101,
            Some(&files(
                ca.issue(CSI_CLIENT_IDENTITY, &[], Usage::Client, now)
                    .unwrap(),
            )),
            true,
        )
        .expect("the CSI node plugins' client");
    let node_dir = net.scratch_dir("csi-node").unwrap();
    let mut node =
        gk_csi::node::NodeService::new("bench-node".into(), client.mounter(), node_dir.clone());
    node.tls_dir = Some(client.ssl_dir());
    node.kubelet.root = client.mount_dir("kubelet").unwrap();
    let mut allowed = node_names.clone();
    allowed.push(CSI_CLIENT_IDENTITY.to_string());
    let maker = Maker {
        net: &net,
        agents: &agents,
        client: &client,
        node,
        allowed,
    };

    let mut targets: Vec<Target> = Vec::new();
    let raw = if args.cases.iter().any(|c| c == "raw") {
        let dir = net.scratch_dir("raw").unwrap();
        let img = net.scratch_dir("raw-img").unwrap().join("raw.xfs");
        let img_s = img.to_str().unwrap();
        run("truncate", &["-s", "2G", img_s]);
        run("mkfs.xfs", &["-q", "-f", "-i", "size=512", img_s]);
        run("mount", &["-o", "loop", img_s, dir.to_str().unwrap()]);
        targets.push(Target {
            key: "raw".into(),
            dir: dir.clone(),
            volume: String::new(),
            meta: Case {
                key: "raw".into(),
                case: "a".into(),
                label: "(a) raw: XFS on a loop file, made like the bricks".into(),
                volume_type: None,
                options: BTreeMap::new(),
                mount_flags: vec![],
                targets: vec![],
            },
        });
        Some(dir)
    } else {
        None
    };
    let none = BTreeMap::new();
    for kind in &args.types {
        let kind = *kind;
        for case in args.cases.iter().filter(|c| *c != "raw") {
            let key = dp::key(case, kind.short());
            let (dir, volume, options, label, goals) = match case.as_str() {
                "b" | "bt" => {
                    let (d, v, o) = maker.by_hand(kind, case, &none, &[]).await;
                    let label = if case == "b" {
                        "(b) by hand: `volume create` + `start`, gluster's defaults, no I/O TLS"
                    } else {
                        "(b-tls) by hand with gluster's I/O TLS: `client.ssl on`, `server.ssl on`"
                    };
                    (d, v, o, label.to_string(), vec![])
                }
                "pv" => {
                    let (d, v, o) = maker
                        .subdir_pv(kind, &key, TuningProfile::default(), &none, &[])
                        .await;
                    let label = "subdirectory PV of a pool volume, as shipped (default profile, TLS, quota, CSI mount)";
                    (d, v, o, label.to_string(), product_goals())
                }
                "dv" => {
                    let (d, v, o) = maker
                        .dedicated_pv(
                            kind,
                            &key,
                            TuningProfile::default(),
                            &none,
                            &[],
                            csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter,
                        )
                        .await;
                    let label = "dedicated PV, as shipped (default profile, TLS, quota, CSI mount)";
                    (d, v, o, label.to_string(), product_goals())
                }
                "db" => {
                    let (d, v, o) = maker
                        .dedicated_pv(
                            kind,
                            &key,
                            TuningProfile::Database,
                            &none,
                            &[],
                            csi::volume_capability::access_mode::Mode::SingleNodeWriter,
                        )
                        .await;
                    let label = "dedicated PV with the Database profile, ReadWriteOnce (the CSI \
                                 node plugin adds `kernel-writeback-cache=yes`)";
                    let goals = vec![Goal {
                        rows: ["dd-100B", "dd-1KiB", "dd-10KiB"]
                            .map(String::from)
                            .to_vec(),
                        against: "b".into(),
                        at_least: 1.5,
                    }];
                    (d, v, o, label.to_string(), goals)
                }
                other => panic!("--cases: unknown case {other:?}"),
            };
            println!("{key}: ready at {:.0} s", started.elapsed().as_secs_f64());
            targets.push(Target {
                key: key.clone(),
                dir,
                volume,
                meta: Case {
                    key,
                    case: case.clone(),
                    label,
                    volume_type: Some(kind.name().into()),
                    options,
                    mount_flags: vec![],
                    targets: goals,
                },
            });
        }
        for v in &args.variants {
            let key = dp::key(&v.key, kind.short());
            let (dir, volume, options) = match v.base.as_str() {
                "bt" => maker.by_hand(kind, &v.key, &v.options, &v.flags).await,
                "pv" => {
                    maker
                        .subdir_pv(kind, &key, TuningProfile::default(), &v.options, &v.flags)
                        .await
                }
                _ => {
                    maker
                        .dedicated_pv(
                            kind,
                            &key,
                            TuningProfile::default(),
                            &v.options,
                            &v.flags,
                            csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter,
                        )
                        .await
                }
            };
            // Set again once the PV exists: making it switches quota on, and the agent then
            // resets quota's timeouts, which a variant may be trying.
            for (k, val) in v.options.iter().filter(|(k, _)| *k != "quota") {
                net.gluster(0)
                    .volume_set(&volume, k, val)
                    .await
                    .unwrap_or_else(|e| panic!("{volume}: volume set {k} {val}: {e}"));
            }
            targets.push(Target {
                key: key.clone(),
                dir,
                volume,
                meta: Case {
                    key,
                    case: "x".into(),
                    label: format!("variant of `{}`", v.base),
                    volume_type: Some(kind.name().into()),
                    options,
                    mount_flags: v.flags.clone(),
                    targets: vec![],
                },
            });
        }
    }

    let wanted = |row: &str| {
        args.rows
            .as_ref()
            .is_none_or(|r| r.iter().any(|x| x == row))
    };
    let budget = Duration::from_secs_f64(args.row_seconds);
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<Sample>>> = BTreeMap::new();
    let mut push = |row: &str, key: &str, value: f64, load: f64| {
        samples
            .entry(row.to_string())
            .or_default()
            .entry(key.to_string())
            .or_default()
            .push(Sample { value, load });
    };
    let mut profiles: Vec<cpu::Profile> = Vec::new();
    let perf_dir = net.scratch_dir("perf").unwrap();
    // One sample of `row` on `case`: `work` returns (MB/s, MB moved); under perf when asked.
    let mut profiled = |row: &str, case: &str, rep: usize, work: &mut dyn FnMut() -> (f64, f64)| {
        if !args.cpu_profile {
            return work().0;
        }
        let rec = cpu::Recording::start(&perf_dir.join("perf.data")).expect("perf record");
        let (rate, mb) = work();
        let (cpu_s, wall_s) = rec.finish(std::process::id()).expect("perf");
        profiles.push(cpu::Profile {
            row: row.into(),
            case: case.into(),
            rep,
            wall_s,
            mb,
            cpu_s,
        });
        rate
    };
    let mut fop_samples: Vec<fops::Sample> = Vec::new();
    let mut fuse_samples: Vec<fuse_calls::Sample> = Vec::new();
    if args.fop_profile {
        for t in targets.iter().filter(|t| !t.volume.is_empty()) {
            net.gluster(0)
                .profile_start(&t.volume)
                .await
                .unwrap_or_else(|e| panic!("{}: profile start: {e}", t.volume));
        }
    }
    let rt = tokio::runtime::Handle::current();
    let n = targets.len();
    for rep in 0..args.reps {
        let order: Vec<&Target> = (0..n).map(|j| &targets[(j + rep * 3) % n]).collect();
        tokio::task::block_in_place(|| {
            for (id, bs) in DD_BLOCKS.into_iter().filter(|(id, _)| wanted(id)) {
                for t in &order {
                    let load = bench::load_average()[0];
                    let traced = (args.fuse_calls && !t.volume.is_empty()).then(|| {
                        fuse_calls::Recording::start(&perf_dir.join("fuse.data"), &t.dir)
                            .expect("perf record")
                    });
                    let mut mb = 0.0;
                    let v = profiled(id, &t.key, rep, &mut || {
                        let (rate, written) = workloads::dd(&t.dir, bs, budget, 512 * MIB);
                        mb = written;
                        (rate, written)
                    });
                    if let Some(rec) = traced {
                        fuse_samples.push(fuse_calls::Sample {
                            row: id.into(),
                            case: t.key.clone(),
                            rep,
                            writes: (mb * 1e6 / bs as f64).round() as u64,
                            requests: rec.finish().expect("perf"),
                        });
                    }
                    println!("rep {rep} {id} {}: {v:.2} MB/s (load {load:.2})", t.key);
                    push(id, &t.key, v, load);
                }
                trim(&net, raw.as_deref());
            }
            if wanted("files-100x1MiB") {
                for t in &order {
                    let counted = args.fop_profile && !t.volume.is_empty();
                    if counted {
                        fops_clear(&rt, &net, t);
                    }
                    let load = bench::load_average()[0];
                    let v = workloads::files_1m(&t.dir);
                    if counted {
                        fop_samples.push(fops_read(&rt, &net, t, "100 × 1 MiB files", rep, 100));
                    }
                    workloads::files_1m_cleanup(&t.dir);
                    println!("rep {rep} files-100x1MiB {}: {v:.1} files/s", t.key);
                    push("files-100x1MiB", &t.key, v, load);
                }
                trim(&net, raw.as_deref());
            }
            if wanted("fio-write") || wanted("fio-read") {
                for t in &order {
                    let load = bench::load_average()[0];
                    let sub = workloads::fio_dir(&t.dir);
                    let w = profiled("fio-write", &t.key, rep, &mut || {
                        (workloads::fio_phase(&sub, "write"), FIO_MB)
                    });
                    let r = profiled("fio-read", &t.key, rep, &mut || {
                        (workloads::fio_phase(&sub, "read"), FIO_MB)
                    });
                    std::fs::remove_dir_all(&sub).expect("ior cleanup");
                    println!(
                        "rep {rep} fio {}: write {w:.1} MB/s, read {r:.1} MB/s",
                        t.key
                    );
                    push("fio-write", &t.key, w, load);
                    push("fio-read", &t.key, r, load);
                    trim(&net, raw.as_deref());
                }
            }
            if wanted("small-create") || wanted("small-stat") || wanted("small-delete") {
                for t in &order {
                    let counted = args.fop_profile && !t.volume.is_empty();
                    if counted {
                        fops_clear(&rt, &net, t);
                    }
                    let load = bench::load_average()[0];
                    let (c, s, d) = workloads::small_files(&t.dir);
                    if counted {
                        let files = workloads::SMALL_FILES;
                        fop_samples.push(fops_read(&rt, &net, t, "small files", rep, files));
                    }
                    println!(
                        "rep {rep} small {}: create {c:.0}/s, stat {s:.0}/s, delete {d:.0}/s",
                        t.key
                    );
                    push("small-create", &t.key, c, load);
                    push("small-stat", &t.key, s, load);
                    push("small-delete", &t.key, d, load);
                }
                trim(&net, raw.as_deref());
            }
        });
    }

    // Failover: the same event hits every gluster case at the same moment.
    let gluster: Vec<&Target> = targets.iter().filter(|t| !t.volume.is_empty()).collect();
    let mut stalls = Vec::new();
    if args.failover_reps > 0 {
        for event in &args.events {
            let log = |t: &Target| client_log(&client, &node_dir, t);
            stalls
                .extend(failover::failover(&net, &gluster, event, args.failover_reps, &log).await);
        }
    }
    // Every ping-timer expiry and disconnection each client logged over the whole run; the
    // document compares them with what the events explain (`dp::disconnect_bound`).
    let mut ping_expiries = BTreeMap::new();
    let mut disconnects = BTreeMap::new();
    for t in &gluster {
        let text = client_log(&client, &node_dir, t);
        let count = |what: &str| text.lines().filter(|l| l.contains(what)).count();
        ping_expiries.insert(t.key.clone(), count("has not responded in the last"));
        disconnects.insert(t.key.clone(), count("disconnected from"));
    }
    // The same for the nodes' own clients of each volume (quotad, the self-heal daemon): a
    // quota'd write waits on quotad, which may wait on the cut brick.
    let daemon_expiries: Vec<String> = net
        .nodes()
        .iter()
        .flat_map(|n| ["quotad.log", "glustershd.log"].map(|f| n.log_dir().join(f)))
        .flat_map(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            text.lines()
                .filter(|l| l.contains("has not responded in the last"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    let daemon_ping_expiries: BTreeMap<String, usize> = gluster
        .iter()
        .map(|t| {
            // Gluster names a client translator `0-VOLUME-client-N`.
            let client_of = format!(" 0-{}-client-", t.volume);
            let n = daemon_expiries
                .iter()
                .filter(|l| l.contains(&client_of))
                .count();
            (t.key.clone(), n)
        })
        .collect();

    let results = Results {
        run: run_info,
        storage: format!(
            "{}, in loop files on {}",
            bench::storage_of(&net.nodes()[0].brick_root()),
            bench::storage_of(&std::env::temp_dir())
        ),
        waited_for_quiet: waited,
        reps: args.reps,
        row_seconds: args.row_seconds,
        cases: targets.iter().map(|t| t.meta.clone()).collect(),
        samples,
        stalls,
        ping_expiries,
        daemon_ping_expiries,
        disconnects,
        brick_kills: args.failover_reps
            * usize::from(args.events.iter().any(|e| e == "brick-kill")),
        node_cuts: args.failover_reps * args.events.iter().filter(|e| e.ends_with("-cut")).count(),
        total_seconds: started.elapsed().as_secs_f64(),
        cpu: profiles,
        fops: fop_samples,
        fuse: fuse_samples,
    };
    let block = dp::render(&results);
    println!("{block}");
    let out = bench::out_dir();
    bench::write_results(
        &out,
        "datapath",
        &serde_json::to_value(&results).unwrap(),
        &block,
    )
    .expect("writing the results");
    dp::plot(&results, &out.join("datapath.svg")).expect("plot");
    println!("wrote {}", out.join("datapath.md").display());
}

/// Everything the FUSE client of `t` logged: a hand-made mount's own log file, or the CSI
/// node plugin's logs for its volume.
fn client_log(client: &gk_testenv::gluster_net::Client, node_dir: &Path, t: &Target) -> String {
    let logs = [client.log_file(&t.key), node_dir.join("logs")];
    logs.iter()
        .flat_map(|p| {
            if p.is_dir() {
                std::fs::read_dir(p)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().contains(&t.volume))
                    .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                    .collect::<Vec<_>>()
            } else {
                vec![std::fs::read_to_string(p).unwrap_or_default()]
            }
        })
        .collect()
}

/// Zeroes the brick call counters of `t`'s volume before a counted sample.
fn fops_clear(rt: &tokio::runtime::Handle, net: &GlusterNet, t: &Target) {
    rt.block_on(net.gluster(0).profile_clear(&t.volume))
        .unwrap_or_else(|e| panic!("{}: profile clear: {e}", t.volume));
}

/// What `t`'s bricks were asked since `fops_clear`, for a sample that made `files` files.
fn fops_read(
    rt: &tokio::runtime::Handle,
    net: &GlusterNet,
    t: &Target,
    row: &str,
    rep: usize,
    files: usize,
) -> fops::Sample {
    let bricks = rt
        .block_on(net.gluster(0).profile_info(&t.volume))
        .unwrap_or_else(|e| panic!("{}: profile info: {e}", t.volume));
    fops::Sample::new(row, &t.key, rep, files, &bricks)
}
