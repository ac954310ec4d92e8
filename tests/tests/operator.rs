//! The operator against the real apiserver and controller-manager and real glusterd: a
//! 3-node GlusterCluster becomes Ready, volumes of each type become Ready with the profile
//! applied, a killed brick shows as Degraded 2/3 and heals back, an operator killed in the
//! middle of a create converges without duplicates, and deletion waits for PersistentVolumes.
//! Gluster's TLS is on (the default): the volumes carry the access options, a CSI node plugin
//! with the operator's client certificate stages and publishes a PV, and clients without a
//! certificate, with one from another CA, or with a trusted one under another name are refused.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use csi_proto::v1 as csi;
use gk_operator::context::{BrickPods, Config};
use gk_operator::crd::{GlusterCluster, GlusterVolume};
use gk_operator::metrics::Metrics;
use gk_testenv::gluster_net::{GlusterNet, TlsFiles};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, PostParams};
use kube::ResourceExt;
use serde_json::json;
use tokio::task::JoinHandle;

mod support;
use support::wait_until;

/// This test's operator instance: another operator on the shared apiserver (a deployed one,
/// say) leaves its objects alone, and it leaves theirs.
fn instance() -> String {
    format!("op-{}", std::process::id())
}

fn start_operator(client: &kube::Client, ns: &str, metrics: Arc<Metrics>) -> JoinHandle<()> {
    let config = Config {
        instance: Some(instance()),
        brick_pods: BrickPods {
            image: "glusterkube/brick:test".into(),
            ..BrickPods::default()
        },
        refresh: Duration::from_secs(3),
        namespace: ns.to_string(),
        ..Config::default()
    };
    let client = client.clone();
    tokio::spawn(
        async move { gk_operator::run(client, config, metrics, std::future::pending()).await },
    )
}

