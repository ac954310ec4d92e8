//! Day-two operations through the operator, against the real apiserver and controller-manager
//! and real glusterd behind the stand-in kubelet, with a FUSE client holding data throughout:
//! a replica-3 volume grows from 3 to 6 bricks with a rebalance and shrinks back with a
//! remove-brick migration; the brick image changes while a client writes and the pods restart
//! one at a time, each after heal; the PodDisruptionBudget refuses a second eviction; a dead
//! node's brick is replaced and healed; and deletion is refused while in use, then keeps the
//! data under Retain. A volume made by hand is adopted (a disagreeing spec refused), grown by
//! brickCount and released. Every file's content is checked after every step.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_api::crd::{GlusterCluster, GlusterVolume, MigrationPhase, ResizeOperation};
use gk_mount::{self as mount, MountSource};
use gk_operator::context::{BrickPods, Config};
use gk_operator::metrics::Metrics;
use gk_testenv::gluster_net::GlusterNet;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use kube::ResourceExt;
use serde_json::json;

mod support;
use support::{wait_for, wait_until};

type Files = Vec<(PathBuf, Vec<u8>)>;

fn condition(
    conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<(String, String, String)> {
    conds
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Ready, not Degraded, not Progressing, heal pending 0.
async fn volume_settled(api: &Api<GlusterVolume>, name: &str, secs: u64) -> GlusterVolume {
    wait_for(&format!("GlusterVolume {name} settled"), secs, async || {
        let v = api.get(name).await.map_err(|e| e.to_string())?;
        let s = v.status.as_ref().ok_or("no status")?;
        let is = |kind, want| condition(&s.conditions, kind).is_some_and(|c| c.0 == want);
        let ok = is("Ready", "True")
            && is("Degraded", "False")
            && is("Progressing", "False")
            && s.heal_pending == Some(0);
        if ok {
            return Ok(v);
        }
        Err(format!(
            "heal pending {:?}, conditions {:?}",
            s.heal_pending, s.conditions
        ))
    })
    .await
}

/// The status once a resize (`op`) of `name` completed with its bricks at `summary` (a
/// failed or refused one fails the test). A timeout names the last resize status and
/// conditions.
async fn resized_to(
    api: &Api<GlusterVolume>,
    name: &str,
    op: ResizeOperation,
    summary: &str,
) -> gk_api::crd::GlusterVolumeStatus {
    wait_for(
        &format!("{name}: {op:?} completed with bricks {summary}"),
        240,
        async || {
            let s = api
                .get(name)
                .await
                .map_err(|e| e.to_string())?
                .status
                .ok_or("no status")?;
            let seen = || {
                format!(
                    "resize {:?}, bricks {:?}, conditions {:?}",
                    s.resize, s.bricks_summary, s.conditions
                )
            };
            let r = s.resize.as_ref().ok_or_else(seen)?;
            assert!(
                !matches!(r.phase, MigrationPhase::Failed | MigrationPhase::Refused),
                "{}",
                seen()
            );
            let done = r.operation == op
                && r.phase == MigrationPhase::Completed
                && s.bricks_summary.as_deref() == Some(summary);
            if done {
                return Ok(s);
            }
            Err(seen())
        },
    )
    .await
}

/// Every brick of the volume online and nothing to heal, asked of gluster itself: a
/// GlusterVolume's status can still describe the moment before a pod restart.
async fn gluster_healthy(net: &GlusterNet, volume: &str) {
    wait_until(
        &format!("{volume}: all bricks online, heal 0"),
        180,
        async || {
            let g = net.gluster(0);
            let st = g.volume_status(volume).await.ok()?;
            let heal = g.heal_info_summary(volume).await.ok()?;
            (st.bricks.iter().all(|b| b.online) && gk_gluster::all_healed(&heal)).then_some(())
        },
    )
    .await
}

fn write_files(dir: &Path, prefix: &str, n: u64, len: usize) -> Files {
    std::fs::create_dir_all(dir).unwrap();
    (0..n)
        .map(|i| {
            let path = dir.join(format!("{prefix}-{i:03}"));
            let bytes = gk_testenv::test_data(i * 7919 + len as u64, len);
            let mut f = std::fs::File::create(&path).unwrap();
            f.write_all(&bytes)
                .and_then(|_| f.sync_all())
                .unwrap_or_else(|e| panic!("write {path:?}: {e}"));
            (path, bytes)
        })
        .collect()
}

/// Reads every file back through a fresh read-only mount and compares it. A file the mount
/// cannot find fails the test at once, after a note of what the bricks hold for it: gluster
/// 10.3's rebalance processes can leave files off the set their names hash to, and the
/// operator's check runs exist so that no client ever misses one after a resize.
async fn assert_files(net: &GlusterNet, source: &MountSource, root: &Path, files: &Files) {
    let bricks: Vec<String> = net
        .gluster(0)
        .volume_info(&source.volume)
        .await
        .unwrap()
        .map(|v| v.bricks.iter().map(|b| b.brick.path.clone()).collect())
        .unwrap_or_default();
    static CHECKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CHECKS.fetch_add(1, Ordering::SeqCst);
    let check = net.scratch_dir(&format!("day2-check-{n}")).unwrap();
    let log = net.scratch_dir("logs").unwrap().join("day2-check.log");
    net.client_mounter()
        .mount(source, &check, &log, &["ro".into()])
        .await
        .unwrap();
    for (path, bytes) in files {
        let rel = path.strip_prefix(root).unwrap();
        let path = check.join(rel);
        let read = std::fs::read(&path).unwrap_or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                diagnose(&bricks, rel, &path);
            }
            panic!("read {path:?}: {e}")
        });
        assert!(read == *bytes, "{path:?} differs");
    }
    // The client may still be finishing a release: give the unmount a moment.
    let mut tries = 0;
    while let Err(e) = mount::unmount(&check) {
        tries += 1;
        assert!(tries < 50, "unmounting {check:?}: {e}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The gluster commands run on `volume` on any node, in the order that node's glusterd
/// logged them (`cmd_history.log`), without time and result.
fn commands_on(net: &GlusterNet, volume: &str) -> Vec<String> {
    net.nodes()
        .iter()
        .map(|n| std::fs::read_to_string(n.log_dir().join("cmd_history.log")).unwrap_or_default())
        .filter(|h| h.contains(&format!("volume add-brick {volume} ")))
        .flat_map(|h| {
            h.lines()
                .filter_map(|l| l.split_once("]  : ").map(|(_, c)| c.to_string()))
                .filter(|c| c.contains(&format!(" {volume} ")) && c.ends_with(": SUCCESS"))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Lookups searched every set from before bricks were added until the resize settled:
/// `cluster.lookup-optimize` was set off before the add-brick and on again only after the
/// last rebalance run started, as the anchor node's command history shows.
fn assert_lookups_searched_every_set(net: &GlusterNet, volume: &str) {
    let cmds = commands_on(net, volume);
    let at = |what: &str| cmds.iter().position(|c| c.contains(what));
    let last = |what: &str| cmds.iter().rposition(|c| c.contains(what));
    let off = last("cluster.lookup-optimize off");
    let add = at("volume add-brick");
    let rebalanced = last(&format!("volume rebalance {volume} start"));
    let on = last("cluster.lookup-optimize on");
    assert!(
        off.is_some() && off < add && add < rebalanced && rebalanced < on,
        "off {off:?}, add-brick {add:?}, last rebalance {rebalanced:?}, on {on:?} in {cmds:#?}"
    );
}

/// What the bricks hold for a file a client cannot find: its mode, size and gluster xattrs on
/// every brick, the parent directory's layout, and whether listing the directory helps.
fn diagnose(bricks: &[String], rel: &Path, client_path: &Path) {
    eprintln!("day2: ENOENT for {}; on the bricks:", rel.display());
    for b in bricks {
        let on = Path::new(b).join(rel);
        let meta = std::fs::symlink_metadata(&on)
            .map(|m| {
                format!(
                    "mode {:o} size {}",
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions()),
                    m.len()
                )
            })
            .unwrap_or_else(|e| e.to_string());
        let x = |p: &Path| {
            std::process::Command::new("getfattr")
                .args(["-d", "-m", "trusted.glusterfs.dht", "-e", "hex"])
                .arg(p)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).replace('\n', " "))
                .unwrap_or_default()
        };
        eprintln!(
            "  {b}: {meta}; {} | dir {}",
            x(&on),
            x(&Path::new(b).join(rel.parent().unwrap()))
        );
    }
    let listed = std::fs::read_dir(client_path.parent().unwrap())
        .map(|d| d.flatten().any(|e| e.path() == client_path))
        .unwrap_or(false);
    eprintln!(
        "  listed by readdir: {listed}; readable after the listing: {}",
        std::fs::metadata(client_path).is_ok()
    );
}

/// Files whose data (not a DHT link file) is on `brick_path`.
fn files_with_data_on(brick_path: &Path, root: &Path, files: &Files) -> usize {
    files
        .iter()
        .filter(|(p, bytes)| {
            std::fs::read(brick_path.join(p.strip_prefix(root).unwrap())).is_ok_and(|b| b == *bytes)
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn day_two_operations_on_real_gluster() {
    let started = Instant::now();
    let support::OperatorEnv {
        cp,
        client,
        ns,
        net,
        kubelet,
        roles: _roles,
        operator: (operator_client, operator_calls),
        ..
    } = support::operator_env("gk-d2", 4).await;
    // An operator of its own: another one on this shared apiserver (a deployed one, say)
    // leaves objects of this instance alone.
    let instance = format!("day2-{}", std::process::id());
    let labels = json!({gk_api::names::INSTANCE_LABEL: instance});
    let config = Config {
        instance: Some(instance.clone()),
        brick_pods: BrickPods {
            image: "glusterkube/brick:test".into(),
            ..BrickPods::default()
        },
        refresh: Duration::from_secs(3),
        rollout_timeout: Duration::from_secs(240),
        namespace: ns.clone(),
        ..Config::default()
    };
    // The operator runs as the chart's ServiceAccount: node retirement below deletes a
    // StatefulSet, which the chart's role must allow.
    let operator = {
        let client = operator_client.clone();
        let metrics = Arc::new(Metrics::default());
        tokio::spawn(async move {
            gk_operator::run(client, config, metrics, std::future::pending()).await
        })
    };

    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), &ns);
    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), &ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let gc: GlusterCluster = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
        "metadata": {"name": "pool", "labels": labels},
        // Without TLS (the TLS path is the operator test's): only the first half of the test
        // subnet may mount, which holds the nodes (.1 to .4) and the default client (.100).
        "spec": {"nodes": (1..=4).map(|i| json!({"name": format!("storage-{i}"), "storage": {"directory": "/srv/gk"}})).collect::<Vec<_>>(),
                 "tls": {"enabled": false}, "clientNetworks": ["10.213.0.0/25"]}
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &gc).await.unwrap();
    wait_until("GlusterCluster Ready 4/4", 180, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        (condition(&s.conditions, "Ready")?.0 == "True").then_some(())
    })
    .await;
    let vol: GlusterVolume = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
        "metadata": {"name": "data", "labels": labels},
        "spec": {"cluster": "pool", "type": "Replicate", "replica": 3, "brickCount": 3},
    }))
    .unwrap();
    volumes.create(&PostParams::default(), &vol).await.unwrap();
    volume_settled(&volumes, "data", 180).await;
    let gname = format!("{ns}-data");
    // Asked afresh each time: a pod restart gives node 1 a new glusterd.
    let g = || net.gluster(0);
    eprintln!(
        "day2: cluster and volume ready after {:?}",
        started.elapsed()
    );

    // A client with data.
    let source = MountSource {
        servers: net.nodes().iter().map(|n| n.address.clone()).collect(),
        volume: gname.clone(),
        subdir: None,
    };
    let root = net.scratch_dir("day2-client").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("day2-client.log");
    net.client_mounter()
        .mount(&source, &root, &log, &[])
        .await
        .unwrap();
    let mut files = write_files(&root.join("base"), "f", 60, 128 * 1024);

    // Without TLS, only clientNetworks may mount: 10.213.0.0/25 admits the client above
    // (.100) and refuses one at .200.
    let info = net.gluster(0).volume_info(&gname).await.unwrap().unwrap();
    let allowed: Vec<&str> = info.options["auth.allow"].split(',').collect();
    assert_eq!(allowed.len(), 128, "{allowed:?}");
    assert!(allowed.contains(&"10.213.0.100") && !allowed.contains(&"10.213.0.200"));
    let outsider = net.add_client(200, None, false).unwrap();
    let outside = outsider.mount_dir("outside").unwrap();
    let log = outsider.log_file("outside");
    let refused = support::refusal(&outsider.mounter(), &source, &outside, &log, false).await;
    assert!(
        !refused.is_empty(),
        "a client outside clientNetworks mounted and wrote"
    );
    drop(outsider);

    // --- Adoption: a replica-3 volume made by hand with the gluster CLI on nodes 1-3, with
    // files, becomes managed without moving them; a spec that disagrees with it is refused
    // and changes nothing; raising brickCount grows it; deleting the GlusterVolume releases
    // it and the volume keeps running with its data.
    let seed = "seed-by-hand";
    g().volume_create(
        seed,
        gk_gluster::VolumeLayout::Replicate { replica: 3 },
        &net.bricks(seed)[..3],
        false,
    )
    .await
    .unwrap();
    g().volume_start(seed).await.unwrap();
    let seed_source = MountSource {
        volume: seed.into(),
        ..source.clone()
    };
    let seed_root = net.scratch_dir("seed-client").unwrap();
    let seed_log = net.scratch_dir("logs").unwrap().join("seed-client.log");
    net.client_mounter()
        .mount(&seed_source, &seed_root, &seed_log, &[])
        .await
        .unwrap();
    let seed_files = write_files(&seed_root.join("old"), "s", 40, 64 * 1024);
    let before = g().volume_info(seed).await.unwrap().unwrap();
    let adopt = |name: &str, extra: serde_json::Value| -> GlusterVolume {
        let mut spec = json!({"cluster": "pool", "type": "Replicate", "replica": 3,
                              "brickCount": 3, "existingVolume": seed});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": name, "labels": labels}, "spec": spec,
        }))
        .unwrap()
    };
    volumes
        .create(
            &PostParams::default(),
            &adopt("seed-wrong", json!({"replica": 2, "brickCount": 2})),
        )
        .await
        .unwrap();
    let why = wait_until("a disagreeing adoption refused", 60, async || {
        let s = volumes.get("seed-wrong").await.ok()?.status?;
        let (_, reason, msg) = condition(&s.conditions, "Ready")?;
        (reason == "InvalidSpec").then_some(msg)
    })
    .await;
    assert!(
        why.contains("spec.replica") && why.contains("replica 3"),
        "{why}"
    );
    volumes
        .delete("seed-wrong", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the refused adoption deleted", 60, async || {
        volumes
            .get_opt("seed-wrong")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let after = g().volume_info(seed).await.unwrap().unwrap();
    assert_eq!(
        (
            &after.id,
            &after.bricks,
            &after.options,
            after.status.as_str()
        ),
        (&before.id, &before.bricks, &before.options, "Started"),
        "a refused adoption (and its deletion) changed the volume"
    );
    volumes
        .create(&PostParams::default(), &adopt("seed", json!({})))
        .await
        .unwrap();
    let adopted = volume_settled(&volumes, "seed", 120).await;
    let st = adopted.status.clone().unwrap();
    assert_eq!(
        st.volume_id.as_deref(),
        Some(before.id.as_str()),
        "recreated"
    );
    assert_eq!(st.bricks_summary.as_deref(), Some("3/3"));
    assert_eq!(st.heal_pending, Some(0));
    assert_eq!(st.mount.as_ref().map(|m| m.volume.as_str()), Some(seed));
    assert_eq!(
        g().volume_info(seed).await.unwrap().unwrap().bricks,
        before.bricks,
        "adoption moved bricks"
    );
    assert_files(&net, &seed_source, &seed_root, &seed_files).await;
    eprintln!("day2: adopted {seed} after {:?}", started.elapsed());
    volumes
        .patch(
            "seed",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"brickCount": 6}})),
        )
        .await
        .unwrap();
    let grown = resized_to(&volumes, "seed", ResizeOperation::Expand, "6/6").await;
    assert_eq!(grown.resize.unwrap().failures, 0);
    let info = g().volume_info(seed).await.unwrap().unwrap();
    assert_eq!(
        (info.id.as_str(), info.bricks.len()),
        (before.id.as_str(), 6)
    );
    assert_files(&net, &seed_source, &seed_root, &seed_files).await;
    volumes
        .delete("seed", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("the adopted volume released", 60, async || {
        volumes.get_opt("seed").await.ok()?.is_none().then_some(())
    })
    .await;
    let released = g().volume_info(seed).await.unwrap().unwrap();
    assert_eq!(
        (
            released.id.as_str(),
            released.status.as_str(),
            released.bricks.len()
        ),
        (before.id.as_str(), "Started", 6),
        "releasing stopped or deleted the adopted volume"
    );
    assert_files(&net, &seed_source, &seed_root, &seed_files).await;
    eprintln!(
        "day2: adopted, grown and released {seed} after {:?}",
        started.elapsed()
    );
    // Gone by hand again, so the steps below see the cluster as before.
    mount::unmount(&seed_root).unwrap();
    g().volume_stop(seed, true).await.unwrap();
    g().volume_delete(seed).await.unwrap();

    // --- A size the disks cannot hold is refused naming spec.size. Each node's brick
    // filesystem holds 2 GiB, so 2300Mi of replica-3 data needs four bricks of their own
    // disk, in sets of 3: six bricks over four one-disk nodes would put two bricks on two
    // of the disks, which then hold both sets' copies and no more than 2 GiB in all.
    let patch = |v: serde_json::Value| Patch::Merge(v);
    volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"size": "2300Mi"}})),
        )
        .await
        .unwrap();
    let why = wait_until("a size past the disks refused", 60, async || {
        let s = volumes.get("data").await.ok()?.status?;
        let (_, reason, msg) = condition(&s.conditions, "Progressing")?;
        (reason == "ResizeRefused").then_some(msg)
    })
    .await;
    assert!(
        why.contains("spec.size") && why.contains("add disks or storage nodes"),
        "{why}"
    );
    assert_eq!(
        g().volume_info(&gname).await.unwrap().unwrap().bricks.len(),
        3,
        "a refused size changed the bricks"
    );

    // --- Expand 3 -> 6 bricks by count: add-brick of one whole set, then rebalance.
    volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"brickCount": 6, "size": null}})),
        )
        .await
        .unwrap();
    let expanded = resized_to(&volumes, "data", ResizeOperation::Expand, "6/6").await;
    let r = expanded.resize.clone().unwrap();
    eprintln!("day2: expanded after {:?}: {r:?}", started.elapsed());
    assert_eq!(r.failures, 0, "{r:?}");
    assert!(r.files_moved > 0, "rebalance moved nothing: {r:?}");
    // Settled: a check run that moved nothing ended it, and lookups are optimised again.
    assert!(r.checks >= 1, "no check run: {r:?}");
    assert_eq!(
        g().volume_get(&gname, "cluster.lookup-optimize")
            .await
            .unwrap()
            .as_deref(),
        Some("on")
    );
    assert_lookups_searched_every_set(&net, &gname);
    let info = g().volume_info(&gname).await.unwrap().unwrap();
    assert_eq!(info.type_name, "Distributed-Replicate");
    let new_set: Vec<&str> = info.bricks[3..]
        .iter()
        .map(|b| b.brick.host.as_str())
        .collect();
    // The new set spans the least loaded nodes: the empty fourth first.
    assert_eq!(
        new_set,
        [
            &net.nodes()[3].address,
            &net.nodes()[0].address,
            &net.nodes()[1].address
        ]
    );
    let moved = files_with_data_on(Path::new(&info.bricks[3].brick.path), &root, &files);
    assert!(moved > 0, "no file's data is on the new set");
    eprintln!(
        "day2: {moved} of {} files now live on the new set",
        files.len()
    );
    assert_files(&net, &source, &root, &files).await;
    volume_settled(&volumes, "data", 60).await;
    // A size the six bricks hold, beside the count: nothing changes.
    let generation = volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"size": "1Gi"}})),
        )
        .await
        .unwrap()
        .metadata
        .generation;
    wait_until("the size change observed", 60, async || {
        let s = volumes.get("data").await.ok()?.status?;
        (s.observed_generation >= generation).then_some(())
    })
    .await;
    let same = volume_settled(&volumes, "data", 60).await;
    let same = same.status.unwrap();
    assert_eq!(same.bricks_summary.as_deref(), Some("6/6"));
    assert_eq!(same.resize, expanded.resize, "a resize started");
    assert_eq!(
        g().volume_info(&gname).await.unwrap().unwrap().bricks.len(),
        6
    );

    // --- A shrink whose files cannot move: with `cluster.min-free-disk 99%` gluster finds
    // no brick with room and counts every file it should move off the leaving set as failed
    // (ENOSPC). The operator runs the migration three times, then reports it, quoting
    // gluster's rebalance log, and commits nothing.
    let generation = volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"options": {"cluster.min-free-disk": "99%"}}})),
        )
        .await
        .unwrap()
        .metadata
        .generation;
    wait_until("min-free-disk 99% set in gluster", 60, async || {
        let s = volumes.get("data").await.ok()?.status?;
        let set = g()
            .volume_get(&gname, "cluster.min-free-disk")
            .await
            .ok()??;
        (s.observed_generation >= generation && set.starts_with("99")).then_some(())
    })
    .await;
    volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"brickCount": 3}})),
        )
        .await
        .unwrap();
    let stuck = wait_for(
        "data: the shrink failed after its reruns",
        240,
        async || {
            let s = volumes
                .get("data")
                .await
                .map_err(|e| e.to_string())?
                .status
                .ok_or("no status")?;
            match &s.resize {
                Some(r)
                    if r.operation == ResizeOperation::Shrink
                        && r.phase == MigrationPhase::Failed =>
                {
                    Ok(r.clone())
                }
                r => Err(format!("resize {r:?}")),
            }
        },
    )
    .await;
    eprintln!(
        "day2: shrink refused after {:?}: {stuck:?}",
        started.elapsed()
    );
    assert_eq!(stuck.reruns, 2, "{stuck:?}");
    assert!(stuck.failures > 0, "{stuck:?}");
    let why = stuck.message.clone().unwrap_or_default();
    assert!(
        why.contains("the commit is refused")
            && why.contains("rebalance.log")
            && why.contains("No space left on device"),
        "{why}"
    );
    assert_eq!(
        g().volume_info(&gname).await.unwrap().unwrap().bricks.len(),
        6,
        "a failed shrink committed"
    );
    assert_files(&net, &source, &root, &files).await;
    // Room again (gluster's default): the changed spec starts the shrink anew.
    volumes
        .patch(
            "data",
            &PatchParams::default(),
            &patch(json!({"spec": {"options": {"cluster.min-free-disk": "10%"}}})),
        )
        .await
        .unwrap();
    wait_until("the shrink started anew", 60, async || {
        let r = volumes.get("data").await.ok()?.status?.resize?;
        (r.phase != MigrationPhase::Failed).then_some(())
    })
    .await;

    // --- Shrink 6 -> 3 (the count set above): remove-brick migrates the new set's files
    // back, then commits.
    let shrunk = resized_to(&volumes, "data", ResizeOperation::Shrink, "3/3").await;
    let r = shrunk.resize.clone().unwrap();
    eprintln!("day2: shrunk after {:?}: {r:?}", started.elapsed());
    assert!(
        r.files_moved > 0 && r.failures == 0 && r.skipped == 0,
        "{r:?}"
    );
    assert_eq!(
        shrunk.retired_bricks.len(),
        3,
        "{:?}",
        shrunk.retired_bricks
    );
    let info = g().volume_info(&gname).await.unwrap().unwrap();
    assert_eq!(info.bricks.len(), 3);
    assert_eq!(
        files_with_data_on(Path::new(&info.bricks[0].brick.path), &root, &files),
        files.len(),
        "after the shrink every file's data is back on the first set"
    );
    assert_files(&net, &source, &root, &files).await;
    volume_settled(&volumes, "data", 60).await;

    // --- Rolling upgrade of the brick image while a client writes.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let dir = root.join("during-upgrade");
        std::thread::spawn(move || {
            std::fs::create_dir_all(&dir).unwrap();
            let mut written: Files = Vec::new();
            let mut errors = Vec::new();
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let path = dir.join(format!("w-{i:04}"));
                let bytes = gk_testenv::test_data(1_000_000 + i, 64 * 1024);
                let r = std::fs::File::create(&path)
                    .and_then(|mut f| f.write_all(&bytes).and_then(|_| f.sync_all()));
                match r {
                    Ok(()) => written.push((path, bytes)),
                    Err(e) => errors.push(format!("{path:?}: {e}")),
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            (written, errors)
        })
    };
    let events_before = kubelet.events().len();
    let upgrade_started = Instant::now();
    clusters
        .patch(
            "pool",
            &PatchParams::default(),
            &patch(json!({"spec": {"image": "glusterkube/brick:test-2"}})),
        )
        .await
        .unwrap();
    // What the rollout waited for between restarts, for the log.
    let mut waits: Vec<String> = Vec::new();
    wait_until(
        "every brick pod restarted on the new image",
        600,
        async || {
            let s = clusters.get("pool").await.ok()?.status?;
            let r = s.rollout.clone()?;
            if let Some(w) = &r.waiting_for {
                if waits.last() != Some(w) {
                    waits.push(w.clone());
                }
            }
            if let Some((st, reason, msg)) = condition(&s.conditions, "Degraded") {
                assert!(
                    !(st == "True" && reason == "RolloutStalled"),
                    "rollout stalled: {msg}"
                );
            }
            let restarted = kubelet.events()[events_before..]
                .iter()
                .filter(|e| e.started)
                .count();
            (r.updated == 4 && r.total == 4 && r.waiting_for.is_none() && restarted >= 4)
                .then_some(())
        },
    )
    .await;
    eprintln!("day2: the rollout waited for: {waits:?}");
    let all_pods = pods.list(&Default::default()).await.unwrap().items;
    for p in &all_pods {
        let image = p.spec.as_ref().unwrap().containers[0].image.clone();
        assert_eq!(
            image.as_deref(),
            Some("glusterkube/brick:test-2"),
            "{}",
            p.name_any()
        );
    }
    // One pod at a time: no node stopped while another was down.
    let events = kubelet.events()[events_before..].to_vec();
    let mut down: Vec<String> = Vec::new();
    for e in &events {
        if e.started {
            down.retain(|n| n != &e.node);
        } else {
            assert!(
                down.is_empty(),
                "{} stopped while {down:?} was down: {events:?}",
                e.node
            );
            down.push(e.node.clone());
        }
    }
    assert_eq!(
        events.iter().filter(|e| !e.started).count(),
        4,
        "{events:?}"
    );
    eprintln!(
        "day2: rolling upgrade took {:?}: {:?}",
        upgrade_started.elapsed(),
        events
            .iter()
            .map(|e| format!(
                "{} {} at +{:.1}s",
                e.node,
                if e.started { "up" } else { "down" },
                e.at.duration_since(upgrade_started).as_secs_f64()
            ))
            .collect::<Vec<_>>()
    );
    let ev_api: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let restarts = ev_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("RestartingBrickPod"))
        // The recorder folds repeats of one reason into a series.
        .map(|e| e.series.map_or(1, |s| s.count))
        .sum::<i32>();
    assert!(restarts >= 4, "{restarts} RestartingBrickPod events");
    stop.store(true, Ordering::SeqCst);
    let (written, errors) = writer.join().unwrap();
    assert!(
        errors.is_empty(),
        "client I/O errors during the upgrade: {errors:?}"
    );
    assert!(
        written.len() > 20,
        "only {} writes during the upgrade",
        written.len()
    );
    eprintln!(
        "day2: {} files written during the upgrade, no errors",
        written.len()
    );
    files.extend(written);
    volume_settled(&volumes, "data", 120).await;
    assert_files(&net, &source, &root, &files).await;

    // --- The PodDisruptionBudget: a drain may evict one brick pod while all are healthy.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    let pdb_allows = async |n: i32, secs: u64| {
        wait_until(
            &format!("the PDB to allow {n} disruption(s)"),
            secs,
            async || {
                let s = pdbs.get("pool-bricks").await.ok()?.status?;
                (s.disruptions_allowed == Some(n)).then_some(())
            },
        )
        .await
    };
    // 180 s, as after the eviction below: once in CI at 1ad0c4c the disruption controller
    // had not allowed one within 60 s of the rollout's end (a rerun passed; why is not known).
    let pdb_wait = std::time::Instant::now();
    pdb_allows(1, 180).await;
    eprintln!(
        "day2: the PDB allowed a disruption {:?} after the rollout settled",
        pdb_wait.elapsed()
    );
    let events_before = kubelet.events().len();
    pods.evict("pool-storage-1-0", &EvictParams::default())
        .await
        .unwrap();
    wait_until("the evicted pod's processes restarted", 120, async || {
        kubelet.events()[events_before..]
            .iter()
            .any(|e| e.started && e.node == "storage-1")
            .then_some(())
    })
    .await;
    gluster_healthy(&net, &gname).await;
    wait_until("the evicted pod is back", 120, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        (s.nodes_summary.as_deref() == Some("4/4")).then_some(())
    })
    .await;
    volume_settled(&volumes, "data", 120).await;
    // The disruption controller counts a pod it let evict as disrupted until it sees the pod
    // deleted or two minutes pass (its DeletionTimeout), and it keys that record by name: the
    // StatefulSet's new pod of the same name can count as disrupted until then.
    pdb_allows(1, 180).await;

    // --- A node dies; its brick is replaced on another node and healed.
    let before = g().volume_info(&gname).await.unwrap().unwrap();
    let old = before
        .bricks
        .iter()
        .find(|b| b.brick.host == net.nodes()[2].address)
        .expect("a brick on storage-3")
        .brick
        .clone();
    gluster_healthy(&net, &gname).await;
    // The long-lived client must be connected to the restarted brick again before a second
    // node dies, or it has one brick of three and loses quorum: a write it makes now has to
    // land on all three bricks. (The servers' view above says nothing about this client.)
    let set: Vec<String> = g()
        .volume_info(&gname)
        .await
        .unwrap()
        .unwrap()
        .bricks
        .iter()
        .map(|b| b.brick.path.clone())
        .collect();
    let mut probe_n = 0;
    wait_until("the client connected to every brick", 120, async || {
        probe_n += 1;
        let name = format!("probe-{probe_n}");
        std::fs::write(root.join(&name), b"probe").ok()?;
        let everywhere = set
            .iter()
            .all(|b| std::fs::read(Path::new(b).join(&name)).is_ok_and(|c| c == b"probe"));
        everywhere.then_some(())
    })
    .await;
    eprintln!("day2: killing storage-3 at {:?}", started.elapsed());
    kubelet.kill_node("storage-3");
    wait_until("data Degraded with 2/3 bricks", 90, async || {
        let s = volumes.get("data").await.ok()?.status?;
        let d = condition(&s.conditions, "Degraded")?;
        (d.0 == "True" && d.1 == "BricksOffline" && s.bricks_summary.as_deref() == Some("2/3"))
            .then_some(())
    })
    .await;
    // With one brick pod down, a drain cannot take a second one.
    eprintln!("day2: storage-3 offline at {:?}", started.elapsed());
    pdb_allows(0, 60).await;
    eprintln!("day2: PDB allows 0 at {:?}", started.elapsed());
    // One request through kubectl: kube's client would retry the 429 for minutes.
    let path = format!("/api/v1/namespaces/{ns}/pods/pool-storage-1-0/eviction");
    let body = net.scratch_dir("day2-evict").unwrap().join("eviction.json");
    std::fs::write(
        &body,
        json!({"apiVersion": "policy/v1", "kind": "Eviction",
               "metadata": {"name": "pool-storage-1-0", "namespace": ns}})
        .to_string(),
    )
    .unwrap();
    match cp.kubectl(&["create", "--raw", &path, "-f", body.to_str().unwrap()]) {
        Err(e) => assert!(
            e.to_string().contains("disruption budget"),
            "unexpected refusal: {e}"
        ),
        Ok(out) => panic!("an eviction with a brick pod down was granted: {out}"),
    }
    eprintln!("day2: writing while degraded at {:?}", started.elapsed());
    files.extend(write_files(&root.join("degraded"), "d", 20, 64 * 1024));
    eprintln!("day2: replacing at {:?}", started.elapsed());
    clusters
        .patch(
            "pool",
            &PatchParams::default(),
            &patch(json!({"spec": {"replacements": [{"node": "storage-3", "replacement": "storage-4"}]}})),
        )
        .await
        .unwrap();
    let healed = volume_settled(&volumes, "data", 240).await.status.unwrap();
    assert_eq!(healed.bricks_summary.as_deref(), Some("3/3"));
    let new = healed
        .bricks
        .iter()
        .find(|b| b.node == "storage-4")
        .expect("a brick on storage-4")
        .clone();
    assert!(
        healed.retired_bricks.contains(&old.to_string()),
        "{healed:?}"
    );
    let on_new = files_with_data_on(Path::new(&new.path), &root, &files);
    assert_eq!(on_new, files.len(), "the new brick is not fully healed");
    // The dead node's brick was left alone.
    assert!(
        files_with_data_on(Path::new(&old.path), &root, &files) > 0,
        "the replaced brick's data is gone"
    );
    let brick_events: Vec<String> = ev_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("BrickReplaced"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(brick_events.len(), 1, "{brick_events:?}");
    assert_files(&net, &source, &root, &files).await;
    eprintln!(
        "day2: brick replaced and healed after {:?}",
        started.elapsed()
    );
    // --- The dead storage-3 leaves: removed from spec.nodes, it stays while
    // spec.replacements still lists it, then is detached from the trusted pool by force (it
    // does not answer) and its StatefulSet goes. Gluster refuses to delete volumes while a
    // peer is down, so the deletion below needs this.
    let sts: Api<k8s_openapi::api::apps::v1::StatefulSet> = Api::namespaced(client.clone(), &ns);
    let three = net.nodes()[2].address.clone();
    let nodes: Vec<serde_json::Value> = [1, 2, 4]
        .iter()
        .map(|i| json!({"name": format!("storage-{i}"), "storage": {"directory": "/srv/gk"}}))
        .collect();
    clusters
        .patch(
            "pool",
            &PatchParams::default(),
            &patch(json!({"spec": {"nodes": nodes}})),
        )
        .await
        .unwrap();
    let why = wait_until("storage-3 held by its replacement entry", 60, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        let (_, reason, msg) = condition(&s.conditions, "Progressing")?;
        (reason == "RetiringNodes").then_some(msg)
    })
    .await;
    assert!(
        why.contains("storage-3") && why.contains("spec.replacements"),
        "{why}"
    );
    assert!(sts.get_opt("pool-storage-3").await.unwrap().is_some());
    assert!(g()
        .peer_status()
        .await
        .unwrap()
        .iter()
        .any(|p| p.hostname == three));
    clusters
        .patch(
            "pool",
            &PatchParams::default(),
            &patch(json!({"spec": {"replacements": null}})),
        )
        .await
        .unwrap();
    wait_until(
        "storage-3 out of the pool and its StatefulSet gone",
        120,
        async || {
            let peers = g().peer_status().await.ok()?;
            let gone = sts.get_opt("pool-storage-3").await.ok()?.is_none();
            (gone && peers.len() == 2 && !peers.iter().any(|p| p.hostname == three)).then_some(())
        },
    )
    .await;
    wait_until("the pool Ready 3/3 and Stable", 60, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        let stable = condition(&s.conditions, "Progressing")?.1 == "Stable";
        (s.nodes_summary.as_deref() == Some("3/3") && stable).then_some(())
    })
    .await;
    let retired: Vec<String> = ev_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NodeRetired"))
        .filter_map(|e| e.note)
        .collect();
    assert_eq!(retired.len(), 1, "{retired:?}");
    assert!(
        retired[0].contains("storage-3") && retired[0].contains("by force"),
        "{retired:?}"
    );
    assert_files(&net, &source, &root, &files).await;
    eprintln!("day2: storage-3 retired after {:?}", started.elapsed());

    // --- Deletion: refused while in use, then Retain keeps the data.
    mount::unmount(&root).unwrap();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv_name = format!("{ns}-pv");
    pvs.create(&PostParams::default(), &support::pv_using(&pv_name, &gname))
        .await
        .unwrap();
    clusters
        .delete("pool", &DeleteParams::default())
        .await
        .unwrap();
    let held = wait_until("cluster deletion held", 60, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        let (_, reason, msg) = condition(&s.conditions, "Ready")?;
        (reason == "DeletionBlocked").then_some(msg)
    })
    .await;
    assert!(held.contains("data"), "{held}");
    volumes
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let blocked = wait_until("volume deletion held", 60, async || {
        let s = volumes.get("data").await.ok()?.status?;
        let (_, reason, msg) = condition(&s.conditions, "Ready")?;
        (reason == "DeletionBlocked").then_some(msg)
    })
    .await;
    assert!(blocked.contains(&pv_name), "{blocked}");
    assert!(g().volume_info(&gname).await.unwrap().is_some());
    let warnings: Vec<String> = ev_api
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("DeletionBlocked"))
        .filter_map(|e| e.regarding.and_then(|r| r.name))
        .collect();
    assert!(
        warnings.contains(&"pool".to_string()) && warnings.contains(&"data".to_string()),
        "{warnings:?}"
    );
    pvs.delete(&pv_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_until("volume deleted", 120, async || {
        volumes.get_opt("data").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(g().volume_info(&gname).await.unwrap().is_none());
    // Retain: every file's data is still in the bricks' directories.
    let kept = files_with_data_on(Path::new(&new.path), &root, &files);
    assert_eq!(kept, files.len(), "Retain lost data on {}", new.path);
    wait_until("cluster deleted", 60, async || {
        clusters.get_opt("pool").await.ok()?.is_none().then_some(())
    })
    .await;
    operator.abort();
    support::none_forbidden("the operator", &operator_calls);
    drop(kubelet);
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns_api.delete(&ns, &DeleteParams::default()).await;
    eprintln!("day2: took {:?}", started.elapsed());
}
