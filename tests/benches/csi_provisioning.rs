//! CSI provisioning benchmark against real gluster: CreateVolume latency, many subdirectory
//! PVs on one pool, NodeStage+NodePublish, and re-publishing a staged volume.
//!
//!   cargo bench -p gk-testenv --bench csi_provisioning -- [CREATES] [PVS]
//!
//! Prints a Markdown table; docs/benchmarks/csi-provisioning.md keeps the committed results.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use csi::controller_server::Controller;
use csi::node_server::Node;
use csi_proto::v1 as csi;
use gk_csi::backend::{Pool, StaticPools};
use gk_csi::controller::ControllerService;
use gk_csi::node::NodeService;
use gk_csi::params::ObjectKey;
use gk_testenv::agents::AgentSet;
use gk_testenv::gluster_net::GlusterNet;
use tonic::Request;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn cap() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(csi::volume_capability::AccessMode {
            mode: csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let creates = args.first().copied().unwrap_or(200);
    let pvs = args.get(1).copied().unwrap_or(1000);

    let net = GlusterNet::start(3).expect("glusterd nodes");
    let agents = AgentSet::start(&net).await.expect("agents");
    net.form_pool().await.expect("pool");
    let agent = agents.replica3(&net, 0, "pool").await.expect("pool volume");
    let key = ObjectKey {
        namespace: "storage".into(),
        name: "pool".into(),
    };
    let pool = Pool {
        agent,
        volume: "pool".into(),
        servers: net.nodes().iter().map(|n| n.address.clone()).collect(),
        // Plain gluster: TLS mounts are covered through the operator (tests/tests/operator.rs).
        tls: false,
        total_bytes: None,
    };
    let pools = StaticPools {
        pools: Arc::new(HashMap::from([(key, pool)])),
    };
    let driver = ControllerService::new(pools);
    let node = NodeService::new(
        "node-1".into(),
        net.client_mounter(),
        net.scratch_dir("bench-node").unwrap(),
    );
    let params = HashMap::from([("pool".to_string(), "storage/pool".to_string())]);
    let create = |name: String| csi::CreateVolumeRequest {
        name,
        capacity_range: Some(csi::CapacityRange {
            required_bytes: 1 << 30,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap()],
        parameters: params.clone(),
        ..Default::default()
    };

    // CreateVolume latency, one at a time as a provisioner with one worker would call it.
    let mut lat = Vec::with_capacity(creates);
    for i in 0..creates {
        let t = Instant::now();
        driver
            .create_volume(Request::new(create(format!("pvc-lat-{i}"))))
            .await
            .expect("create");
        lat.push(t.elapsed());
    }
    lat.sort();

    // Many PVs on one pool, counted from the first create to the last.
    let t = Instant::now();
    for i in 0..pvs {
        driver
            .create_volume(Request::new(create(format!("pvc-many-{i}"))))
            .await
            .expect("create");
    }
    let many = t.elapsed();

    // Stage + publish, then re-publish of the staged volume at a new target.
    let vol = driver
        .create_volume(Request::new(create("pvc-mount".into())))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let base = net.scratch_dir("bench-kubelet").unwrap();
    let staging = base.join("staging");
    let t = Instant::now();
    node.node_stage_volume(Request::new(csi::NodeStageVolumeRequest {
        volume_id: vol.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap()),
        volume_context: vol.volume_context.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    let publish = |target: std::path::PathBuf| csi::NodePublishVolumeRequest {
        volume_id: vol.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap()),
        volume_context: vol.volume_context.clone(),
        ..Default::default()
    };
    node.node_publish_volume(Request::new(publish(base.join("pod-0"))))
        .await
        .unwrap();
    let stage_publish = t.elapsed();
    let mut republish = Vec::new();
    for i in 1..=20 {
        let t = Instant::now();
        node.node_publish_volume(Request::new(publish(base.join(format!("pod-{i}")))))
            .await
            .unwrap();
        republish.push(t.elapsed());
    }
    republish.sort();

    // The limit is enforced on the mount (df shows it) as soon as CreateVolume returns.
    let fs = nix::sys::statvfs::statvfs(&staging).expect("statvfs on the staged volume");
    let shown = fs.blocks() * fs.fragment_size();
    assert_eq!(
        shown,
        1 << 30,
        "df on a new PV shows {shown} bytes, not its 1 GiB limit"
    );

    // glusterd's own quota list catches up in the background; time until it has every PV.
    let t = Instant::now();
    let mut agent = agents.client(0).await.expect("agent client");
    let want = creates + pvs + 1;
    let listed = loop {
        match agent
            .quota_list(gk_agent::proto::VolumeRequest {
                name: "pool".into(),
            })
            .await
        {
            Ok(r) => break r.into_inner().entries.len(),
            Err(s) if s.code() == tonic::Code::Unavailable => continue,
            Err(s) => panic!("quota list: {}", s.message()),
        }
    };
    assert_eq!(listed, want, "glusterd lists {listed} limits, not {want}");
    let registered = t.elapsed();

    println!("| measure | result | target |");
    println!("|---|---|---|");
    println!(
        "| CreateVolume p50 ({creates} creates) | {} | ≤ 50 ms |",
        ms(percentile(&lat, 0.5))
    );
    println!(
        "| CreateVolume p99 ({creates} creates) | {} | |",
        ms(percentile(&lat, 0.99))
    );
    println!(
        "| {pvs} subdir PVs on one pool | {:.1} s | ≤ 60 s for 1,000 |",
        many.as_secs_f64()
    );
    println!(
        "| NodeStage + NodePublish | {} | ≤ 1 s |",
        ms(stage_publish)
    );
    println!(
        "| re-publish of a staged volume, p50 (20) | {} | ≤ 50 ms |",
        ms(percentile(&republish, 0.5))
    );
    println!(
        "| after the last create, until glusterd's quota list has all {want} | {:.1} s | |",
        registered.as_secs_f64()
    );
}
