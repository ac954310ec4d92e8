//! CSI provisioning on the production path: the CSI controller's `KubePools` resolver against
//! the real apiserver, a GlusterCluster (gluster TLS on, the default) and a replica-3 pool
//! GlusterVolume made by the operator, reached with the operator-issued certificates, on
//! three real glusterd nodes behind the stand-in kubelet. The operator and the CSI controller
//! run as the chart's ServiceAccounts, under the chart's roles.
//!
//!   cargo bench -p gk-testenv --bench csi_provisioning -- [CREATES] [PVS]
//!
//! Times CREATES CreateVolumes one at a time (as a provisioner with one worker calls them),
//! then PVS more, then deletes the first CREATES. Checks that each timed PV's limit is on
//! its directory on every brick. Refuses a busy machine (`GK_BENCH_ANY_LOAD=1` overrides).
//! Writes docs/benchmarks/csi-provisioning.{json,md} (`GK_BENCH_OUT` elsewhere).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use csi::controller_server::Controller;
use csi_proto::v1 as csi;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_csi::controller::ControllerService;
use gk_csi::kube_pools::KubePools;
use gk_operator::context::{BrickPods, Config};
use gk_operator::metrics::Metrics;
use gk_testenv::bench::{self, provisioning::Results, RunInfo};
use kube::api::{Api, PostParams};
use serde_json::json;
use tonic::Request;

#[path = "../tests/support/mod.rs"]
mod support;
use support::wait_until;

fn instance() -> String {
    format!("prov-{}", std::process::id())
}

fn cap() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(csi::volume_capability::AccessMode {
            mode: csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    }
}

fn ready(conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    let is = |t: &str, s: &str| conds.iter().any(|c| c.type_ == t && c.status == s);
    is("Ready", "True") && !is("Degraded", "True")
}

/// The limit gluster enforces on `dir` of a brick (the attribute's versioned name).
fn brick_limit(dir: &std::path::Path) -> Option<u64> {
    let key = format!("{}.1", gk_agent::quota::LIMIT_XATTR);
    let value = xattr_hex(dir, &key)?;
    gk_agent::quota::decode_limit(&value)
}

