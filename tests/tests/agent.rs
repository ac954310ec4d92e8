//! The brick agent over mutual TLS, driving three real glusterd nodes: pool formation, every
//! volume type, the seed-000 option list, quota'd subdirectories, seed 001's degraded run with
//! heal, idempotence, rollback of a half-done create, and refusal of bad requests.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gk_agent_proto::v1::brick_agent_client::BrickAgentClient;
use gk_agent_proto::v1::*;
use gk_mount::{self as mount, MountSource};
use gk_testenv::agents::AgentSet;
use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::test_data as data;
use sha2::{Digest, Sha256};
use tonic::transport::Channel;
use tonic::Code;

type Client = BrickAgentClient<Channel>;

/// Seed 000's "high performance mode" list, as its author ran it.
const SEED_000_OPTIONS: &[(&str, &str)] = &[
    ("client.event-threads", "8"),
    ("server.event-threads", "8"),
    ("cluster.shd-max-threads", "8"),
    ("performance.read-ahead-page-count", "16"),
    ("performance.client-io-threads", "on"),
    ("performance.quick-read", "off"),
    ("performance.parallel-readdir", "on"),
    ("performance.io-thread-count", "32"),
    ("performance.cache-size", "1GB"),
    ("performance.cache-invalidation", "on"),
    ("performance.md-cache-timeout", "600"),
    ("performance.stat-prefetch", "on"),
    ("server.allow-insecure", "on"),
    ("network.inode-lru-limit", "200000"),
    ("features.shard-block-size", "128MB"),
    ("features.shard", "on"),
    ("features.cache-invalidation-timeout", "600"),
    ("storage.fips-mode-rchecksum", "on"),
];

fn sha_file(path: &Path) -> String {
    format!(
        "{:x}",
        Sha256::digest(std::fs::read(path).unwrap_or_else(|e| panic!("{path:?}: {e}")))
    )
}

fn bricks(net: &GlusterNet, name: &str, per_node: usize) -> Vec<String> {
    let mut out = Vec::new();
    for k in 0..per_node {
        for n in net.nodes() {
            out.push(format!(
                "{}:{}/{name}-{k}",
                n.address,
                n.brick_root().display()
            ));
        }
    }
    out
}

fn spec(name: &str, ty: VolumeType, bricks: Vec<String>) -> VolumeSpec {
    VolumeSpec {
        name: name.into(),
        r#type: ty as i32,
        replica: if ty == VolumeType::Replicate { 3 } else { 0 },
        disperse_data: if ty == VolumeType::Disperse { 2 } else { 0 },
        disperse_redundancy: if ty == VolumeType::Disperse { 1 } else { 0 },
        bricks,
        options: HashMap::new(),
        force: false,
    }
}

async fn create(c: &mut Client, spec: VolumeSpec) -> Result<Volume, tonic::Status> {
    c.volume_create(VolumeCreateRequest {
        spec: Some(spec),
        start: true,
    })
    .await
    .map(|r| r.into_inner().volume.expect("a volume in the reply"))
}

/// A FUSE mount of `volume` (or of its `subdir`) from every node, at the scratch directory
/// `name`, its log beside the others.
async fn mount_of(net: &GlusterNet, volume: &str, subdir: Option<&str>, name: &str) -> PathBuf {
    let target = net.scratch_dir(name).unwrap();
    let log = net.scratch_dir("logs").unwrap().join(format!("{name}.log"));
    let source = MountSource {
        servers: net.nodes().iter().map(|n| n.address.clone()).collect(),
        volume: volume.into(),
        subdir: subdir.map(Into::into),
    };
    net.client_mounter()
        .mount(&source, &target, &log, &[])
        .await
        .unwrap();
    target
}

/// `volume` as the CSI controller sees a pool: node 0's agent, and every node's.
async fn csi_pool(agents: &AgentSet, net: &GlusterNet, volume: &str) -> gk_csi::backend::Pool {
    let mut nodes = Vec::new();
    for i in 0..3 {
        nodes.push(agents.client(i).await.unwrap());
    }
    gk_csi::backend::Pool {
        agent: agents.client(0).await.unwrap(),
        nodes,
        volume: volume.into(),
        servers: net.nodes().iter().map(|n| n.address.clone()).collect(),
        tls: false,
        tls_secret: None,
        total_bytes: None,
        profile: None,
    }
}

fn code_and_message(r: Result<impl std::fmt::Debug, tonic::Status>) -> (Code, String) {
    let s = r.expect_err("the call should have failed");
    (s.code(), s.message().to_string())
}

