//! What a GlusterCluster runs on Kubernetes: one brick StatefulSet per storage node, a
//! headless Service and a PodDisruptionBudget. Pure builders; `apply` writes them.

use gk_api::agents::AGENT_PORT;
use gk_api::crd::{GlusterCluster, StorageNode};
use gk_api::names::{
    agent_tls_secret, cluster_labels, gluster_tls_secret, service_name, statefulset_name,
    ANNOTATION_NODE, LABEL_BRICK_SET, LABEL_CLUSTER,
};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use serde_json::json;

use crate::apply::{self, owned_meta};
use crate::context::{BrickPods, Context};
use crate::Error;

/// Where the agent TLS Secret is mounted in brick pods.
pub const TLS_DIR: &str = "/etc/glusterkube/tls";
/// Where node-local storage (glusterd's state and the bricks) is mounted in brick pods.
pub const STATE_DIR: &str = "/var/lib/glusterkube";
/// Where a node's `directories` are mounted in brick pods, one numbered directory each; the
/// entrypoint binds each under STATE_DIR/disks/<its id>, where its bricks are.
pub const DISK_DIRS: &str = "/var/lib/glusterkube-disks";

/// Where glusterd's state lives on a node with several disks when the spec names no place.
pub fn default_state_directory(namespace: &str, cluster: &str) -> String {
    format!("/var/lib/glusterkube/{namespace}.{cluster}")
}

/// For a device pattern (`*`, `?` or `[` in its last component), the directory it matches
/// in; None for a plain path.
fn pattern_parent(device: &str) -> Option<&str> {
    let (parent, last) = device.rsplit_once('/')?;
    last.contains(['*', '?', '['])
        .then_some(if parent.is_empty() { "/" } else { parent })
}

/// Applies the Service, the PodDisruptionBudget and every node's StatefulSet.
pub async fn apply(ctx: &Context, gc: &GlusterCluster) -> Result<(), Error> {
    let ns = gc.namespace().unwrap_or_default();
    apply::object(ctx, &ns, &build_service(gc)).await?;
    apply::object(ctx, &ns, &build_pdb(gc)).await?;
    for node in &gc.spec.nodes {
        apply::object(
            ctx,
            &ns,
            &build_statefulset(gc, node, &ctx.config.brick_pods),
        )
        .await?;
    }
    Ok(())
}

/// The headless Service that gives each brick pod a stable DNS name.
pub fn build_service(gc: &GlusterCluster) -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": owned_meta(gc, &service_name(&gc.name_any())),
        "spec": {
            "clusterIP": "None",
            // Peers must resolve each other before they are ready: readiness needs the pool.
            "publishNotReadyAddresses": true,
            "selector": cluster_labels(&gc.name_any()),
            "ports": [
                {"name": "glusterd", "port": 24007},
                {"name": "agent", "port": AGENT_PORT},
            ],
        }
    }))
    .expect("a valid Service")
}

/// At most one brick pod of the cluster down at a time, so a drain never takes two bricks of
/// one replica set together.
pub fn build_pdb(gc: &GlusterCluster) -> PodDisruptionBudget {
    serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": owned_meta(gc, &service_name(&gc.name_any())),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": cluster_labels(&gc.name_any())}},
    }))
    .expect("a valid PodDisruptionBudget")
}

