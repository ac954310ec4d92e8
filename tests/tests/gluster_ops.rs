//! Day-two gluster operations against real glusterd on three "nodes" (network namespaces):
//! detaching and re-probing a peer; replica-3 and disperse 2+1 volumes with status, options,
//! stop and delete; a directory quota that makes writes fail with EDQUOT; self-heal after a
//! brick process is killed; add-brick with rebalance, remove-brick, and replace-brick with
//! heal. Every step goes through `gk_gluster::Gluster` and is checked against what gluster
//! and the brick filesystems really show.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gk_gluster::{
    nothing_to_heal, Brick, Gluster, GlusterError, ProcessRunner, RebalanceStatus, VolumeLayout,
    VolumeStatus,
};
use gk_mount::{self as mount, MountSource};
use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::test_data as data;

const MIB: usize = 1 << 20;
/// Linux's EDQUOT, "Disk quota exceeded".
const EDQUOT: i32 = 122;

/// Polls `probe` every half second until it returns `Ok`, and fails the test with the last
/// state it reported once `timeout` has passed.
async fn wait_for<T, Fut>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Fut) -> T
where
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(state) if Instant::now() > deadline => {
                panic!("{what}: not reached within {timeout:?}; last seen: {state}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

fn bricks(net: &GlusterNet, dir: &str) -> Vec<Brick> {
    net.nodes()
        .iter()
        .map(|n| Brick::new(&n.address, n.brick_root().join(dir).to_str().unwrap()).unwrap())
        .collect()
}

/// Checks what a started volume with three healthy bricks on 2 GiB XFS filesystems shows.
fn assert_healthy(status: &VolumeStatus, expected: &[Brick]) {
    let listed: Vec<&Brick> = status.bricks.iter().map(|b| &b.brick).collect();
    assert_eq!(listed, expected.iter().collect::<Vec<_>>(), "{status:#?}");
    for b in &status.bricks {
        assert!(b.online, "{b:?}");
        assert!(b.port.is_some_and(|p| p > 0), "{b:?}");
        let pid = b.pid.unwrap_or_else(|| panic!("no pid: {b:?}"));
        assert!(
            Path::new(&format!("/proc/{pid}")).exists(),
            "brick pid {pid} is not running"
        );
        let total = b.size_total.unwrap_or_else(|| panic!("no size: {b:?}"));
        assert!((1 << 30..=2 << 30).contains(&total), "{b:?}");
        let free = b.size_free.unwrap_or_else(|| panic!("no free size: {b:?}"));
        assert!(free > 0 && free <= total, "{b:?}");
        let inodes = b.inodes_total.unwrap_or_else(|| panic!("no inodes: {b:?}"));
        assert!(
            inodes > 0 && b.inodes_free.is_some_and(|f| f > 0 && f <= inodes),
            "{b:?}"
        );
        assert!(
            b.device
                .as_deref()
                .is_some_and(|d| d.starts_with("/dev/loop")),
            "{b:?}"
        );
        assert_eq!(b.fs_name.as_deref(), Some("xfs"), "{b:?}");
    }
    let shd: Vec<_> = status.self_heal_daemons().collect();
    assert_eq!(shd.len(), 3, "{status:#?}");
    assert!(shd.iter().all(|d| d.online && d.pid.is_some()), "{shd:?}");
}

fn command_message(err: GlusterError) -> String {
    match err {
        GlusterError::Command { message, .. } => message,
        other => panic!("expected gluster's refusal, got {other:?}"),
    }
}

async fn heal_until_done(g: &Gluster<ProcessRunner>) {
    // Right after a brick (re)starts, glusterd may still refuse ("Glusterd Syncop Mgmt brick
    // op 'Heal' failed") until the self-heal daemons have connected to it.
    wait_for("heal start accepted", Duration::from_secs(60), || async {
        g.heal_start("r3").await.map_err(|e| e.to_string())
    })
    .await;
    wait_for(
        "no entries left to heal",
        Duration::from_secs(120),
        || async {
            match g.heal_info_summary("r3").await {
                Ok(b) if gk_gluster::all_healed(&b) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// Waits until `brick` holds every file (written below `target`) with its bytes.
///
/// `heal info` reaching zero is not the end of it: in one CI run it showed nothing pending
/// right after a replace-brick while a file on the new brick still lacked its data, so the
/// test gives self-heal up to 60 s more, starting it again each round, and reports how long
/// it took beyond `heal info`.
async fn wait_healed_on(
    g: &Gluster<ProcessRunner>,
    brick: &Brick,
    target: &Path,
    files: &[(PathBuf, Vec<u8>)],
) {
    let started = Instant::now();
    wait_for(
        "every file on the brick",
        Duration::from_secs(60),
        || async {
            let missing: Vec<String> = files
                .iter()
                .filter(|(path, bytes)| {
                    let on_brick = Path::new(&brick.path).join(path.strip_prefix(target).unwrap());
                    std::fs::read(&on_brick).ok().as_ref() != Some(bytes)
                })
                .map(|(path, _)| path.display().to_string())
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            let _ = g.heal_start("r3").await;
            Err(format!(
                "{} not healed on {brick}: {missing:?}",
                missing.len()
            ))
        },
    )
    .await;
    if started.elapsed() > Duration::from_secs(1) {
        eprintln!(
            "{brick}: every file healed {:?} after heal info showed none pending",
            started.elapsed()
        );
    }
}

/// Writes files through the mount, each fsynced, and returns their names and contents.
fn write_files(dir: &Path, prefix: &str, n: u64, len: usize) -> Vec<(PathBuf, Vec<u8>)> {
    std::fs::create_dir_all(dir).unwrap();
    (0..n)
        .map(|i| {
            let path = dir.join(format!("{prefix}-{i:02}"));
            let bytes = data(i + len as u64, len);
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(&bytes)
                .and_then(|_| f.sync_all())
                .unwrap_or_else(|e| panic!("write {path:?}: {e}"));
            (path, bytes)
        })
        .collect()
}

/// Reads every file (written below `target`) back through a fresh read-only mount and
/// compares it.
///
/// A fresh client, because a client that was mounted across a rebalance can keep a
/// directory's old layout for a moment and then answer ENOENT for a file that has moved.
async fn assert_files(
    net: &GlusterNet,
    source: &MountSource,
    target: &Path,
    files: &[(PathBuf, Vec<u8>)],
) {
    let check = net.scratch_dir("mnt-check").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("check.log");
    net.client_mounter()
        .mount(source, &check, &log, &["ro".into()])
        .await
        .unwrap();
    for (path, bytes) in files {
        let path = check.join(path.strip_prefix(target).unwrap());
        let read = std::fs::read(&path).unwrap_or_else(|e| panic!("read {path:?}: {e}"));
        assert!(read == *bytes, "{path:?} differs");
    }
    mount::unmount(&check).unwrap();
}

/// The contents of `rel` on a brick when the brick holds the file's data, as opposed to
/// nothing or a DHT link file (mode `---------T`, empty, pointing to where the data is).
fn data_on_brick(brick: &Brick, rel: &Path) -> Option<Vec<u8>> {
    use std::os::unix::fs::PermissionsExt;
    let path = Path::new(&brick.path).join(rel);
    let meta = std::fs::symlink_metadata(&path).ok()?;
    let link_file = meta.permissions().mode() & 0o7777 == 0o1000 && meta.len() == 0;
    (meta.is_file() && !link_file).then(|| std::fs::read(&path).unwrap())
}

/// Checks on the bricks themselves that every file's data sits, intact, in exactly one of
/// the replica sets whose first bricks are `sets`; returns how many files each set holds.
fn assert_placed(sets: &[&Brick], target: &Path, files: &[(PathBuf, Vec<u8>)]) -> Vec<usize> {
    let mut held = vec![0; sets.len()];
    for (path, bytes) in files {
        let rel = path.strip_prefix(target).unwrap();
        let holders: Vec<usize> = (0..sets.len())
            .filter(|&i| match data_on_brick(sets[i], rel) {
                Some(data) => {
                    assert!(data == *bytes, "{rel:?} differs on {}", sets[i]);
                    true
                }
                None => false,
            })
            .collect();
        assert_eq!(holders.len(), 1, "{rel:?} has data in sets {holders:?}");
        held[holders[0]] += 1;
    }
    held
}

/// Polls a rebalance or remove-brick status until gluster reports it completed; a failure
/// or a timeout fails the test. Gluster 10.3's glusterd now and then keeps reporting a node
/// `in progress` after its process ended, its run time frozen (docs/day2.md; seen here once
/// in CI, at 1 s for 120 s): as the operator does, such a run is stopped and started again
/// (`restart`), once, after its run time stood still for 60 s.
async fn migration_done(
    what: &str,
    mut status: impl AsyncFnMut() -> Result<RebalanceStatus, GlusterError>,
    mut restart: impl AsyncFnMut(),
) -> RebalanceStatus {
    let mut deadline = Instant::now() + Duration::from_secs(120);
    let mut restarted = false;
    let mut still: std::collections::HashMap<String, (Duration, Instant)> = Default::default();
    loop {
        let last = status().await;
        match &last {
            Ok(s) if s.has_failed() => panic!("{what} failed: {s:#?}"),
            Ok(s) if s.is_completed() => return s.clone(),
            Ok(s) if !restarted => {
                let lost = s.nodes.iter().any(|n| {
                    let p = &n.progress;
                    if p.status != "in progress" {
                        return false;
                    }
                    let since = still
                        .entry(n.host.clone())
                        .and_modify(|(t, at)| {
                            if *t != p.run_time {
                                (*t, *at) = (p.run_time, Instant::now());
                            }
                        })
                        .or_insert((p.run_time, Instant::now()))
                        .1;
                    since.elapsed() > Duration::from_secs(60)
                });
                if lost {
                    eprintln!("{what}: a node's run time stood still for 60 s; restarting: {s:?}");
                    restart().await;
                    (restarted, deadline) = (true, Instant::now() + Duration::from_secs(120));
                    still.clear();
                }
            }
            _ => {}
        }
        if Instant::now() > deadline {
            panic!("{what} did not complete: {last:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn day_two_operations_on_real_glusterd() {
    let started = Instant::now();
    let net = GlusterNet::start(3).unwrap();
    net.form_pool().await.unwrap();
    let addrs: Vec<String> = net.nodes().iter().map(|n| n.address.clone()).collect();
    let g = net.gluster(0);

    // --- Peers: detach the third node, which forgets the pool too, then probe it back.
    g.peer_detach(&addrs[2]).await.unwrap();
    let peers = g.peer_status().await.unwrap();
    assert_eq!(
        peers
            .iter()
            .map(|p| p.hostname.as_str())
            .collect::<Vec<_>>(),
        [addrs[1].as_str()]
    );
    let third = net.gluster(2);
    wait_for(
        "the detached node forgets the pool",
        Duration::from_secs(30),
        || async {
            match third.peer_status().await {
                Ok(p) if p.is_empty() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    // Detaching it again is already done; detaching the answering node itself is refused.
    g.peer_detach(&addrs[2]).await.unwrap();
    let refused = command_message(g.peer_detach(&addrs[0]).await.unwrap_err());
    assert_eq!(refused, format!("{} is localhost", addrs[0]));
    g.peer_probe(&addrs[2]).await.unwrap();
    net.form_pool().await.unwrap();

    // --- Volumes: replica 3 and disperse 2+1, one brick per node on its XFS filesystem.
    let r3 = bricks(&net, "r3");
    let d21 = bricks(&net, "d21");
    g.volume_create("r3", VolumeLayout::Replicate { replica: 3 }, &r3, false)
        .await
        .unwrap();
    let disperse = VolumeLayout::Disperse {
        data: 2,
        redundancy: 1,
    };
    net.gluster(1)
        .volume_create("d21", disperse, &d21, false)
        .await
        .unwrap();
    g.volume_start("r3").await.unwrap();
    g.volume_start("r3").await.unwrap(); // already started: success
    g.volume_start("d21").await.unwrap();

    let mut names = g.volume_list().await.unwrap();
    names.sort();
    assert_eq!(names, ["d21", "r3"]);
    let all = net.gluster(2).volume_info_all().await.unwrap();
    let mut kinds: Vec<(String, String, bool)> = all
        .iter()
        .map(|v| (v.name.clone(), v.type_name.clone(), v.is_started()))
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("d21".into(), "Disperse".into(), true),
            ("r3".into(), "Replicate".into(), true)
        ]
    );

    assert_healthy(&g.volume_status("r3").await.unwrap(), &r3);
    assert_healthy(&net.gluster(2).volume_status("d21").await.unwrap(), &d21);

    // --- Options: set, read back, reset to the default; gluster's refusal arrives unchanged.
    let key = "performance.cache-size";
    g.volume_set("r3", key, "64MB").await.unwrap();
    assert_eq!(
        net.gluster(1)
            .volume_get("r3", key)
            .await
            .unwrap()
            .as_deref(),
        Some("64MB")
    );
    let info = g.volume_info("r3").await.unwrap().unwrap();
    assert_eq!(info.options.get(key).map(String::as_str), Some("64MB"));
    g.volume_reset("r3", key).await.unwrap();
    assert_eq!(
        g.volume_get("r3", key).await.unwrap().as_deref(),
        Some("32MB")
    );
    let refused = command_message(g.volume_set("r3", key, "banana").await.unwrap_err());
    assert_eq!(
        refused,
        "invalid number format \"banana\" in option \"cache-size\""
    );

    // --- Stop and delete the disperse volume; both are idempotent.
    g.volume_stop("d21", false).await.unwrap();
    assert!(!g.volume_info("d21").await.unwrap().unwrap().is_started());
    g.volume_stop("d21", false).await.unwrap();
    g.volume_delete("d21").await.unwrap();
    g.volume_delete("d21").await.unwrap();
    assert_eq!(g.volume_list().await.unwrap(), ["r3"]);
    assert_eq!(g.volume_info("d21").await.unwrap(), None);

    // --- Mount r3 from the client namespace.
    let target = net.scratch_dir("mnt-r3").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("r3.log");
    let source = MountSource {
        servers: addrs.clone(),
        volume: "r3".into(),
        subdir: None,
    };
    let mounter = net.client_mounter();
    mounter.mount(&source, &target, &log, &[]).await.unwrap();
    assert!(mount::is_mounted(&target).unwrap());
    // Gluster's own call counts (what the data-path bench's --fop-profile reads): every
    // brick of a replica receives each file's create and its writes.
    g.profile_start("r3").await.unwrap();
    g.profile_start("r3").await.unwrap(); // already counting: success
    g.profile_clear("r3").await.unwrap();
    let mut kept = write_files(&target.join("base"), "base", 30, 64 * 1024);
    let counted = g.profile_info("r3").await.unwrap();
    assert_eq!(counted.len(), 3, "{counted:?}");
    for b in &counted {
        let calls = |name: &str| b.fops.iter().find(|f| f.name == name).map(|f| f.calls);
        assert_eq!(calls("CREATE"), Some(30), "{}: {:?}", b.brick, b.fops);
        assert!(
            calls("WRITE").is_some_and(|n| n >= 30),
            "{}: {:?}",
            b.brick,
            b.fops
        );
        // Every fop counted was timed, but STAT: seen once, under load, 3 STATs at an
        // average of 0.0 ns right after a `profile clear` (cause not studied).
        assert!(
            b.fops.iter().all(|f| f.avg_latency_ns.is_finite()
                && (f.avg_latency_ns > 0.0 || (f.name == "STAT" && f.avg_latency_ns == 0.0))),
            "{:?}",
            b.fops
        );
    }
    g.profile_stop("r3").await.unwrap();
    g.profile_stop("r3").await.unwrap(); // not counting: success
    let e = g.profile_info("r3").await.unwrap_err().to_string();
    assert!(e.contains("not started"), "{e}");

    // --- Quota: 10 MiB on /pv1; writing 20 MiB fails with EDQUOT.
    std::fs::create_dir(target.join("pv1")).unwrap();
    g.quota_enable("r3").await.unwrap();
    g.quota_enable("r3").await.unwrap(); // already enabled: success
    g.quota_check_timeouts("r3", 0, 0).await.unwrap();
    assert_eq!(
        g.volume_get("r3", "features.hard-timeout")
            .await
            .unwrap()
            .as_deref(),
        Some("0")
    );
    let none = g.quota_list("r3").await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    g.quota_limit_usage("r3", "/pv1", 10 * MIB as u64, None)
        .await
        .unwrap();
    let chunk = data(7, MIB);
    let mut file = std::fs::File::create(target.join("pv1/fill")).unwrap();
    let mut written = 0;
    let mut failure = None;
    for _ in 0..20 {
        match file.write_all(&chunk).and_then(|_| file.sync_all()) {
            Ok(()) => written += 1,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
    }
    drop(file);
    let failure = failure.unwrap_or_else(|| panic!("20 MiB written under a 10 MiB quota"));
    assert_eq!(failure.raw_os_error(), Some(EDQUOT), "{failure}");
    // The limit holds at 10 MiB, give or take what was in flight when it was reached.
    assert!((8..=11).contains(&written), "{written} MiB written");
    let quotas = g.quota_list("r3").await.unwrap();
    assert_eq!(quotas.len(), 1, "{quotas:?}");
    let q = &quotas[0];
    assert_eq!(q.path, "/pv1");
    assert_eq!(q.hard_limit_bytes, 10 * MIB as u64);
    assert_eq!(q.soft_limit_percent, 80);
    assert!(q.used_bytes >= written * MIB as u64, "{q:?}");
    assert!(q.soft_limit_exceeded, "{q:?}");
    // The Database profile's options: a writer that never syncs, writing past the limit,
    // gets EDQUOT from a write, its fsync or its close, and never hangs (with trickling writes
    // off, gluster 10.3's write-behind held the next write for ever: docs/profiles.md).
    let db = gk_operator::plan::options(
        gk_api::crd::TuningProfile::Database,
        VolumeLayout::Replicate { replica: 3 },
        &Default::default(),
    );
    for (k, v) in &db {
        g.volume_set("r3", k, v).await.unwrap();
    }
    std::fs::create_dir(target.join("pv2")).unwrap();
    g.quota_limit_usage("r3", "/pv2", 10 * MIB as u64, None)
        .await
        .unwrap();
    let failure = gk_testenv::write_guarded(
        &target,
        target.join("pv2/fill"),
        data(8, MIB),
        30,
        Duration::from_secs(90),
        "a writer past its quota with the Database profile's options",
    )
    .expect_err("30 MiB written under a 10 MiB quota");
    assert_eq!(failure.raw_os_error(), Some(EDQUOT), "{failure}");
    g.quota_remove("r3", "/pv2").await.unwrap();
    std::fs::remove_dir_all(target.join("pv2")).unwrap();
    for k in db.keys() {
        g.volume_reset("r3", k).await.unwrap();
    }

    g.quota_remove("r3", "/pv1").await.unwrap();
    let none = g.quota_list("r3").await.unwrap();
    assert!(none.is_empty(), "{none:?}");
    g.quota_remove("r3", "/pv1").await.unwrap(); // no limit left: success
    std::fs::remove_file(target.join("pv1/fill")).unwrap();

    // --- Heal: kill the third brick, write, see pending entries, restart it, heal.
    let status = g.volume_status("r3").await.unwrap();
    let victim = status
        .bricks
        .iter()
        .find(|b| b.brick == r3[2])
        .unwrap_or_else(|| panic!("{status:#?}"));
    let pid = victim.pid.expect("the brick runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    wait_for(
        "gluster sees the brick offline",
        Duration::from_secs(30),
        || async {
            match g.volume_status("r3").await {
                Ok(s)
                    if s.bricks
                        .iter()
                        .any(|b| b.brick == r3[2] && !b.online && b.pid.is_none()) =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    // Two of three bricks keep quorum: writes go on without errors.
    let while_down = write_files(&target.join("while-down"), "d", 10, 256 * 1024);
    let heal = g.heal_info_summary("r3").await.unwrap();
    assert_eq!(heal.len(), 3, "{heal:?}");
    for b in &heal {
        if b.brick == r3[2] {
            assert!(!b.connected && b.pending.is_none(), "{b:?}");
        } else {
            assert!(b.connected && b.pending.is_some_and(|p| p > 0), "{b:?}");
        }
    }
    assert!(!Path::new(&r3[2].path).join("while-down/d-00").exists());
    // The self-heal daemons' index count (what status refreshes ask first) is never "nothing
    // to heal" now: the bricks that took the writes count entries, the killed one none.
    let c = g.heal_count("r3").await.unwrap();
    assert!(!nothing_to_heal(&c, &r3), "{c:?}");
    assert_eq!(c.len(), 3, "{c:?}");
    for b in &c {
        if b.brick == r3[2] {
            assert_eq!(b.entries, None, "the killed brick is not counted: {b:?}");
        } else {
            assert!(b.entries.is_some_and(|n| n > 0), "{b:?}");
        }
    }
    // glusterd takes a brick whose pid still has a /proc entry for running ("discovered
    // already-running brick") and then `start force` succeeds without starting it. A killed
    // brick stays a zombie until init reaps it, which this machine's init does lazily: wait
    // for that, and ask again should glusterd still have skipped the brick.
    wait_for(
        "the killed brick is reaped",
        Duration::from_secs(30),
        || async {
            match std::fs::File::open(format!("/proc/{pid}/cmdline")) {
                Ok(_) => Err(format!("/proc/{pid} still exists")),
                Err(_) => Ok(()),
            }
        },
    )
    .await;
    wait_for(
        "the brick is back online",
        Duration::from_secs(90),
        || async {
            g.volume_start_force("r3")
                .await
                .map_err(|e| e.to_string())?;
            let mut last = None;
            for _ in 0..10 {
                match g.volume_status("r3").await {
                    Ok(s) if s.bricks.iter().all(|b| b.online) => return Ok(()),
                    other => last = Some(other),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            eprintln!("brick not online 10 s after `volume start r3 force`: {last:?}");
            Err(format!("{last:?}"))
        },
    )
    .await;
    heal_until_done(&g).await;
    wait_healed_on(&g, &r3[2], &target, &while_down).await;
    kept.extend(while_down);
    wait_for(
        "the heal count is nothing to heal",
        Duration::from_secs(30),
        || async {
            match g.heal_count("r3").await {
                Ok(c) if nothing_to_heal(&c, &r3) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // --- Add a second replica set and rebalance onto it.
    let r3b = bricks(&net, "r3b");
    g.add_brick("r3", VolumeLayout::Replicate { replica: 3 }, &r3b, false)
        .await
        .unwrap();
    let info = g.volume_info("r3").await.unwrap().unwrap();
    assert_eq!(info.type_name, "Distributed-Replicate");
    assert_eq!(info.bricks.len(), 6);
    g.rebalance_start("r3").await.unwrap();
    let done = migration_done(
        "rebalance",
        async || g.rebalance_status("r3").await,
        async || {
            g.rebalance_stop("r3").await.unwrap();
            g.rebalance_start("r3").await.unwrap();
        },
    )
    .await;
    assert_eq!(done.nodes.len(), 3, "{done:#?}");
    assert_eq!(done.aggregate.failures, 0, "{done:#?}");
    assert!(done.aggregate.files > 0, "nothing moved: {done:#?}");
    assert!(done.aggregate.lookups >= 40, "{done:#?}");
    // Checked on the bricks, not through a mount: in about one run in five a node's
    // rebalance process moved files to the set the final layout does not name for them,
    // leaving no link file, and with lookup-optimize on (gluster's default) clients, fresh
    // mounts too, answered ENOENT for them. That is gluster's behaviour, not this crate's;
    // the operator settles it with check runs (docs/day2.md, "Settling a migration"). After
    // remove-brick below, every file is read back through a fresh mount.
    let held = assert_placed(&[&r3[0], &r3b[0]], &target, &kept);
    assert!(held[1] > 0, "no file moved to the new set: {held:?}");
    // Stopped (how the operator restarts a run a node lost track of), gluster forgets the
    // task; stopping it again is already done.
    g.rebalance_stop("r3").await.unwrap();
    let forgotten = g.rebalance_status("r3").await.unwrap_err();
    assert!(forgotten.to_string().contains("not started"), "{forgotten}");
    g.rebalance_stop("r3").await.unwrap();

    // --- Remove that set again: its data moves back before the commit.
    g.remove_brick_start("r3", &r3b).await.unwrap();
    let done = migration_done(
        "remove-brick",
        async || g.remove_brick_status("r3", &r3b).await,
        async || {
            g.remove_brick_stop("r3", &r3b).await.unwrap();
            g.remove_brick_start("r3", &r3b).await.unwrap();
        },
    )
    .await;
    assert_eq!(done.aggregate.failures, 0, "{done:#?}");
    assert!(done.aggregate.files > 0, "{done:#?}");
    // Stopped before the commit (how the operator runs a migration again that left files
    // behind), gluster forgets the task and keeps the bricks; a new start runs to the end.
    g.remove_brick_stop("r3", &r3b).await.unwrap();
    let forgotten = g.remove_brick_status("r3", &r3b).await.unwrap_err();
    assert!(forgotten.to_string().contains("not started"), "{forgotten}");
    assert_eq!(g.volume_info("r3").await.unwrap().unwrap().bricks.len(), 6);
    g.remove_brick_start("r3", &r3b).await.unwrap();
    let again = migration_done(
        "remove-brick again",
        async || g.remove_brick_status("r3", &r3b).await,
        async || {
            g.remove_brick_stop("r3", &r3b).await.unwrap();
            g.remove_brick_start("r3", &r3b).await.unwrap();
        },
    )
    .await;
    assert_eq!(again.aggregate.failures, 0, "{again:#?}");
    g.remove_brick_commit("r3", &r3b).await.unwrap();
    let info = g.volume_info("r3").await.unwrap().unwrap();
    assert_eq!(
        info.bricks.iter().map(|b| &b.brick).collect::<Vec<_>>(),
        r3.iter().collect::<Vec<_>>()
    );
    assert_eq!(assert_placed(&[&r3[0]], &target, &kept), [kept.len()]);
    assert_files(&net, &source, &target, &kept).await;

    // --- Replace the third brick by an empty one; heal fills it.
    let new = Brick::new(
        &addrs[2],
        net.nodes()[2].brick_root().join("r3-new").to_str().unwrap(),
    )
    .unwrap();
    g.replace_brick_commit_force("r3", &r3[2], &new)
        .await
        .unwrap();
    let info = g.volume_info("r3").await.unwrap().unwrap();
    assert_eq!(
        info.bricks.iter().map(|b| &b.brick).collect::<Vec<_>>(),
        [&r3[0], &r3[1], &new]
    );
    let refused = command_message(
        g.replace_brick_commit_force("r3", &r3[2], &new)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        refused,
        format!("brick: {} does not exist in volume: r3", r3[2])
    );
    heal_until_done(&g).await;
    wait_healed_on(&g, &new, &target, &kept).await;

    // --- Clean up through the API as well.
    mount::unmount(&target).unwrap();
    g.volume_stop("r3", false).await.unwrap();
    g.volume_delete("r3").await.unwrap();
    assert!(g.volume_list().await.unwrap().is_empty());
    assert!(g.volume_info_all().await.unwrap().is_empty());
    eprintln!("gluster_ops took {:?}", started.elapsed());
}