fn condition(
    conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    t: &str,
) -> Option<(String, String)> {
    conds
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

async fn volume_ready(api: &Api<GlusterVolume>, name: &str) -> GlusterVolume {
    let seen = std::sync::Mutex::new(None);
    let what = format!("GlusterVolume {name} Ready");
    let wait = wait_until(&what, 180, async || {
        let v = api.get(name).await.ok()?;
        *seen.lock().unwrap() = v.status.clone();
        let s = v.status.as_ref()?;
        let ready = condition(&s.conditions, "Ready")?.0 == "True";
        let healthy = condition(&s.conditions, "Degraded")?.0 == "False";
        (ready && healthy).then_some(v)
    });
    // On a timeout, the last status says which step the volume was stuck at.
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(wait).catch_unwind().await {
        Ok(v) => v,
        Err(p) => {
            eprintln!(
                "GlusterVolume {name} last status: {:#?}",
                seen.lock().unwrap()
            );
            std::panic::resume_unwind(p)
        }
    }
}

fn volume(name: &str, spec: serde_json::Value) -> GlusterVolume {
    serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
        "metadata": {"name": name, "labels": {gk_api::names::INSTANCE_LABEL: instance()}},
        "spec": spec,
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn operator_reconciles_clusters_and_volumes_on_real_gluster() {
    let support::OperatorEnv {
        client,
        ns,
        net,
        kubelet: _kubelet,
        roles: _roles,
        operator: (operator_client, operator_calls),
        csi_controller: (csi_client, csi_calls),
        ..
    } = support::operator_env("gk-op", 3).await;
    let metrics = Arc::new(Metrics::default());
    // The operator runs as the chart's ServiceAccount, under the chart's role.
    let mut operator = start_operator(&operator_client, &ns, metrics.clone());

    // A 3-node cluster.
    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), &ns);
    let gc: GlusterCluster = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
        "metadata": {"name": "pool", "labels": {gk_api::names::INSTANCE_LABEL: instance()}},
        "spec": {"nodes": [
            {"name": "storage-1", "storage": {"directory": "/srv/glusterkube"}},
            {"name": "storage-2", "storage": {"directory": "/srv/glusterkube"}},
            {"name": "storage-3", "storage": {"device": "/dev/disk/by-id/gk-test"}},
        ]}
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &gc).await.unwrap();
    let ready = wait_until("GlusterCluster Ready", 180, async || {
        let c = clusters.get("pool").await.ok()?;
        let s = c.status.clone()?;
        (condition(&s.conditions, "Ready")?.0 == "True").then_some(s)
    })
    .await;
    assert_eq!(ready.nodes_summary.as_deref(), Some("3/3"));
    assert_eq!(ready.peers.len(), 3);
    assert!(ready.peers.iter().all(|p| p.connected), "{:?}", ready.peers);
    let sts: Api<StatefulSet> = Api::namespaced(client.clone(), &ns);
    for node in ["storage-1", "storage-2", "storage-3"] {
        let s = sts.get(&format!("pool-{node}")).await.unwrap();
        assert_eq!(s.owner_references()[0].name, "pool");
    }
    let pdb: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    pdb.get("pool-bricks").await.unwrap();
    for i in 0..3 {
        let peers = net.gluster(i).peer_status().await.unwrap();
        assert_eq!(
            peers.iter().filter(|p| p.connected).count(),
            2,
            "node {i}: {peers:?}"
        );
    }

    errors_reach_status(&client, &ns).await;

    // Volumes of each type.
    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), &ns);
    let specs = [
        (
            "r3",
            json!({"cluster": "pool", "type": "Replicate", "replica": 3, "brickCount": 3}),
        ),
        (
            "arb",
            json!({"cluster": "pool", "type": "Arbiter", "brickCount": 3}),
        ),
        (
            "ec",
            json!({"cluster": "pool", "type": "Disperse", "disperse": {"data": 2, "redundancy": 1}, "brickCount": 3, "options": {"performance.cache-size": "64MB"}}),
        ),
    ];
    // As a create that failed on one peer leaves them (seen under real kubelets, with a
    // brick pod just restarted): r3's brick directories on the other two nodes already
    // marked for a volume that does not exist. The first create fails "already part of a
    // volume"; the operator has each node's agent release such empty marks, and the retry
    // succeeds.
    for node in &net.nodes()[1..] {
        for i in 0..3 {
            let dir = node.brick_root().join(format!("{ns}-r3-{i}"));
            std::fs::create_dir_all(dir.join(".glusterfs")).unwrap();
            let status = std::process::Command::new("setfattr")
                .args(["-n", "trusted.glusterfs.volume-id", "-v"])
                .arg("0x55aa7ea3954441629997d5dabefca900")
                .arg(&dir)
                .status()
                .unwrap();
            assert!(status.success());
        }
    }
    for (name, spec) in &specs[..2] {
        volumes
            .create(&PostParams::default(), &volume(name, spec.clone()))
            .await
            .unwrap();
    }
    // r3's bricks on those nodes are the paths that were marked, now marked with r3's id.
    let r3 = volume_ready(&volumes, "r3").await;
    let marked: Vec<String> = r3
        .status
        .as_ref()
        .unwrap()
        .bricks
        .iter()
        .filter(|b| net.nodes()[1..].iter().any(|n| b.host == n.address))
        .map(|b| b.path.clone())
        .collect();
    assert_eq!(marked.len(), 2, "{:?}", r3.status);
    for path in &marked {
        let out = std::process::Command::new("getfattr")
            .args(["-e", "hex", "-n", "trusted.glusterfs.volume-id"])
            .arg(path)
            .output()
            .unwrap();
        let id = String::from_utf8_lossy(&out.stdout);
        assert!(path.contains(&format!("{ns}-r3-")), "{path}");
        assert!(
            !id.contains("55aa7ea3"),
            "{path} kept the failed create's mark: {id}"
        );
    }
    for (name, _) in &specs[..2] {
        let v = volume_ready(&volumes, name).await;
        let s = v.status.unwrap();
        assert_eq!(s.bricks_summary.as_deref(), Some("3/3"), "{name}");
        assert_eq!(s.heal_pending, Some(0), "{name}");
        assert!(
            s.capacity.as_ref().unwrap().total_bytes > 1 << 30,
            "{name}: {:?}",
            s.capacity
        );
        let m = s.mount.unwrap();
        assert!(
            !m.backup_volfile_servers.contains(&m.volfile_server),
            "{m:?}"
        );
        assert_eq!(m.backup_volfile_servers.len(), 2);
        // This machine's kernel has no XFS quotas: the bricks cannot size PVs, status says
        // why (the agent's word on the brick's disk) and what would.
        let q = s.pv_quota.expect("status.pvQuota");
        assert_eq!(
            q.enforcement,
            gk_operator::crd::PvQuotaEnforcement::Gluster,
            "{name}: {q:?}"
        );
        assert!(
            q.reason.starts_with("brick ")
                && q.reason.contains("not mounted with project quotas")
                && q.reason.contains("give a new volume project quotas"),
            "{name}: {q:?}"
        );
    }

    // The operator dies right after the create is asked for, and converges when it returns:
    // the agent's create may be cut short before the volume's access options are set, and the
    // volume must not start without them (its bricks would serve without TLS; the CSI
    // listing below mounts it with TLS and fails if they do).
    volumes
        .create(&PostParams::default(), &volume("ec", specs[2].1.clone()))
        .await
        .unwrap();
    wait_until("the operator to start creating ec", 60, async || {
        let v = volumes.get("ec").await.ok()?;
        let s = v.status?;
        (condition(&s.conditions, "Progressing")?.0 == "True").then_some(())
    })
    .await;
    operator.abort();
    let _ = (&mut operator).await;
    operator = start_operator(&operator_client, &ns, metrics.clone());
    let ec = volume_ready(&volumes, "ec").await;
    assert_eq!(ec.status.unwrap().bricks_summary.as_deref(), Some("3/3"));
    let names: BTreeSet<String> = net
        .gluster(0)
        .volume_list()
        .await
        .unwrap()
        .into_iter()
        .collect();
    let want: BTreeSet<String> = ["r3", "arb", "ec"]
        .iter()
        .map(|n| format!("{ns}-{n}"))
        .collect();
    assert_eq!(names, want, "duplicate or orphaned gluster volumes");

    // The profile and the volume's own options are in effect in gluster.
    let info = net
        .gluster(0)
        .volume_info(&format!("{ns}-ec"))
        .await
        .unwrap()
        .unwrap();
    let tuned = |key: &str| {
        gk_operator::plan::profiles::TUNED
            .iter()
            .find(|o| o.key == key)
            .map(|o| o.value)
    };
    for key in [
        "network.ping-timeout",
        "client.tcp-user-timeout",
        "cluster.rebal-throttle",
    ] {
        assert_eq!(
            info.options.get(key).map(String::as_str),
            tuned(key),
            "{key}"
        );
    }
    assert_eq!(
        info.options
            .get("performance.cache-size")
            .map(String::as_str),
        Some("64MB")
    );
    assert_eq!(
        (
            info.type_name.as_str(),
            info.disperse_count,
            info.redundancy_count
        ),
        ("Disperse", 3, 1)
    );
    let arb = net
        .gluster(0)
        .volume_info(&format!("{ns}-arb"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((arb.replica_count, arb.arbiter_count), (3, 1));

    // The cluster sums its volumes' bricks and its nodes' raw capacity.
    let summed = wait_until("cluster bricks 9/9", 60, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        (s.bricks_summary.as_deref() == Some("9/9")).then_some(s)
    })
    .await;
    let raw = summed.capacity.expect("cluster capacity");
    assert!(raw.total_bytes > 3 << 30 && raw.free_bytes > 0, "{raw:?}");

    // Nothing changes, so nothing is written: no reconcile loop.
    let before = volumes.get("arb").await.unwrap().resource_version();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        volumes.get("arb").await.unwrap().resource_version(),
        before,
        "status rewritten with no change"
    );

    csi_through_the_kubernetes_api(&client, &csi_client, &ns, &net).await;

    // A killed brick: Degraded with 2/3 online, then the operator restarts it and heals.
    let gname = format!("{ns}-r3");
    let st = net.gluster(0).volume_status(&gname).await.unwrap();
    let victim = st
        .bricks
        .iter()
        .find(|b| b.brick.host == net.nodes()[2].address)
        .unwrap()
        .clone();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim.pid.unwrap() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let degraded = wait_until("r3 Degraded with 2/3 bricks", 60, async || {
        let s = volumes.get("r3").await.ok()?.status?;
        let d = condition(&s.conditions, "Degraded")?;
        (d == ("True".into(), "BricksOffline".into()) && s.bricks_summary.as_deref() == Some("2/3"))
            .then_some(s)
    })
    .await;
    assert!(degraded
        .bricks
        .iter()
        .any(|b| !b.online && b.host == net.nodes()[2].address));
    let healed = volume_ready(&volumes, "r3").await.status.unwrap();
    assert_eq!(
        (healed.bricks_summary.as_deref(), healed.heal_pending),
        (Some("3/3"), Some(0))
    );
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), &ns);
    let reasons: Vec<String> = events
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("r3"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(reasons.iter().any(|r| r == "BricksOffline"), "{reasons:?}");

    // Deletion waits while a PersistentVolume uses the volume; Retain keeps the bricks' data.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv_name = format!("{ns}-pv");
    pvs.create(&PostParams::default(), &support::pv_using(&pv_name, &gname))
        .await
        .unwrap();
    volumes
        .delete("r3", &DeleteParams::default())
        .await
        .unwrap();
    let blocked = wait_until("r3 DeletionBlocked", 60, async || {
        let s = volumes.get("r3").await.ok()?.status?;
        let c = s
            .conditions
            .iter()
            .find(|c| c.reason == "DeletionBlocked")?
            .clone();
        Some(c.message)
    })
    .await;
    assert!(blocked.contains(&pv_name), "{blocked}");
    assert!(net.gluster(0).volume_info(&gname).await.unwrap().is_some());
    pvs.delete(&pv_name, &DeleteParams::default())
        .await
        .unwrap();
    wait_until("r3 deleted", 90, async || {
        volumes.get_opt("r3").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(net.gluster(0).volume_info(&gname).await.unwrap().is_none());
    assert!(
        victim.brick.path.len() > 1 && std::path::Path::new(&victim.brick.path).exists(),
        "Retain removed brick data"
    );

    let text = metrics.encode();
    assert!(
        text.contains("glusterkube_reconciles_total{kind=\"GlusterVolume\"}"),
        "{text}"
    );
    assert!(text.contains("glusterkube_volume_bricks_online"), "{text}");
    // The chart's alerts query only series this operator really exports.
    let rules = gk_testenv::deploy::alert_rules().unwrap();
    for (alert, expr) in gk_testenv::deploy::alert_expressions(&rules) {
        for name in gk_testenv::deploy::metric_names(&expr) {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("{name}{{"))
                        || l.starts_with(&format!("{name} "))),
                "alert {alert} queries {name}, which the operator does not export:\n{text}"
            );
        }
    }
    // A deleted volume's gauges go with it; the others' stay.
    let r3 = format!("{{namespace=\"{ns}\",volume=\"r3\"}}");
    assert!(!text.contains(&r3), "r3's gauges outlived it:\n{text}");
    assert!(
        text.contains(&format!("{{namespace=\"{ns}\",volume=\"ec\"}}")),
        "{text}"
    );

    zones_keep_sets_apart(&client, &ns).await;

    // Leave the namespace clean: the operator finishes the remaining volumes first.
    for name in ["arb", "ec"] {
        volumes
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_until("volumes deleted", 90, async || {
        volumes
            .list(&Default::default())
            .await
            .ok()?
            .items
            .is_empty()
            .then_some(())
    })
    .await;
    // The cluster's finalizer lets it go once no volume lives on it.
    clusters
        .delete("pool", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("cluster deleted", 60, async || {
        clusters.get_opt("pool").await.ok()?.is_none().then_some(())
    })
    .await;
    operator.abort();
    support::none_forbidden("the operator", &operator_calls);
    support::none_forbidden("the CSI controller", &csi_calls);
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = ns_api.delete(&ns, &DeleteParams::default()).await;
}

/// Zones: the storage nodes get Node objects labelled with two zones (a: storage-1 and
/// storage-2, b: storage-3) under a label this cluster is told to read. A replica-3 volume
/// cannot have each brick in a zone of its own: it is refused with the zones named, then,
/// allowed, placed with ZonesShared naming the set, and every brick shows its zone. The
/// Nodes are unschedulable and tainted so nothing is bound to them, and go at the end.
async fn zones_keep_sets_apart(client: &kube::Client, ns: &str) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let label = "test.glusterkube.dev/zone";
    let nodes: Api<Node> = Api::all(client.clone());
    let ssa = PatchParams::apply("gk-operator-test").force();
    for (name, zone) in [("storage-1", "a"), ("storage-2", "a"), ("storage-3", "b")] {
        let node = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {label: zone}},
            "spec": {"unschedulable": true, "taints": [
                {"key": "test.glusterkube.dev/no-kubelet", "effect": "NoSchedule"}]},
        });
        nodes.patch(name, &ssa, &Patch::Apply(&node)).await.unwrap();
    }
    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), ns);
    clusters
        .patch(
            "pool",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"zoneLabel": label}})),
        )
        .await
        .unwrap();
    wait_until("the cluster's peers show their zones", 60, async || {
        let s = clusters.get("pool").await.ok()?.status?;
        let zones: BTreeSet<(String, String)> = s
            .peers
            .iter()
            .filter_map(|p| Some((p.node.clone(), p.zone.clone()?)))
            .collect();
        let want: BTreeSet<(String, String)> =
            [("storage-1", "a"), ("storage-2", "a"), ("storage-3", "b")]
                .map(|(n, z)| (n.to_string(), z.to_string()))
                .into();
        (zones == want).then_some(())
    })
    .await;

    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), ns);
    let spec = json!({"cluster": "pool", "type": "Replicate", "replica": 3, "brickCount": 3,
                      "deletionPolicy": "Delete"});
    volumes
        .create(&PostParams::default(), &volume("zoned", spec))
        .await
        .unwrap();
    let refused = wait_until("zoned refused for want of zones", 60, async || {
        let s = volumes.get("zoned").await.ok()?.status?;
        let c = s.conditions.iter().find(|c| c.type_ == "Ready")?;
        (c.reason == "InvalidSpec").then(|| c.message.clone())
    })
    .await;
    assert!(
        refused.contains("needs 3 zones")
            && refused.contains("a (storage-1, storage-2), b (storage-3)")
            && refused.contains("spec.allowSharedZones"),
        "{refused}"
    );
    assert!(
        volumes
            .get("zoned")
            .await
            .unwrap()
            .status
            .unwrap()
            .bricks
            .is_empty(),
        "a refused volume has no bricks"
    );

    volumes
        .patch(
            "zoned",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"allowSharedZones": true}})),
        )
        .await
        .unwrap();
    let placed = volume_ready(&volumes, "zoned").await;
    let s = placed.status.unwrap();
    let zones: Vec<(&str, Option<&str>)> = s
        .bricks
        .iter()
        .map(|b| (b.node.as_str(), b.zone.as_deref()))
        .collect();
    let want = |n: &str| if n == "storage-3" { "b" } else { "a" };
    assert!(
        zones.len() == 3 && zones.iter().all(|(n, z)| *z == Some(want(n))),
        "{zones:?}"
    );
    let shared = s
        .conditions
        .iter()
        .find(|c| c.type_ == "ZonesShared")
        .expect("ZonesShared");
    assert_eq!(
        (shared.status.as_str(), shared.reason.as_str()),
        ("True", "SetsShareZone")
    );
    assert!(
        shared.message.contains("set 0 has 2 bricks in zone a"),
        "{}",
        shared.message
    );

    volumes
        .delete("zoned", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("zoned deleted", 90, async || {
        volumes.get_opt("zoned").await.ok()?.is_none().then_some(())
    })
    .await;
    for name in ["storage-1", "storage-2", "storage-3"] {
        nodes.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

/// Whatever stops a reconcile is in the resource's conditions, with what to do, and a
/// Warning event: a brick StatefulSet the apiserver refuses (a resource name pods cannot
/// have), a brick pod no node will schedule, and a volume option gluster's CLI cannot take.
async fn errors_reach_status(client: &kube::Client, ns: &str) {
    let clusters: Api<GlusterCluster> = Api::namespaced(client.clone(), ns);
    let volumes: Api<GlusterVolume> = Api::namespaced(client.clone(), ns);
    let labels = json!({gk_api::names::INSTANCE_LABEL: instance()});
    let cluster = |name: &str, spec: serde_json::Value| -> GlusterCluster {
        serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": name, "labels": labels}, "spec": spec,
        }))
        .unwrap()
    };
    let node = |n: &str| json!({"name": n, "storage": {"directory": "/srv/glusterkube"}});
    clusters
        .create(
            &PostParams::default(),
            &cluster(
                "refused",
                json!({"nodes": [node("storage-1")], "resources": {"requests": {"bogus": "1"}}}),
            ),
        )
        .await
        .unwrap();
    clusters
        .create(
            &PostParams::default(),
            &cluster("unschedulable", json!({"nodes": [node("no-such-node")]})),
        )
        .await
        .unwrap();
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                "metadata": {"name": "badopt", "labels": labels},
                "spec": {"cluster": "pool", "type": "Distribute", "brickCount": 1,
                         "options": {"performance.cache-size": "--64MB"}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let degraded = |conds: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        conds
            .iter()
            .find(|c| c.type_ == "Degraded" && c.status == "True")
            .map(|c| (c.reason.clone(), c.message.clone()))
    };
    let (reason, message) = wait_until("the refused cluster's condition", 60, async || {
        degraded(&clusters.get("refused").await.ok()?.status?.conditions)
    })
    .await;
    assert_eq!(reason, "Refused", "{message}");
    assert!(
        message.contains("bogus") && message.contains("fix the field"),
        "{message}"
    );
    let (reason, message) = wait_until("the unschedulable cluster's condition", 90, async || {
        degraded(&clusters.get("unschedulable").await.ok()?.status?.conditions)
    })
    .await;
    assert_eq!(reason, "BrickPodsFailing", "{message}");
    assert!(message.contains("cannot be scheduled"), "{message}");

    // A namespace whose Pod Security level refuses privileged pods: the apiserver's own
    // admission refuses the StatefulSet controller's brick pod, and status says what to do.
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let psa_ns = format!("{ns}-psa");
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": psa_ns,
                             "labels": {"pod-security.kubernetes.io/enforce": "baseline"}},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let psa: Api<GlusterCluster> = Api::namespaced(client.clone(), &psa_ns);
    psa.create(
        &PostParams::default(),
        &cluster("psa", json!({"nodes": [node("storage-1")]})),
    )
    .await
    .unwrap();
    let (reason, message) = wait_until("the Pod Security refusal in status", 90, async || {
        degraded(&psa.get("psa").await.ok()?.status?.conditions)
    })
    .await;
    assert_eq!(reason, "BrickPodsFailing", "{message}");
    assert!(
        message.contains("violates PodSecurity \"baseline:latest\"")
            && message.contains(&format!(
                "kubectl label namespace {psa_ns} pod-security.kubernetes.io/enforce=privileged"
            )),
        "{message}"
    );
    psa.delete("psa", &DeleteParams::default()).await.unwrap();
    wait_until("the refused cluster gone", 60, async || {
        psa.get_opt("psa").await.ok()?.is_none().then_some(())
    })
    .await;
    namespaces
        .delete(&psa_ns, &DeleteParams::default())
        .await
        .unwrap();
    let (reason, message) = wait_until("the bad option's condition", 60, async || {
        degraded(&volumes.get("badopt").await.ok()?.status?.conditions)
    })
    .await;
    assert_eq!(reason, "InvalidSpec", "{message}");
    assert!(
        message.contains("spec.options.performance.cache-size"),
        "{message}"
    );
    // Each became a Warning event on its object.
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), ns);
    for (kind, name, reason) in [
        ("GlusterCluster", "refused", "Refused"),
        ("GlusterCluster", "unschedulable", "BrickPodsFailing"),
        ("GlusterVolume", "badopt", "InvalidSpec"),
    ] {
        wait_until(
            &format!("a Warning event {reason} on {name}"),
            30,
            async || {
                events
                    .list(&Default::default())
                    .await
                    .ok()?
                    .items
                    .iter()
                    .find(|e| {
                        e.type_.as_deref() == Some("Warning")
                            && e.reason.as_deref() == Some(reason)
                            && e.regarding.as_ref().is_some_and(|r| {
                                r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                            })
                    })?;
                Some(())
            },
        )
        .await;
    }
    volumes
        .delete("badopt", &DeleteParams::default())
        .await
        .unwrap();
    for name in ["refused", "unschedulable"] {
        clusters
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    wait_until("the bad objects gone", 90, async || {
        let left = clusters.get_opt("refused").await.ok()?.is_some()
            || clusters.get_opt("unschedulable").await.ok()?.is_some()
            || volumes.get_opt("badopt").await.ok()?.is_some();
        (!left).then_some(())
    })
    .await;
}

