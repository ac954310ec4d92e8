//! Every bad GlusterCluster and GlusterVolume below is refused by the real apiserver at
//! admission, by the generated schema and its CEL rules, with a message naming the field.

use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_testenv::k8s::ControlPlane;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{json, Value};

const NS: &str = "gk-admission";

fn cluster(spec: Value) -> (&'static str, Value) {
    ("GlusterCluster", spec)
}

fn volume(spec: Value) -> (&'static str, Value) {
    ("GlusterVolume", spec)
}

/// A valid volume spec with `change` merged in (a null value removes the key).
fn vol_with(change: Value) -> Value {
    let mut base = json!({"cluster": "c", "type": "Replicate", "replica": 3, "brickCount": 3});
    merge(&mut base, change);
    base
}

fn merge(base: &mut Value, change: Value) {
    if let (Some(b), Value::Object(c)) = (base.as_object_mut(), change) {
        for (k, v) in c {
            if v.is_null() {
                b.remove(&k);
            } else {
                b.insert(k, v);
            }
        }
    }
}

fn node(name: &str, storage: Value) -> Value {
    json!({"name": name, "storage": storage})
}

/// (case, kind, spec, the field the error must name)
fn bad_creates() -> Vec<(&'static str, (&'static str, Value), &'static str)> {
    let dir = json!({"directory": "/srv/gluster"});
    let many: Vec<Value> = (0..129)
        .map(|i| node(&format!("n{i}"), dir.clone()))
        .collect();
    vec![
        ("no nodes", cluster(json!({"nodes": []})), "spec.nodes"),
        ("nodes missing", cluster(json!({})), "spec.nodes"),
        (
            "too many nodes",
            cluster(json!({"nodes": many})),
            "spec.nodes",
        ),
        (
            "empty node name",
            cluster(json!({"nodes": [node("", dir.clone())]})),
            "spec.nodes[0].name",
        ),
        (
            "node name not a DNS name",
            cluster(json!({"nodes": [node("Node_A", dir.clone())]})),
            "spec.nodes[0].name",
        ),
        (
            "duplicate node",
            cluster(json!({"nodes": [node("a", dir.clone()), node("a", dir.clone())]})),
            "spec.nodes[1]",
        ),
        (
            "TLS off without clientNetworks",
            cluster(json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}})),
            "spec.clientNetworks",
        ),
        (
            "clientNetworks entry not an IPv4 CIDR",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}, "clientNetworks": ["fd00::/64"]}),
            ),
            "spec.clientNetworks",
        ),
        (
            "clientNetworks entry an address, not a CIDR",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}, "clientNetworks": ["10.0.0.1"]}),
            ),
            "spec.clientNetworks",
        ),
        (
            "device and directory",
            cluster(
                json!({"nodes": [node("a", json!({"device": "/dev/sdb", "directory": "/x"}))]}),
            ),
            "spec.nodes[0].storage",
        ),
        (
            "no storage kind",
            cluster(json!({"nodes": [node("a", json!({}))]})),
            "spec.nodes[0].storage",
        ),
        (
            "storage missing",
            cluster(json!({"nodes": [{"name": "a"}]})),
            "spec.nodes[0].storage",
        ),
        (
            "device outside /dev",
            cluster(json!({"nodes": [node("a", json!({"device": "/tmp/disk.img"}))]})),
            "spec.nodes[0].storage.device",
        ),
        (
            "relative directory",
            cluster(json!({"nodes": [node("a", json!({"directory": "srv/g"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "root directory",
            cluster(json!({"nodes": [node("a", json!({"directory": "/"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory escaping",
            cluster(json!({"nodes": [node("a", json!({"directory": "/srv/../etc"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory a system directory",
            cluster(json!({"nodes": [node("a", json!({"directory": "/etc"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory under /proc",
            cluster(json!({"nodes": [node("a", json!({"directory": "/proc/1/root"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory under the kubelet's state",
            cluster(json!({"nodes": [node("a", json!({"directory": "/var/lib/kubelet/pods/x"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory with a . component",
            cluster(json!({"nodes": [node("a", json!({"directory": "/srv/./gluster"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "directory with a control character",
            cluster(json!({"nodes": [node("a", json!({"directory": "/srv/glu\nster"}))]})),
            "spec.nodes[0].storage.directory",
        ),
        (
            "device with a . component",
            cluster(json!({"nodes": [node("a", json!({"device": "/dev/./sdb"}))]})),
            "spec.nodes[0].storage.device",
        ),
        (
            "device with a control character",
            cluster(json!({"nodes": [node("a", json!({"device": "/dev/sd\tb"}))]})),
            "spec.nodes[0].storage.device",
        ),
        (
            "devices and a directory",
            cluster(
                json!({"nodes": [node("a", json!({"devices": ["/dev/sdb"], "directory": "/x"}))]}),
            ),
            "spec.nodes[0].storage",
        ),
        (
            "stateDirectory with a single directory",
            cluster(
                json!({"nodes": [node("a", json!({"directory": "/srv/g", "stateDirectory": "/srv/s"}))]}),
            ),
            "spec.nodes[0].storage.stateDirectory",
        ),
        (
            "devices pattern in a directory component",
            cluster(json!({"nodes": [node("a", json!({"devices": ["/dev/disk/*/ata-1"]}))]})),
            "spec.nodes[0].storage.devices",
        ),
        (
            "devices entry outside /dev",
            cluster(json!({"nodes": [node("a", json!({"devices": ["/dev/sdb", "/tmp/x.img"]}))]})),
            "spec.nodes[0].storage.devices",
        ),
        (
            "devices entry twice",
            cluster(json!({"nodes": [node("a", json!({"devices": ["/dev/sdb", "/dev/sdb"]}))]})),
            "spec.nodes[0].storage.devices",
        ),
        (
            "directories entry relative",
            cluster(json!({"nodes": [node("a", json!({"directories": ["/data/d1", "data/d2"]}))]})),
            "spec.nodes[0].storage.directories",
        ),
        (
            "clientNetworks covering every address",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}, "clientNetworks": ["0.0.0.0/0"]}),
            ),
            "spec.clientNetworks",
        ),
        (
            "zoneLabel not a label key",
            cluster(json!({"nodes": [node("a", dir.clone())], "zoneLabel": "zone label"})),
            "spec.zoneLabel",
        ),
        (
            "clientNetworks wider than /8",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}, "clientNetworks": ["16.0.0.0/4"]}),
            ),
            "spec.clientNetworks",
        ),
        (
            "toleration effect unknown",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoRun"}]}),
            ),
            "spec.tolerations",
        ),
        (
            "toleration Exists with a value",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
            ),
            "spec.tolerations",
        ),
        (
            "tolerationSeconds without NoExecute",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}]}),
            ),
            "spec.tolerations",
        ),
        (
            "unknown cluster profile",
            cluster(json!({"nodes": [node("a", dir.clone())], "defaultProfile": "Fast"})),
            "spec.defaultProfile",
        ),
        (
            "empty image",
            cluster(json!({"nodes": [node("a", dir.clone())], "image": ""})),
            "spec.image",
        ),
        (
            "replacement not a node",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "replacements": [{"node": "b", "replacement": "c"}]}),
            ),
            "spec.replacements",
        ),
        (
            "node replaced by itself",
            cluster(
                json!({"nodes": [node("a", dir.clone())], "replacements": [{"node": "a", "replacement": "a"}]}),
            ),
            "spec.replacements[0].replacement",
        ),
        (
            "replacement replaced again",
            cluster(
                json!({"nodes": [node("a", dir.clone()), node("b", dir.clone())], "replacements": [{"node": "x", "replacement": "a"}, {"node": "a", "replacement": "b"}]}),
            ),
            "spec.replacements",
        ),
        (
            "no cluster",
            volume(vol_with(json!({"cluster": null}))),
            "spec.cluster",
        ),
        (
            "empty cluster",
            volume(vol_with(json!({"cluster": ""}))),
            "spec.cluster",
        ),
        (
            "unknown type",
            volume(vol_with(json!({"type": "Stripe"}))),
            "spec.type",
        ),
        (
            "replicate without replica",
            volume(vol_with(json!({"replica": null}))),
            "spec.replica",
        ),
        (
            "distribute with replica",
            volume(vol_with(json!({"type": "Distribute"}))),
            "spec.replica",
        ),
        (
            "replica 4",
            volume(vol_with(json!({"replica": 4, "brickCount": 4}))),
            "spec.replica",
        ),
        (
            "replica 1",
            volume(vol_with(json!({"replica": 1}))),
            "spec.replica",
        ),
        (
            "bricks not a multiple of replica",
            volume(vol_with(json!({"brickCount": 4}))),
            "spec.brickCount",
        ),
        (
            "arbiter bricks not in threes",
            volume(vol_with(
                json!({"type": "Arbiter", "replica": null, "brickCount": 4}),
            )),
            "spec.brickCount",
        ),
        (
            "disperse without counts",
            volume(vol_with(json!({"type": "Disperse", "replica": null}))),
            "spec.disperse",
        ),
        (
            "replicate with disperse counts",
            volume(vol_with(json!({"disperse": {"data": 2, "redundancy": 1}}))),
            "spec.disperse",
        ),
        (
            "redundancy equal to data",
            volume(vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 2, "redundancy": 2}, "brickCount": 4}),
            )),
            "spec.disperse.redundancy",
        ),
        (
            "redundancy above data",
            volume(vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 3, "redundancy": 4}, "brickCount": 7}),
            )),
            "spec.disperse.redundancy",
        ),
        (
            "one data brick",
            volume(vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 1, "redundancy": 1}, "brickCount": 2}),
            )),
            "spec.disperse.data",
        ),
        (
            "no redundancy",
            volume(vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 2, "redundancy": 0}, "brickCount": 2}),
            )),
            "spec.disperse.redundancy",
        ),
        (
            "bricks not whole disperse sets",
            volume(vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 2, "redundancy": 1}, "brickCount": 4}),
            )),
            "spec.brickCount",
        ),
        (
            "bricks and brickCount",
            volume(vol_with(
                json!({"bricks": [{"node": "a"}, {"node": "b"}, {"node": "c"}]}),
            )),
            "spec.brickCount",
        ),
        (
            "neither bricks nor brickCount",
            volume(vol_with(json!({"brickCount": null}))),
            "spec.brickCount",
        ),
        (
            "zero bricks",
            volume(vol_with(
                json!({"type": "Distribute", "replica": null, "brickCount": 0}),
            )),
            "spec.brickCount",
        ),
        (
            "empty brick list",
            volume(vol_with(
                json!({"type": "Distribute", "replica": null, "brickCount": null, "bricks": []}),
            )),
            "spec.bricks",
        ),
        (
            "brick without node",
            volume(vol_with(
                json!({"type": "Distribute", "replica": null, "brickCount": null, "bricks": [{"node": ""}]}),
            )),
            "spec.bricks[0].node",
        ),
        (
            "option key not dotted",
            volume(vol_with(json!({"options": {"NoDots": "on"}}))),
            "spec.options",
        ),
        (
            "option value empty",
            volume(vol_with(json!({"options": {"performance.cache-size": ""}}))),
            "spec.options",
        ),
        (
            "option value with a newline",
            volume(vol_with(
                json!({"options": {"performance.cache-size": "256MB\nx"}}),
            )),
            "spec.options",
        ),
        (
            "size not a quantity",
            volume(vol_with(json!({"size": "100GB"}))),
            "spec.size",
        ),
        (
            "size zero",
            volume(vol_with(json!({"size": "0"}))),
            "spec.size",
        ),
        (
            "unknown deletion policy",
            volume(vol_with(json!({"deletionPolicy": "Destroy"}))),
            "spec.deletionPolicy",
        ),
        (
            "unknown volume profile",
            volume(vol_with(json!({"profile": "Fast"}))),
            "spec.profile",
        ),
        (
            "adopted volume deleted with its data",
            volume(vol_with(
                json!({"existingVolume": "seed", "deletionPolicy": "Delete"}),
            )),
            "spec.deletionPolicy",
        ),
        (
            "adopted volume name not a gluster name",
            volume(vol_with(json!({"existingVolume": "seed/x"}))),
            "spec.existingVolume",
        ),
        (
            "adopted volume with bricks placed",
            volume(vol_with(
                json!({"existingVolume": "seed", "brickCount": null, "bricks": [{"node": "a"}, {"node": "b"}, {"node": "c"}]}),
            )),
            "spec.bricks",
        ),
    ]
}

/// (case, kind, valid spec, changed spec, the field the error must name)
fn bad_updates() -> Vec<(&'static str, &'static str, Value, Value, &'static str)> {
    let dir = json!({"directory": "/srv/gluster"});
    vec![
        (
            "type changed",
            "GlusterVolume",
            vol_with(json!({})),
            vol_with(json!({"type": "Arbiter", "replica": null})),
            "spec.type",
        ),
        (
            "cluster changed",
            "GlusterVolume",
            vol_with(json!({})),
            vol_with(json!({"cluster": "other"})),
            "spec.cluster",
        ),
        (
            "replica changed",
            "GlusterVolume",
            vol_with(json!({"replica": 2, "brickCount": 6})),
            vol_with(json!({"replica": 3, "brickCount": 6})),
            "spec.replica",
        ),
        (
            "disperse changed",
            "GlusterVolume",
            vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 2, "redundancy": 1}, "brickCount": 6}),
            ),
            vol_with(
                json!({"type": "Disperse", "replica": null, "disperse": {"data": 4, "redundancy": 2}, "brickCount": 6}),
            ),
            "spec.disperse",
        ),
        (
            "adopted volume changed",
            "GlusterVolume",
            vol_with(json!({"existingVolume": "seed"})),
            vol_with(json!({"existingVolume": "other"})),
            "spec.existingVolume",
        ),
        (
            "node storage changed",
            "GlusterCluster",
            json!({"nodes": [node("a", dir.clone())]}),
            json!({"nodes": [node("a", json!({"directory": "/srv/other"}))]}),
            "spec.nodes[0].storage",
        ),
        (
            "a device dropped from a node's devices",
            "GlusterCluster",
            json!({"nodes": [node("a", json!({"devices": ["/dev/sdb", "/dev/sdc"]}))]}),
            json!({"nodes": [node("a", json!({"devices": ["/dev/sdb"]}))]}),
            "spec.nodes[0].storage",
        ),
        (
            "stateDirectory changed",
            "GlusterCluster",
            json!({"nodes": [node("a", json!({"directories": ["/data/d1"], "stateDirectory": "/data/s"}))]}),
            json!({"nodes": [node("a", json!({"directories": ["/data/d1"], "stateDirectory": "/data/t"}))]}),
            "spec.nodes[0].storage",
        ),
        (
            "TLS switched off",
            "GlusterCluster",
            json!({"nodes": [node("a", dir.clone())]}),
            json!({"nodes": [node("a", dir.clone())], "tls": {"enabled": false}, "clientNetworks": ["10.0.0.0/8"]}),
            "spec.tls.enabled",
        ),
    ]
}

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let ar = match kind {
        "GlusterCluster" => ApiResource::erase::<GlusterCluster>(&()),
        _ => ApiResource::erase::<GlusterVolume>(&()),
    };
    Api::namespaced_with(client.clone(), NS, &ar)
}

fn object(kind: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": kind,
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

#[tokio::test]
async fn bad_specs_are_refused_at_admission_naming_the_field() {
    let cp = ControlPlane::ensure().unwrap();
    let client = cp.client().await.unwrap();
    ControlPlane::install_crds(&client, &gk_api::crd::all())
        .await
        .unwrap();
    ControlPlane::ensure_namespace(&client, NS).await.unwrap();

    let creates = bad_creates();
    let updates = bad_updates();
    // README states these counts; a case added or lost changes them there too.
    assert_eq!(
        (creates.len(), updates.len()),
        (71, 9),
        "bad creates and bad updates"
    );
    eprintln!(
        "crd_admission: {} bad creates and {} bad updates",
        creates.len(),
        updates.len()
    );
    let mut failures = Vec::new();

    for (case, (kind, spec), field) in creates {
        match api(&client, kind)
            .create(&PostParams::default(), &object(kind, "bad", spec))
            .await
        {
            Ok(_) => {
                failures.push(format!("{case}: accepted"));
                let _ = api(&client, kind)
                    .delete("bad", &DeleteParams::default())
                    .await;
            }
            Err(e) if e.to_string().contains(field) => {}
            Err(e) => failures.push(format!("{case}: error does not name {field}: {e}")),
        }
    }

    for (i, (case, kind, good, changed, field)) in updates.into_iter().enumerate() {
        let name = format!("update-{i}");
        let api = api(&client, kind);
        let _ = api.delete(&name, &DeleteParams::default()).await;
        api.create(&PostParams::default(), &object(kind, &name, good))
            .await
            .unwrap_or_else(|e| panic!("{case}: the valid object was refused: {e}"));
        let patch = Patch::Merge(json!({"spec": changed}));
        match api.patch(&name, &PatchParams::default(), &patch).await {
            Ok(_) => failures.push(format!("{case}: accepted")),
            Err(e) if e.to_string().contains(field) => {}
            Err(e) => failures.push(format!("{case}: error does not name {field}: {e}")),
        }
        api.delete(&name, &DeleteParams::default()).await.unwrap();
    }

    // A disk added to a node's devices or directories is accepted: storage only grows.
    for (i, (before, after)) in [
        (
            json!({"devices": ["/dev/sdb"]}),
            json!({"devices": ["/dev/sdb", "/dev/sdc"]}),
        ),
        (
            json!({"directories": ["/data/d1"]}),
            json!({"directories": ["/data/d1", "/data/d2"]}),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let name = format!("grow-{i}");
        let api = api(&client, "GlusterCluster");
        let _ = api.delete(&name, &DeleteParams::default()).await;
        api.create(
            &PostParams::default(),
            &object(
                "GlusterCluster",
                &name,
                json!({"nodes": [node("a", before)]}),
            ),
        )
        .await
        .unwrap();
        let patch = Patch::Merge(json!({"spec": {"nodes": [node("a", after)]}}));
        if let Err(e) = api.patch(&name, &PatchParams::default(), &patch).await {
            failures.push(format!("adding a disk ({i}) was refused: {e}"));
        }
        api.delete(&name, &DeleteParams::default()).await.unwrap();
    }

    // Valid objects of every volume type are accepted, so the rules are not simply refusing all.
    let goods = [
        vol_with(json!({})),
        vol_with(json!({"type": "Arbiter", "replica": null, "brickCount": 6})),
        vol_with(
            json!({"type": "Disperse", "replica": null, "disperse": {"data": 2, "redundancy": 1}}),
        ),
        vol_with(
            json!({"type": "Distribute", "replica": null, "brickCount": null, "bricks": [{"node": "a"}, {"node": "b"}]}),
        ),
        vol_with(
            json!({"options": {"performance.cache-size": "256MB", "cluster.shd-max-threads": "8"}, "deletionPolicy": "Delete", "profile": "GlusterDefaults"}),
        ),
        vol_with(json!({"size": "100Gi"})),
        vol_with(json!({"size": 1073741824})),
        vol_with(json!({"existingVolume": "seed_vol-1"})),
    ];
    // And valid clusters of each storage kind: a device per node, a directory per node, both
    // in one cluster, and TLS off with the client networks it then needs.
    let dir = |d: &str| json!({"directory": d});
    let dev = |d: &str| json!({"device": d});
    let good_clusters = [
        json!({"nodes": [node("a", dev("/dev/sdb")), node("b", dev("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"))]}),
        json!({"nodes": [node("a", dir("/var/lib/glusterkube")), node("b.example.com", dir("/srv/gluster"))]}),
        json!({"nodes": [node("a", dev("/dev/nvme0n1")), node("b", dir("/srv/gluster"))]}),
        json!({"nodes": [node("a", json!({"devices": ["/dev/sdb", "/dev/disk/by-id/nvme-Vendor_*", "/dev/sd[c-f]"]})),
                         node("b", json!({"directories": ["/data/disk1", "/data/disk2"], "stateDirectory": "/var/lib/glusterkube/state"}))]}),
        json!({"nodes": [node("a", dir("/srv/g"))], "tls": {"enabled": false}, "clientNetworks": ["10.244.0.0/16", "192.168.1.0/24"]}),
        json!({"nodes": [node("a", dir("/srv/g"))], "zoneLabel": "topology.kubernetes.io/zone"}),
        json!({"nodes": [node("a", dir("/srv/g"))], "zoneLabel": "rack"}),
        json!({"nodes": [node("a", dir("/var/lib/glusterkube/"))],
               "tolerations": [{"key": "storage", "operator": "Exists", "effect": "NoSchedule"},
                               {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 60},
                               {"operator": "Exists"}],
               "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}}),
    ];
    let goods = goods
        .into_iter()
        .map(|s| ("GlusterVolume", s))
        .chain(good_clusters.into_iter().map(|s| ("GlusterCluster", s)));
    let mut accepted = 0;
    for (i, (kind, spec)) in goods.enumerate() {
        let name = format!("good-{i}");
        let api = api(&client, kind);
        let _ = api.delete(&name, &DeleteParams::default()).await;
        match api
            .create(&PostParams::default(), &object(kind, &name, spec))
            .await
        {
            Ok(_) => accepted += 1,
            Err(e) => failures.push(format!("valid {kind} {i} refused: {e}")),
        }
        let _ = api.delete(&name, &DeleteParams::default()).await;
    }
    eprintln!("crd_admission: {accepted} valid objects accepted");

    assert!(
        failures.is_empty(),
        "{} cases went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
