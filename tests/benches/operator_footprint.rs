//! Operator footprint and time to Ready, against the real apiserver and controller-manager and
//! real glusterd behind the stand-in kubelet:
//!
//! - time from `kubectl apply` to Ready for a 3-node GlusterCluster and for a replica-3
//!   GlusterVolume;
//! - the operator's peak RSS and CPU while it brings up VOLUMES GlusterVolumes and PVS
//!   PersistentVolumes of our CSI driver spread over them;
//! - its RSS and CPU in a steady state of STEADY seconds where nothing changes, at the
//!   production refresh interval (30 s).
//!
//!   cargo bench -p gk-testenv --bench operator_footprint -- [VOLUMES] [PVS] [STEADY]
//!
//! The operator is the shipped binary, `gk-operator` from the same target directory (build it
//! first: `cargo build --release -p gk-operator`, or name it in GK_OPERATOR_BIN), run as a
//! process of its own with its production settings, so /proc shows its figures alone; the
//! brick agents run in this process, gluster TLS on (the default). Refuses a busy machine
//! (`GK_BENCH_ANY_LOAD=1` overrides). Writes docs/benchmarks/operator-footprint.{json,md}
//! (`GK_BENCH_OUT` elsewhere).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_api::names::INSTANCE_LABEL;
use gk_testenv::bench::footprint::{memory, Results};
use gk_testenv::bench::{self, RunInfo};
use gk_testenv::k8s::ControlPlane;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "../tests/support/mod.rs"]
mod support;
use support::wait_until;

const DRIVER: &str = "gluster.glusterkube.dev";
/// On the bench's namespaces and PersistentVolumes, so that a later run can clean up after
/// one that failed.
const BENCH_LABEL: &str = "glusterkube.dev/bench=footprint";
/// The operator's production refresh interval (its --refresh-seconds default).
const REFRESH_SECONDS: u64 = 30;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let volumes = args.first().copied().unwrap_or(50) as usize;
    let pvs = args.get(1).copied().unwrap_or(1000) as usize;
    let steady = Duration::from_secs(args.get(2).copied().unwrap_or(120));
    let command = format!(
        "cargo build --release -p gk-operator && cargo bench -p gk-testenv --bench \
         operator_footprint -- {volumes} {pvs} {}",
        steady.as_secs()
    );
    bench::require_quiet(Duration::from_secs(1800));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench(volumes, pvs, steady, command));
}

/// The shipped operator binary: GK_OPERATOR_BIN, or `gk-operator` in the target directory
/// this bench was built into.
fn operator_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("GK_OPERATOR_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().expect("the bench's own path");
    // target/<profile>/deps/operator_footprint-<hash>
    let bin = exe
        .parent()
        .and_then(|deps| deps.parent())
        .map(|profile| profile.join("gk-operator"))
        .expect("a target directory");
    assert!(
        bin.exists(),
        "{} does not exist: build the operator first (cargo build --release -p gk-operator) or \
         set GK_OPERATOR_BIN",
        bin.display()
    );
    bin
}

/// The operator's /metrics text (a plain HTTP/1.0 GET on loopback).
async fn scrape(addr: std::net::SocketAddr) -> Option<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).await.ok()?;
    body.split_once("\r\n\r\n").map(|(_, b)| b.to_string())
}

/// The operator's process, ended with the bench even when the bench fails.
struct Operator(std::process::Child);

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// CPU seconds (user + system) and current and peak RSS of a process, from /proc.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    cpu: f64,
    rss_kib: u64,
    peak_kib: u64,
}

fn usage(pid: u32, ticks: f64) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = rest.get(11)?.parse().ok()?;
    let stime: f64 = rest.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some(Usage {
        cpu: (utime + stime) / ticks,
        rss_kib: kib("VmRSS:")?,
        peak_kib: kib("VmHWM:")?,
    })
}

fn clock_ticks() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("CLK_TCK")
}

/// The sum of one metric over its label sets that contain `label`, from a scrape.
fn metric_sum(text: &str, name: &str, label: &str) -> Option<f64> {
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(label))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

fn is_true(conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition], t: &str) -> bool {
    conds.iter().any(|c| c.type_ == t && c.status == "True")
}