/// The CSI controller with its production resolver (GlusterVolume status, the cluster's
/// agents and the operator's client certificate, all from the API): a subdir PV on a pool,
/// and a dedicated volume that becomes a GlusterVolume of its own and goes away with its data.
async fn csi_through_the_kubernetes_api(
    client: &kube::Client,
    csi_client: &kube::Client,
    ns: &str,
    net: &GlusterNet,
) {
    use csi::controller_server::Controller;
    use tonic::Request;

    // The CSI controller as the chart's ServiceAccount.
    let pools =
        gk_csi::kube_pools::KubePools::new(csi_client.clone(), gk_testenv::kubelet::AGENT_PORT);
    let driver = gk_csi::controller::ControllerService::new(pools);
    let cap = csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(csi::volume_capability::AccessMode {
            mode: csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    };

    // Subdir on the arbiter volume as a pool.
    let sub = driver
        .create_volume(Request::new(csi::CreateVolumeRequest {
            name: "pvc-kube".into(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 8 << 20,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![cap.clone()],
            parameters: HashMap::from([("pool".into(), format!("{ns}/arb"))]),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(sub.volume_context["glusterVolume"], format!("{ns}-arb"));
    assert_eq!(sub.volume_context["servers"].split(',').count(), 3);
    assert_eq!(sub.volume_context["tls"], "true");
    tls_node_checks(client, ns, net, &sub).await;
    let listed = driver
        .list_volumes(Request::new(Default::default()))
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed
            .entries
            .iter()
            .any(|e| e.volume.as_ref().unwrap().volume_id == sub.volume_id),
        "{listed:?}"
    );
    driver
        .delete_volume(Request::new(csi::DeleteVolumeRequest {
            volume_id: sub.volume_id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap();

    // Dedicated: a GlusterVolume of its own, Ready before CreateVolume returns.
    let params = HashMap::from([
        ("mode".to_string(), "dedicated".to_string()),
        ("cluster".to_string(), format!("{ns}/pool")),
        ("type".to_string(), "Replicate".to_string()),
    ]);
    // A call still pending for a claim deleted meanwhile makes nothing.
    let mut for_gone_claim = params.clone();
    for (k, v) in [
        ("csi.storage.k8s.io/pvc/namespace", ns),
        ("csi.storage.k8s.io/pvc/name", "deleted-claim"),
    ] {
        for_gone_claim.insert(k.into(), v.into());
    }
    let refused = driver
        .create_volume(Request::new(csi::CreateVolumeRequest {
            name: "pvc-gone".into(),
            volume_capabilities: vec![cap.clone()],
            parameters: for_gone_claim,
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("no longer exists"),
        "{refused:?}"
    );
    let gvs: Api<GlusterVolume> = Api::namespaced(client.clone(), ns);
    assert!(gvs.get_opt("pvc-gone").await.unwrap().is_none());
    let ded = driver
        .create_volume(Request::new(csi::CreateVolumeRequest {
            name: "pvc-ded".into(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 0,
            }),
            volume_capabilities: vec![cap.clone()],
            parameters: params.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(ded.volume_id, format!("dedicated/{ns}/pvc-ded"));
    assert_eq!(ded.volume_context["glusterVolume"], format!("{ns}-pvc-ded"));
    // The PV's data is in a directory with a quota of its size.
    assert_eq!(ded.volume_context["subdir"], "pv");
    let gv: Api<GlusterVolume> = Api::namespaced(client.clone(), ns);
    let made = gv.get("pvc-ded").await.unwrap();
    assert_eq!(
        made.spec.deletion_policy,
        gk_operator::crd::DeletionPolicy::Delete
    );
    let info = net
        .gluster(0)
        .volume_info(&format!("{ns}-pvc-ded"))
        .await
        .unwrap()
        .expect("gluster volume");
    assert!(info.is_started());
    let brick = info.bricks[0].brick.path.clone();
    assert_eq!(
        brick_limit(&std::path::Path::new(&brick).join("pv")),
        Some(1 << 30),
        "the PV's directory carries its limit"
    );
    // The same request again is the same volume; a different layout is a conflict.
    let again = driver
        .create_volume(Request::new(csi::CreateVolumeRequest {
            name: "pvc-ded".into(),
            volume_capabilities: vec![cap.clone()],
            parameters: params.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(again.volume_id, ded.volume_id);
    let mut arbiter = params.clone();
    arbiter.insert("type".into(), "Arbiter".into());
    let conflict = driver
        .create_volume(Request::new(csi::CreateVolumeRequest {
            name: "pvc-ded".into(),
            volume_capabilities: vec![cap],
            parameters: arbiter,
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(conflict.code(), tonic::Code::AlreadyExists, "{conflict:?}");
    // Listed, and capacity is answered for the dedicated class.
    let listed = driver
        .list_volumes(Request::new(csi::ListVolumesRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed
            .entries
            .iter()
            .any(|e| e.volume.as_ref().unwrap().volume_id == ded.volume_id),
        "ListVolumes lists the dedicated PV"
    );
    let room = driver
        .get_capacity(Request::new(csi::GetCapacityRequest {
            parameters: params.clone(),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert!(room.available_capacity > 0, "{room:?}");
    // Expansion returns once the operator's volume holds the size, and raises the limit.
    let grown = driver
        .controller_expand_volume(Request::new(csi::ControllerExpandVolumeRequest {
            volume_id: ded.volume_id.clone(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 1536 << 20,
                limit_bytes: 0,
            }),
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(grown.capacity_bytes, 1536 << 20);
    assert_eq!(
        brick_limit(&std::path::Path::new(&brick).join("pv")),
        Some(1536 << 20)
    );
    driver
        .delete_volume(Request::new(csi::DeleteVolumeRequest {
            volume_id: ded.volume_id.clone(),
            ..Default::default()
        }))
        .await
        .unwrap();
    assert!(gv.get_opt("pvc-ded").await.unwrap().is_none());
    assert!(net
        .gluster(0)
        .volume_info(&format!("{ns}-pvc-ded"))
        .await
        .unwrap()
        .is_none());
    assert!(
        !std::path::Path::new(&brick).exists(),
        "deletionPolicy Delete kept {brick}"
    );
}

/// The quota limit a brick stores for one of its directories (under gluster's versioned
/// name for the attribute clients set).
fn brick_limit(dir: &std::path::Path) -> Option<u64> {
    let key = format!("{}.1", gk_agent::quota::LIMIT_XATTR);
    let out = std::process::Command::new("getfattr")
        .args(["-n", &key, "-e", "hex", "--absolute-names"])
        .arg(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let hex = text.lines().find_map(|l| l.split_once("=0x"))?.1.trim();
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    gk_agent::quota::decode_limit(&bytes)
}

fn secret_files(s: &k8s_openapi::api::core::v1::Secret) -> TlsFiles {
    let text = |k: &str| String::from_utf8(s.data.as_ref().unwrap()[k].0.clone()).unwrap();
    TlsFiles {
        cert_pem: text("glusterfs.pem"),
        key_pem: text("glusterfs.key"),
        ca_pem: text("glusterfs.ca"),
    }
}

/// TLS as the product sets it up: the CSI node plugin, holding the certificate the operator
/// issued into its namespace, stages and publishes a subdirectory PV of a TLS cluster and
/// reads and writes it; clients without that certificate are refused.
async fn tls_node_checks(client: &kube::Client, ns: &str, net: &GlusterNet, vol: &csi::Volume) {
    use csi::node_server::Node;
    use gk_operator::pki::{Ca, CertKey, Usage};
    use gk_operator::tls::gluster::{CA_SECRET, CSI_CLIENT_SECRET};
    use tonic::Request;

    // The operator set who may mount: the cluster's own certificate and the CSI plugins'.
    let uid = Api::<GlusterCluster>::namespaced(client.clone(), ns)
        .get("pool")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let info = net
        .gluster(0)
        .volume_info(&vol.volume_context["glusterVolume"])
        .await
        .unwrap()
        .unwrap();
    let opt = |k: &str| info.options.get(k).cloned().unwrap_or_default();
    assert_eq!(
        (opt("client.ssl"), opt("server.ssl")),
        ("on".into(), "on".into())
    );
    assert_eq!(opt("auth.ssl-allow"), format!("gk-csi-node,gk-node-{uid}"));
    assert_eq!(
        opt("ssl.cipher-list"),
        gk_operator::tls::access::CIPHER_LIST
    );

    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let csi_files = secret_files(&secrets.get(CSI_CLIENT_SECRET).await.unwrap());
    let csi_node = net.add_client(150, Some(&csi_files), false).unwrap();
    let mut node = gk_csi::node::NodeService::new(
        "node-1".into(),
        csi_node.mounter(),
        net.scratch_dir("csi-tls-node").unwrap(),
    );
    node.tls_dir = Some(csi_node.ssl_dir());
    // The kubelet's directories, where the client's FUSE mounts are seen by this test too.
    node.kubelet.root = csi_node.mount_dir("kubelet").unwrap();
    let staging = node
        .kubelet
        .root
        .join("plugins/kubernetes.io/csi/pv-tls/globalmount");
    let target = node.kubelet.root.join("pods/pod-tls/volumes/pv-tls/mount");
    let cap = csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(Default::default())),
        access_mode: Some(csi::volume_capability::AccessMode {
            mode: csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    };
    node.node_stage_volume(Request::new(csi::NodeStageVolumeRequest {
        volume_id: vol.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap.clone()),
        volume_context: vol.volume_context.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    node.node_publish_volume(Request::new(csi::NodePublishVolumeRequest {
        volume_id: vol.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        volume_context: vol.volume_context.clone(),
        ..Default::default()
    }))
    .await
    .unwrap();
    std::fs::write(target.join("over-tls"), b"encrypted on the wire").unwrap();
    assert_eq!(
        std::fs::read(staging.join("over-tls")).unwrap(),
        b"encrypted on the wire"
    );

    let source = gk_mount::MountSource {
        servers: vol.volume_context["servers"]
            .split(',')
            .map(String::from)
            .collect(),
        volume: vol.volume_context["glusterVolume"].clone(),
        subdir: None,
    };
    // Refused: no certificate at all (a plain mount from the default client) ...
    let plain = net.scratch_dir("no-cert").unwrap();
    let log = net.scratch_dir("logs").unwrap().join("no-cert.log");
    let refused = support::refusal(&net.client_mounter(), &source, &plain, &log, false).await;
    assert!(
        !refused.is_empty(),
        "a client without a certificate mounted and wrote"
    );
    // ... the trusted name from a CA of its own ...
    let now = std::time::SystemTime::now();
    let rogue_ca = Ca::generate("rogue", now).unwrap();
    let rogue = rogue_ca
        .issue(
            gk_operator::tls::access::CSI_CLIENT_IDENTITY,
            &[],
            Usage::Client,
            now,
        )
        .unwrap();
    // A client holding `leaf` and trusting the operator's CA; the refusal it meets.
    let refusal_for = async |host: u8, leaf: CertKey| {
        let client = net
            .add_client(
                host,
                Some(&TlsFiles {
                    cert_pem: leaf.cert_pem,
                    key_pem: leaf.key_pem,
                    ca_pem: csi_files.ca_pem.clone(),
                }),
                false,
            )
            .unwrap();
        let dir = client.mount_dir("probe").unwrap();
        let log = client.log_file("probe");
        support::refusal(&client.mounter(), &source, &dir, &log, true).await
    };
    assert!(
        !refusal_for(151, rogue).await.is_empty(),
        "a certificate from another CA was let in"
    );
    // ... and the operator's CA, but a name auth.ssl-allow does not list.
    let ca_secret = secrets.get(CA_SECRET).await.unwrap();
    let text = |k: &str| String::from_utf8(ca_secret.data.as_ref().unwrap()[k].0.clone()).unwrap();
    let ca = Ca::from_pem(&CertKey {
        cert_pem: text("ca.crt"),
        key_pem: text("ca.key"),
    })
    .unwrap();
    let stranger = ca.issue("gk-stranger", &[], Usage::Client, now).unwrap();
    assert!(
        !refusal_for(152, stranger).await.is_empty(),
        "a name auth.ssl-allow does not list was let in"
    );
    eprintln!("operator: TLS refusals: no certificate: {refused}; another CA and another name refused too");

    node.node_unpublish_volume(Request::new(csi::NodeUnpublishVolumeRequest {
        volume_id: vol.volume_id.clone(),
        target_path: target.display().to_string(),
    }))
    .await
    .unwrap();
    node.node_unstage_volume(Request::new(csi::NodeUnstageVolumeRequest {
        volume_id: vol.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
    }))
    .await
    .unwrap();
}

/// Two replicas with leader election, as the chart runs them (the chart's role, a Lease in
/// the release namespace): only the Lease holder reconciles, the standby's controllers never
/// start while it waits, and when the leader is stopped (its pod deleted) it releases the
/// Lease and the standby takes over and reconciles what comes next.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_standby_replica_takes_over_when_the_leader_stops() {
    use gk_operator::leader::{lead, Election, Ended};
    use k8s_openapi::api::coordination::v1::Lease;
    use std::sync::atomic::{AtomicBool, Ordering};

    // The API alone: no storage nodes (a second stand-in kubelet would serve the other
    // test's node names).
    let env = support::api_env("gk-op").await;
    let (client, calls) = env.operator.clone();
    // Not the other test's instance: these replicas must not touch its objects.
    let instance = format!("ha-{}", std::process::id());
    const LEASE: &str = "glusterkube-operator";
    let start = |identity: &str| {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let reconciling = Arc::new(AtomicBool::new(false));
        let election = Election {
            namespace: env.ns.clone(),
            lease: LEASE.into(),
            identity: identity.into(),
            duration_seconds: 6,
            grace_seconds: 2,
        };
        let config = Config {
            instance: Some(instance.clone()),
            refresh: Duration::from_secs(3),
            namespace: env.ns.clone(),
            ..Config::default()
        };
        let (c, flag) = (client.clone(), reconciling.clone());
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            lead(c.clone(), &election, shutdown, |until| {
                flag.store(true, Ordering::SeqCst);
                gk_operator::run(c, config, Arc::new(Metrics::default()), until)
            })
            .await
        });
        (stop, task, reconciling)
    };
    let leases: Api<Lease> = Api::namespaced(env.client.clone(), &env.ns);
    let holder = async || {
        leases
            .get_opt(LEASE)
            .await
            .ok()
            .flatten()?
            .spec?
            .holder_identity
    };
    let volumes: Api<GlusterVolume> = Api::namespaced(env.client.clone(), &env.ns);
    // A volume of a cluster that does not exist: reconciling it writes ClusterNotFound,
    // which needs nothing but the API.
    let reconciled = async |name: &str| {
        let v: GlusterVolume = serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": name, "labels": {gk_api::names::INSTANCE_LABEL: instance}},
            "spec": {"cluster": "absent", "type": "Replicate", "replica": 3, "brickCount": 3},
        }))
        .unwrap();
        volumes.create(&PostParams::default(), &v).await.unwrap();
        wait_until(&format!("{name} reconciled"), 30, async || {
            let s = volumes.get(name).await.ok()?.status?;
            s.conditions
                .iter()
                .any(|c| c.reason == "ClusterNotFound")
                .then_some(())
        })
        .await
    };

    let (stop_a, a, a_reconciling) = start("replica-a");
    wait_until("replica-a leads", 30, async || {
        (holder().await? == "replica-a").then_some(())
    })
    .await;
    let (_stop_b, b, b_reconciling) = start("replica-b");
    reconciled("first").await;
    tokio::time::sleep(Duration::from_secs(8)).await; // past a whole Lease duration
    assert!(a_reconciling.load(Ordering::SeqCst));
    assert!(
        !b_reconciling.load(Ordering::SeqCst),
        "the standby started its controllers while replica-a held the Lease"
    );
    assert_eq!(holder().await.as_deref(), Some("replica-a"));

    // The leader stops (SIGTERM, as when its pod is deleted): it releases the Lease.
    let stopped_at = std::time::Instant::now();
    stop_a.send(()).unwrap();
    assert_eq!(a.await.unwrap().unwrap(), Ended::Shutdown);
    wait_until("replica-b leads", 20, async || {
        (holder().await? == "replica-b").then_some(())
    })
    .await;
    eprintln!(
        "replica-b took over {:.1} s after replica-a was stopped",
        stopped_at.elapsed().as_secs_f64()
    );
    // The Lease is written by the lease manager's task before `lead` hears of it and starts
    // the controllers, so the flag may follow the Lease by a moment (a CI run read it first).
    wait_until("replica-b starts its controllers", 10, async || {
        b_reconciling.load(Ordering::SeqCst).then_some(())
    })
    .await;
    reconciled("second").await;
    assert!(!b.is_finished());
    support::none_forbidden("operator", &calls);
    support::drop_finalizers(volumes).await;
}