/// One StatefulSet per storage node: one replica, pinned to the node, with the node-local
/// storage mounted so glusterd's state and the bricks survive pod restarts.
pub fn build_statefulset(gc: &GlusterCluster, node: &StorageNode, pods: &BrickPods) -> StatefulSet {
    let cluster = gc.name_any();
    let ns = gc.namespace().unwrap_or_default();
    let name = statefulset_name(&cluster, &node.name);
    let mut pod_labels = cluster_labels(&cluster);
    pod_labels.insert(LABEL_BRICK_SET.into(), name.clone());
    let image = gc.spec.image.clone().unwrap_or_else(|| pods.image.clone());
    let mut env = vec![
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"name": "GK_ADVERTISE_ADDRESS", "value": format!("$(POD_NAME).{}.{ns}.svc", service_name(&cluster))}),
        json!({"name": "GK_AGENT_TLS_DIR", "value": TLS_DIR}),
        json!({"name": "RUST_LOG", "value": pods.agent_log_level}),
        json!({"name": "GK_LOG_MAX_MIB", "value": pods.log_max_mib.to_string()}),
    ];
    let mut mounts = vec![
        json!({"name": "tls", "mountPath": TLS_DIR, "readOnly": true}),
        json!({"name": "fuse", "mountPath": "/dev/fuse"}),
    ];
    let mut volumes = vec![
        json!({"name": "tls", "secret": {"secretName": agent_tls_secret(&cluster), "defaultMode": 0o400}}),
        json!({"name": "fuse", "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}}),
    ];
    // Gluster's TLS: the entrypoint turns management TLS on (secure-access); glusterd, the
    // bricks and the agent's mounts read the certificate from OpenSSL's directory, where a
    // Secret volume keeps it current when it is renewed (gluster reads it per connection).
    let tls = gc.spec.tls.enabled;
    env.push(json!({"name": "GK_GLUSTER_TLS", "value": if tls { "on" } else { "off" }}));
    if tls {
        mounts.push(json!({"name": "gluster-tls", "mountPath": crate::tls::gluster::SSL_DIR, "readOnly": true}));
        volumes.push(json!({"name": "gluster-tls", "secret": {"secretName": gluster_tls_secret(&cluster), "defaultMode": 0o400}}));
    }
    let storage = &node.storage;
    if let Some(dir) = &storage.directory {
        mounts.push(json!({"name": "state", "mountPath": STATE_DIR}));
        volumes
            .push(json!({"name": "state", "hostPath": {"path": dir, "type": "DirectoryOrCreate"}}));
    }
    if let Some(dev) = &storage.device {
        env.push(json!({"name": "GK_DEVICE", "value": dev}));
        mounts.push(json!({"name": "device", "mountPath": dev}));
        volumes.push(json!({"name": "device", "hostPath": {"path": dev, "type": "BlockDevice"}}));
    }
    if storage.is_multi_disk() {
        let state = storage
            .state_directory
            .clone()
            .unwrap_or_else(|| default_state_directory(&ns, &cluster));
        mounts.push(json!({"name": "state", "mountPath": STATE_DIR}));
        volumes.push(
            json!({"name": "state", "hostPath": {"path": state, "type": "DirectoryOrCreate"}}),
        );
        // The entrypoint marks each disk with its owner, so no other cluster takes it.
        env.push(json!({"name": "GK_OWNER", "value": format!("{ns}/{cluster}")}));
    }
    if !storage.devices.is_empty() {
        env.push(json!({"name": "GK_DEVICES", "value": storage.devices.join(",")}));
        let mut parents: Vec<&str> = Vec::new();
        for (i, dev) in storage.devices.iter().enumerate() {
            match pattern_parent(dev) {
                // A privileged container sees the node's device nodes in /dev already; a
                // directory of links (/dev/disk/by-id) comes from the node, for the brick
                // pod to match the pattern there.
                Some("/dev") => {}
                Some(parent) if !parents.contains(&parent) => parents.push(parent),
                Some(_) => {}
                None => {
                    let name = format!("device-{i}");
                    mounts.push(json!({"name": name, "mountPath": dev}));
                    volumes.push(
                        json!({"name": name, "hostPath": {"path": dev, "type": "BlockDevice"}}),
                    );
                }
            }
        }
        for (i, parent) in parents.iter().enumerate() {
            let name = format!("device-links-{i}");
            mounts.push(json!({"name": name, "mountPath": parent, "readOnly": true}));
            volumes.push(json!({"name": name, "hostPath": {"path": parent, "type": "Directory"}}));
        }
    }
    if !storage.directories.is_empty() {
        let mut inside = Vec::new();
        for (i, dir) in storage.directories.iter().enumerate() {
            let name = format!("disk-{i}");
            let at = format!("{DISK_DIRS}/{i}");
            mounts.push(json!({"name": name, "mountPath": at}));
            volumes.push(json!({"name": name, "hostPath": {"path": dir, "type": "Directory"}}));
            inside.push(at);
        }
        env.push(json!({"name": "GK_DIRECTORIES", "value": inside.join(",")}));
    }
    let mut container = json!({
        "name": "brick",
        "image": image,
        "env": env,
        "ports": [
            {"name": "glusterd", "containerPort": 24007},
            {"name": "agent", "containerPort": AGENT_PORT},
        ],
        "volumeMounts": mounts,
        // trusted.* xattrs (gluster's metadata), XFS and FUSE mounts need CAP_SYS_ADMIN, and
        // the agent's FUSE mounts need /dev/fuse, which the container's device cgroup refuses
        // ("cannot open /dev/fuse (Operation not permitted)", seen under a real kubelet) even
        // when it is mounted as a hostPath: Kubernetes grants devices only to privileged
        // containers.
        "securityContext": {"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": true},
        "readinessProbe": {"tcpSocket": {"port": 24007}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": 24007}, "periodSeconds": 10, "failureThreshold": 6},
    });
    if let Some(r) = &gc.spec.resources {
        container["resources"] = serde_json::to_value(r).expect("resources serialise");
    }
    let mut pod_spec = json!({
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]
        }}},
        "automountServiceAccountToken": false,
        "terminationGracePeriodSeconds": 30,
        "containers": [container],
        "volumes": volumes,
    });
    // Left out when empty, so that setting none changes no pod template.
    if !pods.pull_secrets.is_empty() {
        pod_spec["imagePullSecrets"] = pods
            .pull_secrets
            .iter()
            .map(|name| json!({"name": name}))
            .collect();
    }
    if !gc.spec.tolerations.is_empty() {
        pod_spec["tolerations"] =
            serde_json::to_value(&gc.spec.tolerations).expect("tolerations serialise");
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": owned_meta(gc, &name),
        "spec": {
            "replicas": 1,
            "serviceName": service_name(&cluster),
            "podManagementPolicy": "Parallel",
            // The operator restarts brick pods itself, one at a time and only while every
            // brick is online with nothing to heal (see `rollout`).
            "updateStrategy": {"type": "OnDelete"},
            "selector": {"matchLabels": {LABEL_CLUSTER: cluster, LABEL_BRICK_SET: name}},
            "template": {
                "metadata": {"labels": pod_labels, "annotations": {ANNOTATION_NODE: node.name}},
                "spec": pod_spec,
            },
        }
    }))
    .expect("a valid StatefulSet")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Brick pod settings with this image and the defaults otherwise.
    pub(crate) fn pods(image: &str) -> BrickPods {
        BrickPods {
            image: image.into(),
            ..BrickPods::default()
        }
    }

    pub(crate) fn cluster() -> GlusterCluster {
        let v: serde_json::Value = serde_yaml::from_str(
            "apiVersion: glusterkube.dev/v1alpha1\nkind: GlusterCluster\nmetadata: {name: pool, namespace: storage, uid: u1}\nspec:\n  nodes:\n  - {name: node-a, storage: {directory: /srv/g}}\n  - {name: node.b, storage: {device: /dev/sdb}}\n",
        )
        .unwrap();
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn brick_pods_get_gluster_tls_unless_the_cluster_turns_it_off() {
        let pod = |gc: &GlusterCluster| {
            let sts = build_statefulset(gc, &gc.spec.nodes[0], &pods("img"));
            serde_json::to_value(sts.spec.unwrap().template.spec.unwrap()).unwrap()
        };
        let env = |p: &serde_json::Value| {
            p["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == "GK_GLUSTER_TLS")
                .map(|e| e["value"].clone())
        };
        let on = pod(&cluster());
        assert_eq!(env(&on), Some(json!("on")));
        let mounts = on["containers"][0]["volumeMounts"].as_array().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m["name"] == "gluster-tls" && m["mountPath"] == "/usr/lib/ssl"));
        let volumes = on["volumes"].as_array().unwrap();
        assert!(volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "pool-gluster-tls"));

        let mut gc = cluster();
        gc.spec.tls.enabled = false;
        let off = pod(&gc);
        assert_eq!(env(&off), Some(json!("off")));
        assert!(!off.to_string().contains("gluster-tls"));
    }

    #[test]
    fn several_disks_are_mounted_with_their_owner_and_state_apart() {
        let v: serde_json::Value = serde_yaml::from_str(
            "apiVersion: glusterkube.dev/v1alpha1\nkind: GlusterCluster\nmetadata: {name: pool, namespace: storage, uid: u1}\nspec:\n  nodes:\n  - {name: a, storage: {devices: [/dev/sdb, /dev/disk/by-id/ata-*, /dev/disk/by-id/nvme-*, '/dev/sd[c-e]']}}\n  - {name: b, storage: {directories: [/data/d1, /data/d2], stateDirectory: /data/state}}\n",
        )
        .unwrap();
        let gc: GlusterCluster = serde_json::from_value(v).unwrap();
        let pod = |i: usize| {
            let sts = build_statefulset(&gc, &gc.spec.nodes[i], &pods("img"));
            serde_json::to_value(sts.spec.unwrap().template.spec.unwrap()).unwrap()
        };
        let env = |p: &serde_json::Value, name: &str| {
            p["containers"][0]["env"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["name"] == name)
                .map(|e| e["value"].as_str().unwrap().to_string())
        };
        let host_paths = |p: &serde_json::Value| -> Vec<(String, String)> {
            let volumes = p["volumes"].as_array().unwrap();
            p["containers"][0]["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|m| {
                    let v = volumes.iter().find(|v| v["name"] == m["name"])?;
                    Some((
                        v["hostPath"]["path"].as_str()?.to_string(),
                        m["mountPath"].as_str()?.to_string(),
                    ))
                })
                .collect()
        };
        let a = pod(0);
        assert_eq!(
            env(&a, "GK_DEVICES").as_deref(),
            Some("/dev/sdb,/dev/disk/by-id/ata-*,/dev/disk/by-id/nvme-*,/dev/sd[c-e]")
        );
        assert_eq!(env(&a, "GK_OWNER").as_deref(), Some("storage/pool"));
        let mut a_paths = host_paths(&a);
        a_paths.sort();
        assert_eq!(
            a_paths,
            [
                ("/dev/disk/by-id".into(), "/dev/disk/by-id".into()),
                ("/dev/fuse".into(), "/dev/fuse".into()),
                ("/dev/sdb".into(), "/dev/sdb".into()),
                (
                    "/var/lib/glusterkube/storage.pool".into(),
                    STATE_DIR.to_string()
                ),
            ]
        );
        let b = pod(1);
        assert_eq!(
            env(&b, "GK_DIRECTORIES").as_deref(),
            Some("/var/lib/glusterkube-disks/0,/var/lib/glusterkube-disks/1")
        );
        let b_paths = host_paths(&b);
        for pair in [
            ("/data/state", STATE_DIR),
            ("/data/d1", "/var/lib/glusterkube-disks/0"),
            ("/data/d2", "/var/lib/glusterkube-disks/1"),
        ] {
            assert!(
                b_paths.contains(&(pair.0.into(), pair.1.into())),
                "{b_paths:?}"
            );
        }
        assert!(env(&b, "GK_DEVICES").is_none());
        // A single directory or device is as before: no owner, no disk lists.
        let single = cluster();
        let s = serde_json::to_value(build_statefulset(
            &single,
            &single.spec.nodes[0],
            &pods("img"),
        ))
        .unwrap();
        assert!(!s.to_string().contains("GK_OWNER"));
    }

    #[test]
    fn pull_secrets_reach_the_pod_and_none_change_nothing() {
        let gc = cluster();
        let with = serde_json::to_value(build_statefulset(
            &gc,
            &gc.spec.nodes[0],
            &BrickPods {
                pull_secrets: vec!["regcred".into()],
                ..pods("img:1")
            },
        ))
        .unwrap();
        assert_eq!(
            with["spec"]["template"]["spec"]["imagePullSecrets"],
            json!([{"name": "regcred"}])
        );
        let without =
            serde_json::to_value(build_statefulset(&gc, &gc.spec.nodes[0], &pods("img:1")))
                .unwrap();
        assert!(without["spec"]["template"]["spec"]
            .get("imagePullSecrets")
            .is_none());
    }

    #[test]
    fn statefulset_is_pinned_and_mounts_node_storage() {
        let gc = cluster();
        let sts = build_statefulset(&gc, &gc.spec.nodes[0], &pods("img:1"));
        let v = serde_json::to_value(&sts).unwrap();
        let pod = &v["spec"]["template"]["spec"];
        assert_eq!(v["spec"]["replicas"], 1);
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchFields"][0]["values"][0],
            "node-a"
        );
        assert_eq!(pod["containers"][0]["image"], "img:1");
        assert_eq!(pod["containers"][0]["securityContext"]["privileged"], true);
        let vols = pod["volumes"].as_array().unwrap();
        assert!(vols.iter().any(|v| v["hostPath"]["path"] == "/srv/g"));
        assert_eq!(v["metadata"]["ownerReferences"][0]["uid"], "u1");
        let dev = serde_json::to_value(build_statefulset(&gc, &gc.spec.nodes[1], &pods("img:1")))
            .unwrap();
        let env = dev["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .unwrap()
            .clone();
        assert!(env
            .iter()
            .any(|e| e["name"] == "GK_DEVICE" && e["value"] == "/dev/sdb"));
        // The agent's log level and gluster's log cap come from the operator's settings.
        let tuned = BrickPods {
            agent_log_level: "gk_agent=debug,info".into(),
            log_max_mib: 7,
            ..pods("img:1")
        };
        let sts = serde_json::to_value(build_statefulset(&gc, &gc.spec.nodes[1], &tuned)).unwrap();
        let env = &sts["spec"]["template"]["spec"]["containers"][0]["env"];
        for (name, value) in [("RUST_LOG", "gk_agent=debug,info"), ("GK_LOG_MAX_MIB", "7")] {
            assert!(
                env.as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["name"] == name && e["value"] == value),
                "{name}={value} in {env}"
            );
        }
        assert_eq!(
            build_pdb(&gc).spec.unwrap().max_unavailable,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
        );
        assert_eq!(
            build_service(&gc).spec.unwrap().cluster_ip.as_deref(),
            Some("None")
        );
    }
}