async fn pool(agents: &AgentSet, net: &GlusterNet) {
    let mut c0 = agents.client(0).await.unwrap();
    for n in &net.nodes()[1..] {
        c0.peer_probe(PeerRequest {
            host: n.address.clone(),
            force: false,
        })
        .await
        .unwrap();
        // Probing again is a no-op, not an error.
        c0.peer_probe(PeerRequest {
            host: n.address.clone(),
            force: false,
        })
        .await
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..net.nodes().len() {
        let mut c = agents.client(i).await.unwrap();
        loop {
            let h = c.health(HealthRequest {}).await.unwrap().into_inner();
            if h.peers == 2 && h.peers_connected == 2 {
                assert!(h.gluster_version.starts_with("glusterfs "), "{h:?}");
                assert_eq!(h.address, net.nodes()[i].address);
                assert_eq!(
                    h.brick_root,
                    net.nodes()[i].brick_root().display().to_string()
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "node {i} never saw the pool: {h:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

#[tokio::test]
async fn agent_manages_three_real_glusterd_nodes_over_mtls() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let net = GlusterNet::start(3).unwrap();
    let agents = AgentSet::start(&net).await.unwrap();

    mtls_is_required(&agents).await;
    pool(&agents, &net).await;
    let mut c = agents.client(1).await.unwrap();

    // Every volume type, created and started through the agent.
    let cases = [
        ("r3", VolumeType::Replicate, 1, "Replicate"),
        ("arb", VolumeType::Arbiter, 1, "Replicate"),
        ("ec", VolumeType::Disperse, 1, "Disperse"),
        ("dist", VolumeType::Distribute, 1, "Distribute"),
        ("r3x2", VolumeType::Replicate, 2, "Distributed-Replicate"),
    ];
    for (name, ty, per_node, type_word) in cases {
        let v = create(&mut c, spec(name, ty, bricks(&net, name, per_node)))
            .await
            .unwrap();
        assert_eq!(
            (v.status.as_str(), v.r#type.as_str()),
            ("Started", type_word),
            "{name}"
        );
        assert_eq!(v.bricks.len(), 3 * per_node, "{name}");
        if ty == VolumeType::Arbiter {
            assert_eq!((v.replica_count, v.arbiter_count), (3, 1));
        }
        // The same request again succeeds without change.
        let again = create(&mut c, spec(name, ty, bricks(&net, name, per_node)))
            .await
            .unwrap();
        assert_eq!(again.id, v.id, "{name} was recreated");
    }
    let listed = c
        .volume_list(VolumeListRequest {})
        .await
        .unwrap()
        .into_inner()
        .names;
    for (name, ..) in cases {
        assert!(listed.iter().any(|n| n == name), "{name} not in {listed:?}");
    }

    // A conflicting spec under an existing name is refused, not applied.
    let (code, msg) = code_and_message(
        create(
            &mut c,
            spec("r3", VolumeType::Replicate, bricks(&net, "other", 1)),
        )
        .await,
    );
    assert_eq!(code, Code::AlreadyExists, "{msg}");
    assert!(msg.contains("exists with bricks"), "{msg}");

    seed_000_profile(&mut c).await;
    status_reports_bricks(&mut c).await;
    bad_requests_name_the_field(&mut c, &net).await;
    concurrent_creates_are_serialised(&agents, &net).await;
    a_create_outlives_its_caller(&agents, &net).await;
    half_done_create_is_rolled_back(&agents, &net).await;
    a_brick_marked_by_a_failed_create_is_cleared(&agents, &net).await;
    quota_subdirectory(&mut c, &net).await;
    quota_fast_writer(&mut c, &net).await;
    degraded_write_and_heal(&mut c, &net, "r3").await;
    degraded_write_and_heal(&mut c, &net, "ec").await;
    read_only_calls_for_people(&mut c).await;
    a_barrier_left_on_lifts_itself(&mut c, &net, "r3").await;
    for volume in ["ec", "r3x2"] {
        snapshot_and_restore_on_bricks(&agents, &net, volume).await;
    }
    snapshots_hold_what_was_made_durable(&agents, &net).await;
}

/// Crash consistency of snapshots copied on the bricks: a writer appends numbered records
/// to four files in turn, each followed by an fsync, while snapshots are taken. Every
/// snapshot (and a restore of one) holds, in each file, whole records in order with at most
/// a part of one more at its end, and no record is missing below the highest one it holds:
/// no file is ahead of one written before it.
async fn snapshots_hold_what_was_made_durable(agents: &AgentSet, net: &GlusterNet) {
    use gk_csi::backend::Source;
    use std::sync::atomic::{AtomicBool, Ordering};
    const FILES: u64 = 4;
    let mut pool = csi_pool(agents, net, "r3").await;
    let name = &"pool r3";
    pool.create_dir(name, "journal", 64 << 20).await.unwrap();
    pool.create_dir(name, "journal-restored", 64 << 20)
        .await
        .unwrap();
    let target = mount_of(net, "r3", None, "journal").await;
    let dir = target.join("journal");
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let writer = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut files: Vec<std::fs::File> = (0..FILES)
                .map(|i| {
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(dir.join(format!("f{i}")))
                        .unwrap()
                })
                .collect();
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let f = &mut files[(k % FILES) as usize];
                f.write_all(format!("{k:08}\n").as_bytes()).unwrap();
                f.sync_data().unwrap();
                k += 1;
            }
            k
        })
    };
    let mut snaps = Vec::new();
    for i in 0..3 {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let (s, made) = pool
            .snapshot_create(name, &format!("journal-{i}"), "journal", 0)
            .await
            .unwrap();
        assert!(
            s.ready && matches!(made, gk_csi::backend::Made::OnBricks { .. }),
            "snapshot {i} was not made on the bricks: {s:?} {made:?}"
        );
        snaps.push(target.join(format!(".glusterkube-snapshots/journal-{i}/data")));
    }
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().unwrap();
    // On this pool (gluster's quota) the restore goes through the volume.
    assert!(
        pool.fill_dir(
            name,
            "journal-restored",
            &Source::Snapshot("journal-1".into()),
            120
        )
        .await
        .unwrap(),
        "the restore did not end within 120 s"
    );
    snaps.push(target.join("journal-restored"));
    let mut highest = Vec::new();
    for copy in &snaps {
        let mut held = std::collections::BTreeSet::new();
        for i in 0..FILES {
            let text = std::fs::read_to_string(copy.join(format!("f{i}"))).unwrap_or_default();
            let mut lines = text.split_inclusive('\n').peekable();
            let mut want = i;
            while let Some(line) = lines.next() {
                let record = format!("{want:08}\n");
                if line == record {
                    held.insert(want);
                    want += FILES;
                } else {
                    // Only the last, part of the next record, may be short.
                    assert!(
                        lines.peek().is_none() && record.starts_with(line),
                        "{}: f{i} holds {line:?} where record {want} belongs",
                        copy.display()
                    );
                }
            }
        }
        let top = held.iter().next_back().copied().unwrap_or(0);
        let missing: Vec<u64> = (0..top).filter(|k| !held.contains(k)).collect();
        assert!(
            missing.is_empty(),
            "{}: records {missing:?} are missing below record {top}",
            copy.display()
        );
        highest.push(top);
    }
    assert!(
        highest[0] > 0 && highest[2] < written,
        "records held {highest:?}, {written} written"
    );
    mount::unmount(&target).ok();
}

/// A snapshot and a restore copied on the bricks by the CSI controller's code, on disperse
/// (fragments and their sizes) and distributed-replicate (files on one set, directories on
/// all): read back equal through gluster, every brick's copy sharing its blocks with its
/// source, nothing left to heal, and the snapshot unchanged when its source changes.
async fn snapshot_and_restore_on_bricks(agents: &AgentSet, net: &GlusterNet, volume: &str) {
    use gk_csi::backend::Source;
    let mut pool = csi_pool(agents, net, volume).await;
    let name = format!("pool {volume}");
    pool.create_dir(&name, "snap-src", 64 << 20).await.unwrap();
    pool.create_dir(&name, "snap-restored", 64 << 20)
        .await
        .unwrap();
    let target = mount_of(net, volume, None, &format!("snap-{volume}")).await;
    let src = target.join("snap-src");
    for i in 0..24u64 {
        let dir = src.join(format!("d{}", i % 3));
        std::fs::create_dir_all(&dir).unwrap();
        // Sizes that are not whole stripes, and a few empty files.
        let len = if i % 8 == 0 {
            0
        } else {
            (i as usize * 37_003) % 300_000 + 3
        };
        std::fs::write(dir.join(format!("f{i}")), data(7000 + i, len)).unwrap();
    }
    std::os::unix::fs::symlink("d1/f1", src.join("link")).unwrap();
    std::fs::hard_link(src.join("d2/f2"), src.join("d0/hard")).unwrap();
    let want = gk_testenv::tree_sums(&src);

    let (snap, made) = pool
        .snapshot_create(&name, "s1", "snap-src", 0)
        .await
        .unwrap();
    assert!(
        snap.ready && matches!(made, gk_csi::backend::Made::OnBricks { .. }),
        "{volume}: the snapshot was not made on the bricks: {snap:?} {made:?}"
    );
    let copy = target.join(".glusterkube-snapshots/s1/data");
    assert_eq!(
        gk_testenv::tree_sums(&copy),
        want,
        "{volume}: the snapshot differs"
    );
    let shared = net
        .nodes()
        .iter()
        .filter(|n| {
            let brick_copy = n
                .brick_root()
                .join(format!("{volume}-0/.glusterkube-snapshots/s1/data"));
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg("find . -type f -size +0 -exec filefrag -v {} + | grep -c shared")
                .current_dir(&brick_copy)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim() != "0"
        })
        .count();
    assert_eq!(
        shared, 3,
        "{volume}: not every node's copy shares blocks with its source"
    );

    // The source changes (rewritten, written in place over blocks it shares with the
    // snapshot, removed); the snapshot does not.
    std::fs::write(src.join("d0/f3"), b"changed").unwrap();
    {
        use std::io::{Seek, SeekFrom};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(src.join("d1/f1"))
            .unwrap();
        f.seek(SeekFrom::Start(1000)).unwrap();
        f.write_all(b"written in place").unwrap();
        f.sync_all().unwrap();
    }
    std::fs::remove_file(src.join("d1/f4")).unwrap();
    assert_eq!(
        gk_testenv::tree_sums(&copy),
        want,
        "{volume}: the snapshot followed its source"
    );

    // A restore is copied on the bricks only into a PV sized by the bricks' project
    // quotas. This machine's kernel has no XFS quota accounting, but XFS keeps project ids
    // without it: the volume is marked as sized by projects, and the restored PV's
    // directory given a project on every brick, as the agent does on such a pool. What is
    // restored into it must take its project.
    let option = (
        gk_agent_proto::pv_quota::OPTION.to_string(),
        gk_agent_proto::pv_quota::PROJECT.to_string(),
    );
    let set = pool
        .agent
        .volume_set(VolumeSetRequest {
            name: volume.into(),
            options: HashMap::from([option.clone()]),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(set.rejected.is_empty(), "{set:?}");
    for n in net.nodes() {
        let dir = n.brick_root().join(format!("{volume}-0/snap-restored"));
        let set = std::process::Command::new("xfs_io")
            .args(["-c", "chproj 4242", "-c", "chattr +P"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(set.success(), "xfs_io on {}", dir.display());
    }
    let filled = pool
        .fill_dir(&name, "snap-restored", &Source::Snapshot("s1".into()), 0)
        .await
        .unwrap();
    // Back to gluster's quota (gluster cannot reset a user option, only set it).
    pool.agent
        .volume_set(VolumeSetRequest {
            name: volume.into(),
            options: HashMap::from([(option.0, gk_agent_proto::pv_quota::GLUSTER.to_string())]),
        })
        .await
        .unwrap();
    assert!(filled, "{volume}: the restore was not made on the bricks");
    assert_eq!(
        gk_testenv::tree_sums(&target.join("snap-restored")),
        want,
        "{volume}: the restore differs from the snapshot"
    );
    for n in net.nodes() {
        let dir = n.brick_root().join(format!("{volume}-0/snap-restored"));
        let out = std::process::Command::new("find")
            .arg(&dir)
            .args([
                "-mindepth",
                "1",
                "-exec",
                "xfs_io",
                "-c",
                "lsproj",
                "{}",
                ";",
            ])
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&out.stdout);
        let ids: std::collections::BTreeSet<&str> = out.lines().collect();
        assert!(
            ids.iter().all(|l| l.trim() == "projid = 4242") && !ids.is_empty(),
            "{volume}: restored entries outside their PV's project on {}: {ids:?}",
            dir.display()
        );
    }
    let heal = heal_count(&mut pool.agent, volume).await;
    assert!(
        heal.pending_total == 0 && heal.bricks.iter().all(|b| b.connected),
        "{volume}: {heal:?}"
    );
    mount::unmount(&target).ok();
}

/// What an agent killed while bricks copy a snapshot leaves: gluster's barrier on. It
/// holds an fsync until its timeout (set by VolumeBarrier) lifts it, and turning it off
/// afterwards is refused, which is how the controller knows its copy is not to be used.
async fn a_barrier_left_on_lifts_itself(c: &mut Client, net: &GlusterNet, volume: &str) {
    let target = mount_of(net, volume, None, &format!("barrier-{volume}")).await;
    let barrier = |enable| VolumeBarrierRequest {
        volume: volume.into(),
        enable,
    };
    c.volume_barrier(barrier(true)).await.unwrap();
    let info = c
        .volume_info(VolumeRequest {
            name: volume.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        info.options
            .get("features.barrier-timeout")
            .map(String::as_str),
        Some("30"),
        "{:?}",
        info.options
    );
    let path = target.join("barrier-probe");
    let started = Instant::now();
    let synced = tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(b"held").unwrap();
        f.sync_all()
    })
    .await
    .unwrap();
    let held = started.elapsed();
    synced.unwrap();
    assert!(
        held >= Duration::from_secs(20) && held <= Duration::from_secs(60),
        "an fsync under the barrier took {held:?}, not about its 30 s timeout"
    );
    let (code, msg) = code_and_message(c.volume_barrier(barrier(false)).await);
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    // On and off again works once it lifted itself.
    c.volume_barrier(barrier(true)).await.unwrap();
    c.volume_barrier(barrier(false)).await.unwrap();
    mount::unmount(&target).ok();
}

/// LogTail: the end of glusterd's and the bricks' logs on node 1, cut at whole lines; and
/// HealEntries of a volume that cannot heal, refused saying so.
async fn read_only_calls_for_people(c: &mut Client) {
    let e = c
        .heal_entries(HealEntriesRequest {
            name: "dist".into(),
            limit: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("nothing heals"), "{}", e.message());

    let tail = |kind: LogKind, max_bytes: u32| LogTailRequest {
        kind: kind as i32,
        max_bytes,
        volume: String::new(),
    };
    let r = c
        .log_tail(tail(LogKind::Glusterd, 4096))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.files.len(), 1, "{:?}", r.files);
    let g = &r.files[0];
    assert_eq!(g.path, "glusterd.log");
    assert!(g.truncated, "glusterd's log is longer than 4 KiB by now");
    assert!(g.text.len() <= 4096 && !g.text.is_empty());
    assert!(g.text.ends_with('\n'), "whole lines: {:?}", g.text);
    let bricks = c
        .log_tail(tail(LogKind::Bricks, 0))
        .await
        .unwrap()
        .into_inner();
    // Node 1 holds a brick of each volume made above: r3, ec, dist and more.
    assert!(
        bricks.files.len() >= 3,
        "{:?}",
        bricks.files.iter().map(|f| &f.path).collect::<Vec<_>>()
    );
    assert!(bricks
        .files
        .iter()
        .all(|f| f.path.starts_with("bricks/") && f.path.ends_with(".log")));
    assert!(
        bricks.files.iter().any(|f| f.text.contains("r3")),
        "a brick log names its volume"
    );
    let all = c
        .log_tail(tail(LogKind::All, 1024))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        all.files.len(),
        bricks.files.len() + 2,
        "glusterd's, the self-heal daemon's and the bricks'"
    );
    for (bad, field) in [
        (tail(LogKind::All, 2 << 20), "max_bytes"),
        (
            LogTailRequest {
                kind: 99,
                max_bytes: 0,
                volume: String::new(),
            },
            "kind",
        ),
        (
            LogTailRequest {
                volume: "v".into(),
                ..tail(LogKind::Bricks, 0)
            },
            "volume",
        ),
        (
            LogTailRequest {
                volume: "bad name".into(),
                ..tail(LogKind::Rebalance, 0)
            },
            "volume",
        ),
    ] {
        let e = c.log_tail(bad).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument);
        assert!(e.message().contains(field), "{}", e.message());
    }
}

async fn mtls_is_required(agents: &AgentSet) {
    let mut good = agents.client(0).await.unwrap();
    good.health(HealthRequest {}).await.unwrap();

    let mut anonymous = agents
        .client_with(0, None, &agents.pki.ca_pem())
        .await
        .unwrap();
    let err = anonymous.health(HealthRequest {}).await.unwrap_err();
    assert_ne!(err.code(), Code::Ok);

    let rogue = gk_testenv::agents::TestPki::new("rogue-ca").unwrap();
    let rogue_id = rogue.issue("intruder", &[], false).unwrap();
    let mut intruder = agents
        .client_with(0, Some(&rogue_id), &agents.pki.ca_pem())
        .await
        .unwrap();
    let err = intruder.health(HealthRequest {}).await.unwrap_err();
    assert_ne!(
        err.code(),
        Code::Ok,
        "a certificate from another CA was accepted"
    );
}

/// Nothing left to heal on three connected bricks.
fn healed(h: &HealInfoResponse) -> bool {
    h.pending_total == 0 && h.bricks.len() == 3 && h.bricks.iter().all(|b| b.connected)
}

/// The HealCount answer status refreshes use.
async fn heal_count(c: &mut Client, volume: &str) -> HealInfoResponse {
    c.heal_count(VolumeRequest {
        name: volume.into(),
    })
    .await
    .unwrap()
    .into_inner()
}

async fn seed_000_profile(c: &mut Client) {
    let options: HashMap<String, String> = SEED_000_OPTIONS
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let reply = c
        .volume_set(VolumeSetRequest {
            name: "dist".into(),
            options: options.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let vol = reply.volume.unwrap();
    // Every option is either in effect or reported with gluster's reason; none vanish.
    for (k, v) in &options {
        let applied = vol.options.get(k) == Some(v);
        let rejected = reply.rejected.iter().find(|r| &r.key == k);
        assert!(
            applied ^ rejected.is_some(),
            "{k}: applied={applied} rejected={rejected:?}"
        );
        if let Some(r) = rejected {
            assert!(!r.reason.is_empty(), "{k} rejected without a reason");
        }
    }
    eprintln!(
        "seed 000 options: {} applied, {} rejected: {:?}",
        options.len() - reply.rejected.len(),
        reply.rejected.len(),
        reply
            .rejected
            .iter()
            .map(|r| format!("{}: {}", r.key, r.reason))
            .collect::<Vec<_>>()
    );
    // Applying them again changes nothing and reports the same rejections.
    let again = c
        .volume_set(VolumeSetRequest {
            name: "dist".into(),
            options,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.rejected.len(), reply.rejected.len());
    // ...and describes the volume as the first answer did (read before the sets when none
    // was needed, after them otherwise).
    assert_eq!(again.volume.unwrap().options, vol.options);
    // Reset takes an option back to gluster's default.
    let v = c
        .volume_reset(VolumeResetRequest {
            name: "dist".into(),
            key: "performance.cache-size".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(!v.options.contains_key("performance.cache-size"));
}

async fn status_reports_bricks(c: &mut Client) {
    let st = c
        .volume_status(VolumeRequest { name: "r3".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(st.bricks.len(), 3);
    for b in &st.bricks {
        assert!(b.online && b.pid > 0 && b.port > 0, "{b:?}");
        assert!(
            b.size_total_bytes > 1 << 30 && b.size_free_bytes > 0,
            "{b:?}"
        );
        assert!(b.inodes_total > 0, "{b:?}");
    }
    // The self-heal daemons attach a started volume shortly after its bricks come up.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut st = st;
    while !st.self_heal_daemons_online {
        assert!(
            std::time::Instant::now() < deadline,
            "self-heal daemons of r3 not online after 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        st = c
            .volume_status(VolumeRequest { name: "r3".into() })
            .await
            .unwrap()
            .into_inner();
    }
}

async fn bad_requests_name_the_field(c: &mut Client, net: &GlusterNet) {
    let b = |n| bricks(net, "bad", n);
    let mut unknown = spec("bad", VolumeType::Replicate, b(1));
    unknown.r#type = 99;
    let mut not_dividing = spec("bad", VolumeType::Replicate, b(1));
    not_dividing.bricks.pop();
    let mut ec_bad = spec("bad", VolumeType::Disperse, b(1));
    ec_bad.disperse_data = 2;
    ec_bad.disperse_redundancy = 2;
    ec_bad.bricks = b(2)[..4].to_vec();
    let mut no_path = spec("bad", VolumeType::Distribute, b(1));
    no_path.bricks[1] = net.nodes()[1].address.clone();
    let mut bad_name = spec("bad name", VolumeType::Distribute, b(1));
    bad_name.bricks.truncate(1);
    let cases = [
        (unknown, "spec.type"),
        (not_dividing, "spec.bricks"),
        (ec_bad, "spec.disperse_redundancy"),
        (no_path, "spec.bricks[1]"),
        (bad_name, "spec.name"),
    ];
    for (s, field) in cases {
        let (code, msg) = code_and_message(create(c, s).await);
        assert_eq!(code, Code::InvalidArgument, "{msg}");
        assert!(
            msg.starts_with(&format!("invalid {field}:")),
            "{field}: {msg}"
        );
    }
    let (code, msg) = code_and_message(
        c.volume_create(VolumeCreateRequest {
            spec: None,
            start: true,
        })
        .await,
    );
    assert_eq!(
        (code, msg.starts_with("invalid spec:")),
        (Code::InvalidArgument, true),
        "{msg}"
    );
    let (code, msg) = code_and_message(
        c.volume_info(VolumeRequest {
            name: "nope".into(),
        })
        .await,
    );
    assert_eq!(code, Code::NotFound, "{msg}");
    let (code, msg) = code_and_message(
        c.subdir_create(SubdirCreateRequest {
            volume: "r3".into(),
            path: "../etc".into(),
            limit_bytes: 1,
        })
        .await,
    );
    assert_eq!(
        (code, msg.starts_with("invalid path:")),
        (Code::InvalidArgument, true),
        "{msg}"
    );
    let (code, msg) = code_and_message(
        c.peer_probe(PeerRequest {
            host: "a b".into(),
            force: false,
        })
        .await,
    );
    assert_eq!(
        (code, msg.starts_with("invalid host:")),
        (Code::InvalidArgument, true),
        "{msg}"
    );
    // Nothing of the refused requests reached gluster.
    let names = c
        .volume_list(VolumeListRequest {})
        .await
        .unwrap()
        .into_inner()
        .names;
    assert!(!names.iter().any(|n| n == "bad"), "{names:?}");
}

async fn concurrent_creates_are_serialised(agents: &AgentSet, net: &GlusterNet) {
    let s = spec("race", VolumeType::Replicate, bricks(net, "race", 1));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let mut c = agents.client(0).await.unwrap();
        let s = s.clone();
        tasks.push(tokio::spawn(async move { create(&mut c, s).await }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(
            t.await
                .unwrap()
                .expect("every concurrent identical create succeeds")
                .id,
        );
    }
    ids.dedup();
    assert_eq!(ids.len(), 1, "more than one volume was made: {ids:?}");
}

/// A caller that goes away once gluster has the volume (an operator restarting mid-create)
/// does not cut the agent's create short: the volume still gets its options and starts.
async fn a_create_outlives_its_caller(agents: &AgentSet, net: &GlusterNet) {
    let mut s = spec("gone", VolumeType::Replicate, bricks(net, "gone", 1));
    for (k, v) in [
        ("performance.cache-size", "48MB"),
        ("performance.io-thread-count", "24"),
        ("network.ping-timeout", "7"),
    ] {
        s.options.insert(k.into(), v.into());
    }
    let want = s.options.clone();
    let mut c = agents.client(0).await.unwrap();
    let call = tokio::spawn(async move { create(&mut c, s).await });
    let g = net.gluster(0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(g.volume_info("gone").await, Ok(Some(_))) {
        assert!(Instant::now() < deadline, "glusterd never had volume gone");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    call.abort();
    assert!(
        call.await.unwrap_err().is_cancelled(),
        "the call ended before it was cut"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let v = loop {
        match g.volume_info("gone").await {
            Ok(Some(v)) if v.is_started() => break v,
            other => assert!(
                Instant::now() < deadline,
                "volume gone not started 60 s after its create was cut: {other:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    for (k, val) in &want {
        assert_eq!(v.options.get(k), Some(val), "{k}: {:?}", v.options);
    }
}

async fn half_done_create_is_rolled_back(agents: &AgentSet, net: &GlusterNet) {
    let mut c = agents.client(0).await.unwrap();
    let mut s = spec("half", VolumeType::Replicate, bricks(net, "half", 1));
    s.options
        .insert("performance.cache-size".into(), "banana".into());
    let (code, msg) = code_and_message(create(&mut c, s.clone()).await);
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains("banana"), "gluster's words are missing: {msg}");
    let (code, _) = code_and_message(
        c.volume_info(VolumeRequest {
            name: "half".into(),
        })
        .await,
    );
    assert_eq!(code, Code::NotFound, "the failed volume was left behind");
    // The creating agent freed its own brick; each other node frees its own through its agent.
    for (i, node) in net.nodes().iter().enumerate() {
        let path = node.brick_root().join("half-0");
        let mut ci = agents.client(i).await.unwrap();
        ci.brick_release(BrickReleaseRequest {
            path: path.display().to_string(),
            only_if_empty: false,
        })
        .await
        .unwrap();
        assert!(!path.exists(), "{path:?} still exists");
    }
    // So the same bricks take a new volume, without `force`.
    s.options.clear();
    create(&mut c, s)
        .await
        .expect("the retry on the released bricks");
    // A brick that a live volume uses is never released.
    let live = net.nodes()[0].brick_root().join("half-0");
    let (code, msg) = code_and_message(
        c.brick_release(BrickReleaseRequest {
            path: live.display().to_string(),
            only_if_empty: false,
        })
        .await,
    );
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    assert!(live.exists());
}

/// glusterd can mark a node's new brick directory with the volume's id and then fail on a peer
/// (seen under real kubelets: "Staging failed on <peer>. Error: Host <node> not connected");
/// every retry then failed with "already part of a volume". The agent clears such a mark when
/// the volume does not exist, so the next attempt succeeds.
async fn a_brick_marked_by_a_failed_create_is_cleared(agents: &AgentSet, net: &GlusterNet) {
    let mut c = agents.client(0).await.unwrap();
    let path = net.nodes()[0].brick_root().join("marked-0");
    std::fs::create_dir_all(path.join(".glusterfs")).unwrap();
    let status = std::process::Command::new("setfattr")
        .args(["-n", "trusted.glusterfs.volume-id", "-v"])
        .arg("0x33aa7ea3954441629997d5dabefca900")
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let s = spec("marked", VolumeType::Replicate, bricks(net, "marked", 1));
    let (code, msg) = code_and_message(create(&mut c, s.clone()).await);
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    assert!(msg.contains("already part of a volume"), "{msg}");
    assert!(
        !path.exists(),
        "the mark of a volume that does not exist stayed"
    );
    let v = create(&mut c, s).await.expect("the retry");
    assert_eq!(v.status, "Started");

    // On a peer, the operator asks that node's agent to release what a failed create left
    // there: only a marked directory holding nothing is released; one holding data stays.
    let mut peer = agents.client(1).await.unwrap();
    let root = net.nodes()[1].brick_root();
    let (empty, kept) = (root.join("marked-peer-0"), root.join("marked-peer-1"));
    for dir in [&empty, &kept] {
        std::fs::create_dir_all(dir.join(".glusterfs")).unwrap();
        let status = std::process::Command::new("setfattr")
            .args(["-n", "trusted.glusterfs.volume-id", "-v"])
            .arg("0x44aa7ea3954441629997d5dabefca900")
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    std::fs::write(kept.join("data"), b"keep me").unwrap();
    for (dir, want) in [(&empty, true), (&kept, false)] {
        let released = peer
            .brick_release(BrickReleaseRequest {
                path: dir.display().to_string(),
                only_if_empty: true,
            })
            .await
            .unwrap()
            .into_inner()
            .released;
        assert_eq!(released, want, "{}", dir.display());
        assert_eq!(dir.exists(), !want, "{}", dir.display());
    }
    assert_eq!(std::fs::read(kept.join("data")).unwrap(), b"keep me");
}

/// A limit above the checked margin: below its soft limit a brick re-reads the usage once a
/// second, not on every write. A writer as fast as this machine allows still cannot store
/// more than the limit: the file on every brick ends at or below it, the write past it
/// fails with EDQUOT, and nothing is refused early (the writer gets past the soft limit).
async fn quota_fast_writer(c: &mut Client, net: &GlusterNet) {
    const LIMIT: u64 = 1 << 30;
    let soft = LIMIT * gk_agent::quota::soft_limit_percent(LIMIT) as u64 / 100;
    assert!(LIMIT - soft >= gk_agent::quota::CHECKED_MARGIN_BYTES);
    c.subdir_create(SubdirCreateRequest {
        volume: "r3".into(),
        path: "/pvc-fast".into(),
        limit_bytes: LIMIT,
    })
    .await
    .unwrap();
    let target = mount_of(net, "r3", Some("pvc-fast"), "pvc-fast").await;
    let started = Instant::now();
    let file = target.join("fill");
    let (synced, err) = tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::create(file).unwrap();
        let chunk = data(9, 1 << 20);
        let (mut written, mut synced) = (0u64, 0u64);
        let err = loop {
            // Synced every 64 MiB only: between syncs the writes stream as fast as they go.
            let r = f.write_all(&chunk).and_then(|_| {
                written += chunk.len() as u64;
                if written % (64 << 20) == 0 {
                    f.sync_data()?;
                    synced = written;
                }
                Ok(())
            });
            if let Err(e) = r {
                break e;
            }
            assert!(
                written <= 2 * LIMIT,
                "wrote {written} bytes past a 1 GiB quota"
            );
        };
        (synced, err)
    })
    .await
    .unwrap();
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(err.raw_os_error(), Some(nix::libc::EDQUOT), "{err}");
    assert!(
        synced > soft,
        "EDQUOT after only {synced} bytes synced: the limit refused writes below its soft \
         limit ({soft})"
    );
    mount::unmount(&target).unwrap();
    for n in net.nodes() {
        let on_brick = std::fs::metadata(n.brick_root().join("r3-0/pvc-fast/fill"))
            .unwrap()
            .len();
        assert!(
            on_brick <= LIMIT,
            "{}: the brick holds {on_brick} bytes of a file limited to {LIMIT}",
            n.address
        );
    }
    eprintln!(
        "quota: a 1 GiB limit refused the write past it after {:.0} MiB synced in {secs:.1} s \
         ({:.0} MB/s)",
        synced as f64 / (1u64 << 20) as f64,
        synced as f64 / secs / 1e6
    );
    // The delete answers once the directory is moved aside; its files go in the background.
    assert!(
        c.subdir_delete(SubdirDeleteRequest {
            volume: "r3".into(),
            path: "/pvc-fast".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .deleted
    );
    for n in net.nodes() {
        let dir = n.brick_root().join("r3-0/pvc-fast");
        assert!(
            !dir.exists(),
            "{} is still there after SubdirDelete",
            dir.display()
        );
    }
    let started = std::time::Instant::now();
    loop {
        let left: Vec<PathBuf> = net
            .nodes()
            .iter()
            .flat_map(|n| {
                std::fs::read_dir(n.brick_root().join("r3-0/.glusterkube-trash"))
                    .map(|d| d.map(|e| e.unwrap().path()).collect::<Vec<_>>())
                    .unwrap_or_default()
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the deleted PV is still in the trash: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!(
        "quota: the deleted PV's files were gone from every brick {:.1} s after SubdirDelete",
        started.elapsed().as_secs_f64()
    );
}

/// glusterd's quota list of `volume`, through the agent.
async fn glusterd_quota_list(c: &mut Client, volume: &str) -> Vec<QuotaEntry> {
    c.quota_list(VolumeRequest {
        name: volume.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .entries
}

async fn quota_subdirectory(c: &mut Client, net: &GlusterNet) {
    const LIMIT: u64 = 10 << 20;
    let req = SubdirCreateRequest {
        volume: "r3".into(),
        path: "/pvc-a".into(),
        limit_bytes: LIMIT,
    };
    c.subdir_create(req.clone()).await.unwrap();
    c.subdir_create(req.clone())
        .await
        .expect("the same subdirectory again");
    let (code, msg) = code_and_message(
        c.subdir_create(SubdirCreateRequest {
            limit_bytes: 2 * LIMIT,
            ..req.clone()
        })
        .await,
    );
    assert_eq!(code, Code::AlreadyExists, "{msg}");

    // Expansion raises the limit and never lowers it.
    let (code, msg) = code_and_message(
        c.subdir_expand(SubdirCreateRequest {
            limit_bytes: LIMIT / 2,
            ..req.clone()
        })
        .await,
    );
    assert_eq!(code, Code::FailedPrecondition, "{msg}");
    let (code, _) = code_and_message(
        c.subdir_expand(SubdirCreateRequest {
            path: "/pvc-none".into(),
            ..req.clone()
        })
        .await,
    );
    assert_eq!(code, Code::NotFound);

    let target = mount_of(net, "r3", Some("pvc-a"), "pvc-a").await;
    let st = nix::sys::statvfs::statvfs(&target).unwrap();
    let size = st.blocks() as u64 * st.fragment_size() as u64;
    assert_eq!(
        size, LIMIT,
        "df on the subdirectory mount shows {size} bytes, not the limit"
    );

    let mut written = 0u64;
    let err = {
        let mut f = std::fs::File::create(target.join("fill")).unwrap();
        let chunk = data(7, 1 << 20);
        loop {
            let r = f.write_all(&chunk).and_then(|_| f.sync_data());
            match r {
                Ok(()) => written += chunk.len() as u64,
                Err(e) => break e,
            }
            assert!(
                written <= 4 * LIMIT,
                "wrote {written} bytes past a {LIMIT}-byte quota"
            );
        }
    };
    assert_eq!(err.raw_os_error(), Some(nix::libc::EDQUOT), "{err}");
    eprintln!(
        "quota: EDQUOT after {} MiB on a 10 MiB limit",
        written >> 20
    );
    let listed = glusterd_quota_list(c, "r3").await;
    let entry = listed
        .iter()
        .find(|q| q.path == "/pvc-a")
        .expect("quota entry");
    assert!(
        entry.used_bytes > 0 && entry.hard_limit_bytes == LIMIT,
        "{entry:?}"
    );
    // The agent's own listing reads the same limit and usage from the directory.
    let own = c
        .subdir_list(VolumeRequest { name: "r3".into() })
        .await
        .unwrap()
        .into_inner()
        .entries;
    let mine = own
        .iter()
        .find(|q| q.path == "/pvc-a")
        .expect("subdir entry");
    assert_eq!(mine.hard_limit_bytes, LIMIT, "{mine:?}");
    assert!(
        mine.used_bytes >= written && mine.hard_limit_exceeded,
        "{mine:?} after writing {written} bytes"
    );

    // One directory's limit, read from the directory.
    let got = c
        .subdir_get(SubdirGetRequest {
            volume: "r3".into(),
            path: "/pvc-a".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.limit_bytes, LIMIT);
    let (code, _) = code_and_message(
        c.subdir_get(SubdirGetRequest {
            volume: "r3".into(),
            path: "/pvc-none".into(),
        })
        .await,
    );
    assert_eq!(code, Code::NotFound);

    // Online expansion: the mounted directory grows, and writing goes on.
    c.subdir_expand(SubdirCreateRequest {
        limit_bytes: 3 * LIMIT,
        ..req.clone()
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = nix::sys::statvfs::statvfs(&target).unwrap();
        if st.blocks() as u64 * st.fragment_size() as u64 == 3 * LIMIT {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "df never showed the expanded limit"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(target.join("fill"))
        .unwrap();
    f.write_all(&data(8, 1 << 20))
        .and_then(|_| f.sync_data())
        .expect("writing after expansion");
    drop(f);
    mount::unmount(&target).unwrap();

    let del = SubdirDeleteRequest {
        volume: "r3".into(),
        path: "/pvc-a".into(),
    };
    assert!(
        c.subdir_delete(del.clone())
            .await
            .unwrap()
            .into_inner()
            .deleted
    );
    assert!(
        !c.subdir_delete(del).await.unwrap().into_inner().deleted,
        "second delete"
    );
    let listed = glusterd_quota_list(c, "r3").await;
    assert!(!listed.iter().any(|q| q.path == "/pvc-a"), "{listed:?}");

    // A limit that is enforced but was never registered with glusterd (the agent stopped with
    // the registration queued) is registered when the agent next mounts the volume.
    let own = net.scratch_dir("lost-registration").unwrap();
    let log = net
        .scratch_dir("logs")
        .unwrap()
        .join("lost-registration.log");
    let source = MountSource {
        servers: vec![net.nodes()[0].address.clone()],
        volume: "r3".into(),
        subdir: None,
    };
    net.client_mounter()
        .mount_quota_client(&source, &own, &log)
        .await
        .unwrap();
    std::fs::create_dir(own.join("pvc-lost")).unwrap();
    gk_agent::quota::write_limit(&own.join("pvc-lost"), 5 << 20).unwrap();
    mount::unmount(&own).unwrap();
    // As after a restart: the agent (node 2's, behind `c`) has no mount of r3.
    mount::unmount(&net.scratch_dir("agent-mounts-n2").unwrap().join("r3")).unwrap();
    c.subdir_list(VolumeRequest { name: "r3".into() })
        .await
        .unwrap();
    // Registered in the background once the agent mounted the volume: wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let listed = glusterd_quota_list(c, "r3").await;
        if listed
            .iter()
            .any(|q| q.path == "/pvc-lost" && q.hard_limit_bytes == 5 << 20)
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lost limit was never registered: {listed:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    assert!(
        c.subdir_delete(SubdirDeleteRequest {
            volume: "r3".into(),
            path: "/pvc-lost".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .deleted
    );
}

/// Seed 001: 100 × 1 MiB files with one brick killed half way, then heal to zero.
async fn degraded_write_and_heal(c: &mut Client, net: &GlusterNet, volume: &str) {
    let target = net.scratch_dir(&format!("degraded-{volume}")).unwrap();
    let log = net
        .scratch_dir("logs")
        .unwrap()
        .join(format!("degraded-{volume}.log"));
    let source = MountSource {
        servers: net.nodes().iter().map(|n| n.address.clone()).collect(),
        volume: volume.into(),
        subdir: None,
    };
    let mounter = net.client_mounter();
    mounter.mount(&source, &target, &log, &[]).await.unwrap();
    let dir = target.join("seed001");
    std::fs::create_dir_all(&dir).unwrap();
    let mut sums = Vec::new();
    let mut write = |i: u64| {
        let bytes = data(1000 + i, 1 << 20);
        let path = dir.join(format!("f{i:03}"));
        std::fs::write(&path, &bytes).unwrap_or_else(|e| panic!("{volume}: writing {path:?}: {e}"));
        sums.push((path, format!("{:x}", Sha256::digest(&bytes))));
    };
    for i in 0..50 {
        write(i);
    }

    // Kill the brick process on node 3.
    let st = c
        .volume_status(VolumeRequest {
            name: volume.into(),
        })
        .await
        .unwrap()
        .into_inner();
    let victim = st
        .bricks
        .iter()
        .find(|b| b.brick.starts_with(&format!("{}:", net.nodes()[2].address)))
        .expect("a brick on node 3")
        .clone();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = c
            .volume_status(VolumeRequest {
                name: volume.into(),
            })
            .await
            .unwrap()
            .into_inner();
        if st
            .bricks
            .iter()
            .any(|b| b.brick == victim.brick && !b.online)
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{volume}: the killed brick still shows online"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Degraded: writing and reading go on without I/O errors.
    for i in 50..100 {
        write(i);
    }
    for (path, sum) in &sums {
        assert_eq!(&sha_file(path), sum, "{volume}: {path:?} while degraded");
    }
    let heal = c
        .heal_info(VolumeRequest {
            name: volume.into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        heal.pending_total > 0,
        "{volume}: nothing pending while a brick was down: {heal:?}"
    );
    eprintln!(
        "{volume}: {} entries pending heal while degraded",
        heal.pending_total
    );
    // The count status refreshes ask for answers with the summary while a brick is down.
    let counted = heal_count(c, volume).await;
    assert!(
        counted.pending_total > 0
            && counted
                .bricks
                .iter()
                .any(|b| b.brick == victim.brick && !b.connected),
        "{volume}: heal count while degraded: {counted:?}"
    );
    // The entries themselves, with their paths, on the two bricks that answer.
    let entries = c
        .heal_entries(HealEntriesRequest {
            name: volume.into(),
            limit: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(entries.bricks.len(), 3, "{entries:?}");
    for b in &entries.bricks {
        if b.brick == victim.brick {
            assert!(!b.connected && b.pending.is_empty(), "{b:?}");
            continue;
        }
        assert!(b.connected, "{b:?}");
        assert!(b.pending_count > 5 && b.pending.len() == 5, "{b:?}");
        assert!(
            b.pending.iter().any(|p| p.starts_with("/seed001")),
            "{volume}: the written files are named: {b:?}"
        );
        assert_eq!((b.split_brain_count, b.split_brain.len()), (0, 0));
    }

    // Bring the brick back, heal, and wait for zero pending.
    c.volume_start(VolumeStartRequest {
        name: volume.into(),
        force: true,
    })
    .await
    .unwrap();
    let started = Instant::now();
    loop {
        let heal = c
            .heal_start(VolumeRequest {
                name: volume.into(),
            })
            .await;
        let heal = match heal {
            Ok(h) => h.into_inner(),
            // Right after the restart the brick may not be connected to the heal daemon yet.
            Err(s) if s.code() == Code::FailedPrecondition => HealInfoResponse {
                pending_total: u64::MAX,
                ..Default::default()
            },
            Err(s) => panic!("{volume}: heal: {s}"),
        };
        if healed(&heal) {
            eprintln!("{volume}: healed in {:?}", started.elapsed());
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "{volume}: heal stuck: {heal:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The self-heal daemons' index count agrees once healed (it may lag a moment).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counted = heal_count(c, volume).await;
        if healed(&counted) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{volume}: heal count after the heal: {counted:?}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Every file intact through a fresh mount, and for replica 3 on the healed brick too.
    mount::unmount(&target).unwrap();
    mounter.mount(&source, &target, &log, &[]).await.unwrap();
    for (path, sum) in &sums {
        assert_eq!(&sha_file(path), sum, "{volume}: {path:?} after heal");
    }
    if volume == "r3" {
        let brick_dir = PathBuf::from(victim.brick.split_once(':').unwrap().1).join("seed001");
        for (path, sum) in &sums {
            let on_brick = brick_dir.join(path.file_name().unwrap());
            assert_eq!(&sha_file(&on_brick), sum, "healed brick copy {on_brick:?}");
        }
    }
    mount::unmount(&target).unwrap();
}

/// The brick of `volume` on the only node, as glusterd's status reports it.
async fn only_brick(c: &mut Client, volume: &str) -> BrickStatus {
    c.volume_status(VolumeRequest {
        name: volume.into(),
    })
    .await
    .unwrap()
    .into_inner()
    .bricks
    .remove(0)
}

/// A brick process that lives while glusterd reports its brick offline (seen with 25
/// volumes made at once on 2 cores: one that never finished fetching its volfile) survives
/// gluster's own `volume start force`, since its pid file names a live, locked process. The
/// agent's forced start kills it first, and the brick comes back.
#[tokio::test]
async fn a_hung_brick_process_is_replaced_by_the_agents_forced_start() {
    let net = GlusterNet::start(1).unwrap();
    let agents = AgentSet::start_hung_after(&net, Duration::from_secs(3))
        .await
        .unwrap();
    let mut c = agents.client(0).await.unwrap();
    let v = create(
        &mut c,
        spec("hung", VolumeType::Distribute, bricks(&net, "hung", 1)),
    )
    .await
    .unwrap();
    assert_eq!(v.status, "Started");
    let brick = only_brick(&mut c, "hung").await;
    assert!(brick.online, "{brick:?}");
    let args: Vec<String> = std::fs::read(format!("/proc/{}/cmdline", brick.pid))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(args.iter().any(|a| a == "--brick-name"), "{args:?}");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(brick.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while only_brick(&mut c, "hung").await.online {
        assert!(
            Instant::now() < deadline,
            "the killed brick still shows online"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A stand-in for the hung process: named glusterfsd, with the brick's arguments, holding
    // the brick's pid file locked with its own pid, and never reaching glusterd.
    let dir = net.scratch_dir("hung-brick").unwrap();
    let exe = dir.join("glusterfsd");
    let _ = std::fs::remove_file(&exe);
    std::os::unix::fs::symlink("/usr/bin/python3", &exe).unwrap();
    let script = "import fcntl, os, sys, time\n\
                  f = open(sys.argv[sys.argv.index('-p') + 1], 'r+')\n\
                  fcntl.lockf(f, fcntl.LOCK_EX)\n\
                  f.seek(0); f.truncate(); f.write('%d\\n' % os.getpid()); f.flush()\n\
                  time.sleep(600)\n";
    let hung = net
        .node_command(0, &exe)
        .arg("-c")
        .arg(script)
        .args(&args[1..])
        .spawn()
        .unwrap();
    let hung_pid = hung.id();
    // Reaped as soon as it ends, as a brick pod's init reaps its orphans: glusterd counts a
    // zombie's pid as running.
    let (ended_tx, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut hung = hung;
        let _ = ended_tx.send(hung.wait());
    });
    // Its pid file is in the node's namespace: read there.
    let pidfile = &args[args.iter().position(|a| a == "-p").unwrap() + 1];
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = net
            .node_command(0, Path::new("/bin/cat"))
            .arg(pidfile)
            .output()
            .unwrap();
        if String::from_utf8_lossy(&out.stdout).trim() == hung_pid.to_string() {
            break;
        }
        assert!(
            Instant::now() < deadline && ended.try_recv().is_err(),
            "the stand-in never wrote {pidfile}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // gluster's own forced start: the brick stays offline, the hung process lives.
    net.gluster(0).volume_start_force("hung").await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let after_gluster = only_brick(&mut c, "hung").await;
    assert!(
        !after_gluster.online && ended.try_recv().is_err(),
        "gluster's forced start replaced the hung process by itself: {after_gluster:?}"
    );

    // The agent's forced start (the stand-in is past the 3 s set here).
    c.volume_start(VolumeStartRequest {
        name: "hung".into(),
        force: true,
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let back = loop {
        let b = only_brick(&mut c, "hung").await;
        if b.online {
            break b;
        }
        assert!(
            Instant::now() < deadline,
            "the brick did not come back: {b:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let status = ended
        .recv_timeout(Duration::from_secs(10))
        .unwrap()
        .unwrap();
    assert!(!status.success(), "the hung process was killed: {status:?}");
    assert_ne!(back.pid, hung_pid, "a fresh brick process serves");
}