async fn bench(volume_count: usize, pv_count: usize, steady: Duration, command: String) {
    // What was built and is measured, read before the run so later edits do not show.
    let run = RunInfo::now(&command);
    assert!(volume_count >= 1, "VOLUMES must be at least 1");
    // A run that failed half-way may have left objects behind.
    let cp = ControlPlane::ensure().expect("control plane");
    clean_up(&cp.client().await.unwrap()).await;
    let support::OperatorEnv {
        cp,
        client,
        ns,
        net: _net,
        kubelet: _kubelet,
        ..
    } = support::operator_env("gk-footprint", 3).await;
    let instance = format!("footprint-{}", std::process::id());
    let (key, value) = BENCH_LABEL.split_once('=').unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let metrics_addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let log = std::fs::File::create(dir.path().join("operator.log")).unwrap();
    let load_before = bench::load_average();
    let child = Operator(
        std::process::Command::new(operator_binary())
            .args([
                "--metrics-addr",
                &metrics_addr.to_string(),
                "--instance",
                &instance,
                "--namespace",
                &ns,
                "--leader-election",
                "false",
                "--brick-image",
                "glusterkube/brick:bench",
            ])
            .env("KUBECONFIG", &cp.kubeconfig)
            .env("RUST_LOG", "warn")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting the operator"),
    );
    let pid = child.0.id();
    let ticks = clock_ticks();
    let started = Instant::now();

    // Sample RSS every 200 ms: VmHWM is the kernel's own peak, the samples give the steady
    // state's range.
    let samples: Arc<Mutex<Vec<(Instant, Usage)>>> = Arc::default();
    let sampler = {
        let samples = samples.clone();
        tokio::spawn(async move {
            while let Some(u) = usage(pid, ticks) {
                samples.lock().unwrap().push((Instant::now(), u));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let labels = json!({INSTANCE_LABEL: instance});

    // 1. A 3-node GlusterCluster: apply to Ready.
    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), &ns);
    let gc: GlusterCluster = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
        "metadata": {"name": "pool", "labels": labels},
        "spec": {"nodes": [
            {"name": "storage-1", "storage": {"directory": "/srv/glusterkube"}},
            {"name": "storage-2", "storage": {"directory": "/srv/glusterkube"}},
            {"name": "storage-3", "storage": {"directory": "/srv/glusterkube"}},
        ]}
    }))
    .unwrap();
    let t = Instant::now();
    clusters.create(&PostParams::default(), &gc).await.unwrap();
    wait_until("GlusterCluster Ready", 300, async || {
        let c = clusters.get("pool").await.ok()?;
        is_true(&c.status?.conditions, "Ready").then_some(())
    })
    .await;
    let cluster_ready = t.elapsed();

    // 2. One replica-3 GlusterVolume: apply to Ready (started, bricks online, profile set).
    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), &ns);
    let volume = |name: String| -> GlusterVolume {
        serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": name, "labels": labels},
            "spec": {"cluster": "pool", "type": "Replicate", "replica": 3, "brickCount": 3},
        }))
        .unwrap()
    };
    let names: Vec<String> = (0..volume_count).map(|i| format!("vol-{i:03}")).collect();
    let ready = async |name: &str| {
        let v = volumes.get(name).await.ok()?;
        let s = v.status?;
        (is_true(&s.conditions, "Ready") && !is_true(&s.conditions, "Degraded")).then_some(())
    };
    let t = Instant::now();
    volumes
        .create(&PostParams::default(), &volume(names[0].clone()))
        .await
        .unwrap();
    wait_until("the first GlusterVolume Ready", 300, async || {
        ready(&names[0]).await
    })
    .await;
    let volume_ready = t.elapsed();

    // 3. The other volumes, applied at once.
    let t = Instant::now();
    for name in &names[1..] {
        volumes
            .create(&PostParams::default(), &volume(name.clone()))
            .await
            .unwrap();
    }
    for name in &names[1..] {
        wait_until(&format!("{name} Ready"), 1800, async || ready(name).await).await;
    }
    let rest_ready = t.elapsed();

    // 4. PersistentVolumes of our driver spread over the volumes, as the CSI controller
    // writes them (the operator counts them per volume and checks them before deletion).
    let pv_api: Api<PersistentVolume> = Api::all(client.clone());
    let pv_names: Vec<String> = (0..pv_count).map(|i| format!("{ns}-pv-{i:05}")).collect();
    let t = Instant::now();
    futures::stream::iter(pv_names.iter().enumerate())
        .for_each_concurrent(16, |(i, name)| {
            let pv_api = pv_api.clone();
            let pool = format!("{ns}/{}", names[i % names.len()]);
            async move {
                let pv: PersistentVolume = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {key: value}},
                    "spec": {
                        "capacity": {"storage": "1Gi"},
                        "accessModes": ["ReadWriteMany"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "csi": {"driver": DRIVER, "volumeHandle": format!("subdir/{pool}/{name}"),
                                "volumeAttributes": {"pool": pool, "mode": "subdir"}},
                    }
                }))
                .unwrap();
                pv_api.create(&PostParams::default(), &pv).await.unwrap();
            }
        })
        .await;
    let want = pv_count as f64;
    let ns_label = format!("namespace=\"{ns}\"");
    wait_until(
        "the operator to count every PersistentVolume",
        120,
        async || {
            let text = scrape(metrics_addr).await?;
            let counted = metric_sum(&text, "glusterkube_volume_persistent_volumes", &ns_label);
            (counted == Some(want)).then_some(())
        },
    )
    .await;
    let pvs_counted = t.elapsed();
    let scraped = scrape(metrics_addr).await.expect("the operator's /metrics");
    let online = metric_sum(&scraped, "glusterkube_volume_bricks_online", &ns_label).unwrap_or(0.0);
    assert_eq!(
        online,
        3.0 * volume_count as f64,
        "the operator's metrics show every brick of every volume online"
    );
    let built = usage(pid, ticks).expect("operator running");
    let build_wall = started.elapsed();

    // 5. Steady state: nothing changes for `steady`; the operator refreshes every volume's
    // health every 30 s.
    let steady_from = Instant::now();
    let before = usage(pid, ticks).expect("operator running");
    tokio::time::sleep(steady).await;
    let after = usage(pid, ticks).expect("operator running");
    let steady_rss: Vec<u64> = samples
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at >= steady_from)
        .map(|(_, u)| u.rss_kib)
        .collect();
    let scraped = scrape(metrics_addr).await.expect("the operator's /metrics");
    let reconciles = metric_sum(&scraped, "glusterkube_reconciles_total", "").unwrap_or(0.0);
    let held = memory(pid).expect("operator running");
    sampler.abort();
    drop(child);
    let load_after = bench::load_average();

    let results = Results {
        run,
        load_before,
        load_after,
        volumes: volume_count,
        pvs: pv_count,
        refresh_seconds: REFRESH_SECONDS,
        steady_seconds: steady.as_secs_f64(),
        cluster_ready_s: cluster_ready.as_secs_f64(),
        first_volume_ready_s: volume_ready.as_secs_f64(),
        rest_ready_s: rest_ready.as_secs_f64(),
        pvs_counted_s: pvs_counted.as_secs_f64(),
        peak_rss_kib: after.peak_kib,
        build_cpu_s: built.cpu,
        build_wall_s: build_wall.as_secs_f64(),
        steady_rss_kib: (
            steady_rss.iter().min().copied().unwrap_or(0),
            steady_rss.iter().max().copied().unwrap_or(0),
        ),
        steady_cpu_s: after.cpu - before.cpu,
        memory: held,
        reconciles,
    };
    let block = bench::footprint::render(&results);
    println!("{block}");
    bench::write_results(
        &bench::out_dir(),
        "operator-footprint",
        &serde_json::to_value(&results).unwrap(),
        &block,
    )
    .expect("writing the results");

    clean_up(&client).await;
}

/// Leaves the shared apiserver as the bench found it, also after an earlier run that failed
/// half-way: its PersistentVolumes go, and its namespaces go with their custom resources, which
/// first lose their finalizers (no operator serves them any more, and their glusterd nodes
/// ended with that run).
async fn clean_up(client: &kube::Client) {
    let pv_api: Api<PersistentVolume> = Api::all(client.clone());
    let ours = ListParams::default().labels(BENCH_LABEL);
    let pv_names: Vec<String> = pv_api
        .list_metadata(&ours)
        .await
        .map(|l| l.items.iter().map(|p| p.name_any()).collect())
        .unwrap_or_default();
    futures::stream::iter(pv_names.iter())
        .for_each_concurrent(16, |name| {
            let pv_api = pv_api.clone();
            async move {
                let _ = pv_api.delete(name, &DeleteParams::default()).await;
            }
        })
        .await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in namespaces.list_metadata(&ours).await.unwrap().items {
        let ns = ns.name_any();
        support::drop_finalizers(Api::<GlusterVolume>::namespaced(client.clone(), &ns)).await;
        support::drop_finalizers(Api::<GlusterCluster>::namespaced(client.clone(), &ns)).await;
        let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    }
}