fn xattr_hex(path: &std::path::Path, key: &str) -> Option<Vec<u8>> {
    let out = std::process::Command::new("getfattr")
        .args(["-n", key, "-e", "hex", "--absolute-names"])
        .arg(path)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.lines().find_map(|l| l.split_once("=0x"))?.1.trim();
    (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok())
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let creates = args.first().copied().unwrap_or(200);
    let bulk = args.get(1).copied().unwrap_or(1000);
    assert!(creates >= 1, "CREATES must be at least 1");
    let command = format!("cargo bench -p gk-testenv --bench csi_provisioning -- {creates} {bulk}");
    bench::require_quiet(Duration::from_secs(900));
    // What was built and is measured, read before the run so later edits do not show.
    let run = RunInfo::now(&command);

    let support::OperatorEnv {
        client,
        ns,
        net,
        kubelet: _kubelet,
        roles: _roles,
        operator: (operator_client, _),
        csi_controller: (csi_client, _),
        ..
    } = support::operator_env("gk-prov", 3).await;
    let config = Config {
        instance: Some(instance()),
        brick_pods: BrickPods {
            image: "glusterkube/brick:bench".into(),
            ..BrickPods::default()
        },
        namespace: ns.clone(),
        ..Config::default()
    };
    let operator = tokio::spawn(gk_operator::run(
        operator_client,
        config,
        Arc::new(Metrics::default()),
        std::future::pending(),
    ));

    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), &ns);
    let gc: GlusterCluster = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
        "metadata": {"name": "gluster", "labels": {gk_api::names::INSTANCE_LABEL: instance()}},
        "spec": {"nodes": (1..=3).map(|i| json!(
            {"name": format!("storage-{i}"), "storage": {"directory": "/srv/glusterkube"}}
        )).collect::<Vec<_>>()}
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &gc).await.unwrap();
    wait_until("GlusterCluster Ready", 300, async || {
        let c = clusters.get("gluster").await.ok()?;
        ready(&c.status?.conditions).then_some(())
    })
    .await;
    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), &ns);
    let gv: GlusterVolume = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
        "metadata": {"name": "pool", "labels": {gk_api::names::INSTANCE_LABEL: instance()}},
        "spec": {"cluster": "gluster", "type": "Replicate", "replica": 3, "brickCount": 3},
    }))
    .unwrap();
    volumes.create(&PostParams::default(), &gv).await.unwrap();
    let pool = wait_until("pool GlusterVolume Ready", 300, async || {
        let v = volumes.get("pool").await.ok()?;
        ready(&v.status.as_ref()?.conditions).then_some(v)
    })
    .await;
    let status = pool.status.expect("status");
    assert!(
        status.mount.as_ref().is_some_and(|m| m.tls),
        "the pool must be a TLS volume: {:?}",
        status.mount
    );
    let brick_paths: Vec<String> = status.bricks.iter().map(|b| b.path.clone()).collect();

    // The CSI controller as the chart's ServiceAccount, with its production resolver.
    let driver =
        ControllerService::new(KubePools::new(csi_client, gk_testenv::kubelet::AGENT_PORT));
    let params = HashMap::from([("pool".to_string(), format!("{ns}/pool"))]);
    let request = |name: String| csi::CreateVolumeRequest {
        name,
        capacity_range: Some(csi::CapacityRange {
            required_bytes: 1 << 30,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap()],
        parameters: params.clone(),
        ..Default::default()
    };
    let mut failures = 0usize;
    let load_before = bench::load_average();

    let t = Instant::now();
    driver
        .create_volume(Request::new(request("pvc-first".into())))
        .await
        .expect("first CreateVolume");
    let first_create_ms = t.elapsed().as_secs_f64() * 1e3;

    let mut create_ms = Vec::with_capacity(creates);
    let mut timed = Vec::with_capacity(creates);
    for i in 0..creates {
        let t = Instant::now();
        match driver
            .create_volume(Request::new(request(format!("pvc-timed-{i}"))))
            .await
        {
            Ok(r) => {
                create_ms.push(t.elapsed().as_secs_f64() * 1e3);
                timed.push(r.into_inner().volume.expect("volume"));
            }
            Err(s) => {
                failures += 1;
                eprintln!("CreateVolume pvc-timed-{i}: {s:?}");
            }
        }
    }
    // Every timed PV's limit is enforced on every brick when CreateVolume has returned.
    for v in &timed {
        let dir = &v.volume_context["subdir"];
        for b in &brick_paths {
            let path = std::path::Path::new(b).join(dir.trim_start_matches('/'));
            assert_eq!(
                brick_limit(&path),
                Some(1 << 30),
                "{} has no 1 GiB limit",
                path.display()
            );
        }
    }

    let t = Instant::now();
    for i in 0..bulk {
        if let Err(s) = driver
            .create_volume(Request::new(request(format!("pvc-bulk-{i}"))))
            .await
        {
            failures += 1;
            eprintln!("CreateVolume pvc-bulk-{i}: {s:?}");
        }
    }
    let bulk_seconds = t.elapsed().as_secs_f64();

    let mut delete_ms = Vec::with_capacity(timed.len());
    for v in &timed {
        let t = Instant::now();
        match driver
            .delete_volume(Request::new(csi::DeleteVolumeRequest {
                volume_id: v.volume_id.clone(),
                ..Default::default()
            }))
            .await
        {
            Ok(_) => delete_ms.push(t.elapsed().as_secs_f64() * 1e3),
            Err(s) => {
                failures += 1;
                eprintln!("DeleteVolume {}: {s:?}", v.volume_id);
            }
        }
    }
    let load_after = bench::load_average();

    let results = Results {
        run,
        load_before,
        load_after,
        storage: format!(
            "{}, in loop files on {}",
            bench::storage_of(&net.nodes()[0].brick_root()),
            bench::storage_of(&std::env::temp_dir())
        ),
        first_create_ms,
        create_ms,
        bulk_pvs: bulk,
        bulk_seconds,
        failures,
        delete_ms,
    };
    let block = bench::provisioning::render(&results);
    println!("{block}");
    bench::write_results(
        &bench::out_dir(),
        "csi-provisioning",
        &serde_json::to_value(&results).unwrap(),
        &block,
    )
    .expect("writing the results");
    operator.abort();
    assert_eq!(failures, 0, "calls failed; see above");
}
