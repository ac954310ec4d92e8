//! Hostile requests to the live CSI node plugin (the chart's DaemonSet on gk-node-1, reached
//! through its socket in the kubelet's plugins directory): every refused input is answered
//! at once with the field named, leaves no mount pod, record or directory behind, and a
//! correct request on the same staging path works afterwards. A mount pod that outlived its
//! reason (one of a volume this node has not staged, whose process cannot start) is removed
//! by the plugin with a Warning Event saying why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use csi::node_client::NodeClient;
use csi_proto::v1 as csi;
use tonic::transport::Channel;
use tonic::Code;

use super::{
    mount_pod_of, pv_of, pvc_bound, release_pods, rwx_claim, until, Cluster, NS,
    REAP_GRACE_SECONDS, RELEASE_NS,
};

const DRIVER: &str = "gluster.glusterkube.dev";
const KUBELET: &str = "/var/lib/kubelet";
/// Staging paths of this scenario: under the kubelet's plugins directory, where the plugin
/// mounts, but none the kubelet itself uses.
const STAGING_ROOT: &str = "/var/lib/kubelet/plugins/gk-e2e-hostile";
/// The volume of the orphaned mount pod: never staged anywhere.
const GONE_VOLUME: &str = "subdir/gk-demo/pool/e2e-gone";
/// The orphaned mount pod's per-volume directory, as the kubelet would have it: the plugin
/// marks the orphan released there as it removes it, and must withdraw the mark once the pod
/// is gone (its /bin/false never ran the process that removes it as it stops), or the kubelet
/// could never remove the directory.
const ORPHAN_DIR: &str = "/var/lib/kubelet/plugins/gk-e2e-orphan";

async fn node_client() -> NodeClient<Channel> {
    let socket = PathBuf::from(format!("{KUBELET}/plugins/{DRIVER}/csi.sock"));
    let ch = gk_testenv::unix_channel(&socket)
        .await
        .expect("the node plugin's socket answers");
    NodeClient::new(ch)
}

fn capability(flags: &[&str]) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_type: Some(csi::volume_capability::AccessType::Mount(
            csi::volume_capability::MountVolume {
                mount_flags: flags.iter().map(|s| s.to_string()).collect(),
                ..Default::default()
            },
        )),
        access_mode: Some(csi::volume_capability::AccessMode {
            mode: csi::volume_capability::access_mode::Mode::MultiNodeMultiWriter as i32,
        }),
    }
}

/// A NodeStageVolume of `volume_id` with `context` at `staging`.
fn stage_req(
    volume_id: &str,
    context: &HashMap<String, String>,
    staging: &str,
    cap: Option<csi::VolumeCapability>,
) -> csi::NodeStageVolumeRequest {
    csi::NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.into(),
        volume_capability: cap,
        volume_context: context.clone(),
        ..Default::default()
    }
}

/// Sends `req` and expects `code` within 5 s, with `field` in the message.
async fn refused<T: std::fmt::Debug>(
    what: &str,
    call: impl std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    code: Code,
    field: &str,
) {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .unwrap_or_else(|_| panic!("{what}: no answer within 10 s"));
    let e = answer.expect_err(what);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{what}: answered after {:?}",
        started.elapsed()
    );
    assert_eq!(e.code(), code, "{what}: {}", e.message());
    assert!(
        e.message().contains(field),
        "{what}: the refusal does not name {field}: {}",
        e.message()
    );
}

/// The plugin's record of a volume (its state directory is the plugin's directory).
fn record_of(volume_id: &str) -> PathBuf {
    PathBuf::from(format!(
        "{KUBELET}/plugins/{DRIVER}/volumes/{}.json",
        volume_id.replace('/', "%")
    ))
}

fn mount_pods_of(k: &Cluster, volume_id: &str) -> Vec<String> {
    release_pods(k, "mount")["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["annotations"]["glusterkube.dev/volume-id"] == volume_id)
        .map(|p| p["metadata"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(path.to_str().unwrap()))
}

/// A mount pod of a volume this node never staged, whose process cannot start: what a stage
/// with a refused flag used to leave behind, restarting for ever.
fn orphan_mount_pod(k: &Cluster, image: &str) {
    k.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: gk-mount-e2e-orphan
  namespace: {RELEASE_NS}
  labels:
    app.kubernetes.io/name: glusterkube
    app.kubernetes.io/component: mount
    glusterkube.dev/node: gk-node-1
  annotations:
    glusterkube.dev/volume-id: {GONE_VOLUME}
    glusterkube.dev/staging: {ORPHAN_DIR}/globalmount
spec:
  nodeName: gk-node-1
  tolerations: [{{operator: Exists}}]
  restartPolicy: Always
  terminationGracePeriodSeconds: 1
  containers:
    - name: client
      image: {image}
      command: ["/bin/false"]
"#
    ));
}

pub async fn hostile_node_requests(k: &Cluster) {
    let started = Instant::now();
    // The orphan first: the plugin removes a pod only once it is REAP_GRACE_SECONDS old.
    let image = mount_pod_of(k, &pv_of(k, "shared")).expect("the demo's PV has a mount pod")
        ["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::create_dir_all(ORPHAN_DIR).unwrap();
    orphan_mount_pod(k, &image);

    k.apply(&rwx_claim("hostile", "glusterkube-demo", "64Mi"));
    let pv = pvc_bound(k, "hostile", Duration::from_secs(120)).await;
    let pv_json = k.json(&["get", "pv", &pv]);
    let volume_id = pv_json["spec"]["csi"]["volumeHandle"]
        .as_str()
        .unwrap()
        .to_string();
    let context: HashMap<String, String> =
        serde_json::from_value(pv_json["spec"]["csi"]["volumeAttributes"].clone()).unwrap();
    let staging = format!("{STAGING_ROOT}/{pv}/globalmount");
    let mut node = node_client().await;
    let ok = || Some(capability(&[]));

    // NodeStageVolume: refused flags (a StorageClass typo reaches every node this way),
    // paths, contexts and capabilities.
    let with = |pairs: &[(&str, &str)]| {
        let mut c = context.clone();
        for (key, value) in pairs {
            c.insert(key.to_string(), value.to_string());
        }
        c
    };
    let stages: Vec<(&str, csi::NodeStageVolumeRequest, Code, &str)> = vec![
        (
            "a flag list in one flag",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(capability(&["ro,remount,exec"])),
            ),
            Code::InvalidArgument,
            "mount_flags[0]",
        ),
        (
            "a volfile server as a flag",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(capability(&["--volfile-server=1.2.3.4"])),
            ),
            Code::InvalidArgument,
            "mount_flags[0]",
        ),
        (
            "an unknown flag after a good one",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(capability(&["acl", "noatime"])),
            ),
            Code::InvalidArgument,
            "mount_flags[1]",
        ),
        (
            "ro with rw",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(capability(&["ro", "rw"])),
            ),
            Code::InvalidArgument,
            "mount_flags[1]",
        ),
        (
            "another filesystem",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(csi::VolumeCapability {
                    access_type: Some(csi::volume_capability::AccessType::Mount(
                        csi::volume_capability::MountVolume {
                            fs_type: "ext4".into(),
                            ..Default::default()
                        },
                    )),
                    ..capability(&[])
                }),
            ),
            Code::InvalidArgument,
            "fs_type",
        ),
        (
            "block access",
            stage_req(
                &volume_id,
                &context,
                &staging,
                Some(csi::VolumeCapability {
                    access_type: Some(
                        csi::volume_capability::AccessType::Block(Default::default()),
                    ),
                    ..capability(&[])
                }),
            ),
            Code::InvalidArgument,
            "volume_capability",
        ),
        (
            "no capability",
            stage_req(&volume_id, &context, &staging, None),
            Code::InvalidArgument,
            "volume_capability",
        ),
        (
            "no volume id",
            stage_req("", &context, &staging, ok()),
            Code::InvalidArgument,
            "volume_id",
        ),
        (
            "the plugin's own /etc",
            stage_req(&volume_id, &context, "/etc", ok()),
            Code::InvalidArgument,
            "staging_target_path",
        ),
        (
            "a way out with ..",
            stage_req(
                &volume_id,
                &context,
                &format!("{STAGING_ROOT}/../../../../etc"),
                ok(),
            ),
            Code::InvalidArgument,
            "staging_target_path",
        ),
        (
            "a relative path",
            stage_req(&volume_id, &context, "plugins/x", ok()),
            Code::InvalidArgument,
            "staging_target_path",
        ),
        (
            "a publish directory as staging path",
            stage_req(
                &volume_id,
                &context,
                &format!("{KUBELET}/pods/x/globalmount"),
                ok(),
            ),
            Code::InvalidArgument,
            "staging_target_path",
        ),
        (
            "an unknown context key",
            stage_req(&volume_id, &with(&[("server", "a")]), &staging, ok()),
            Code::InvalidArgument,
            "volume_context.server",
        ),
        (
            "a server that is no host name",
            stage_req(&volume_id, &with(&[("servers", "a b")]), &staging, ok()),
            Code::InvalidArgument,
            "volume_context.servers",
        ),
        (
            "a subdirectory leading out",
            stage_req(&volume_id, &with(&[("subdir", "../other")]), &staging, ok()),
            Code::InvalidArgument,
            "volume_context.subdir",
        ),
        (
            "a volume name with a slash",
            stage_req(
                &volume_id,
                &with(&[("glusterVolume", "a/b")]),
                &staging,
                ok(),
            ),
            Code::InvalidArgument,
            "volume_context.glusterVolume",
        ),
        (
            "tls neither true nor false",
            stage_req(&volume_id, &with(&[("tls", "maybe")]), &staging, ok()),
            Code::InvalidArgument,
            "volume_context.tls",
        ),
        (
            "an unknown profile",
            stage_req(&volume_id, &with(&[("profile", "Turbo")]), &staging, ok()),
            Code::InvalidArgument,
            "volume_context.profile",
        ),
    ];
    let count = stages.len();
    for (what, req, code, field) in stages {
        refused(what, node.node_stage_volume(req), code, field).await;
    }
    // NodePublishVolume: the same flags are refused there, targets stay under pods/, and an
    // unstaged volume is not bound.
    let target = format!("{KUBELET}/pods/gk-e2e-hostile/volumes/{pv}/mount");
    let publish =
        |target: &str, cap: Option<csi::VolumeCapability>| csi::NodePublishVolumeRequest {
            volume_id: volume_id.clone(),
            staging_target_path: staging.clone(),
            target_path: target.into(),
            volume_capability: cap,
            volume_context: context.clone(),
            ..Default::default()
        };
    refused(
        "publish with a refused flag",
        node.node_publish_volume(publish(&target, Some(capability(&["exec"])))),
        Code::InvalidArgument,
        "mount_flags[0]",
    )
    .await;
    refused(
        "publish over the plugin's /etc",
        node.node_publish_volume(publish("/etc", ok())),
        Code::InvalidArgument,
        "target_path",
    )
    .await;
    refused(
        "publish of a volume not staged",
        node.node_publish_volume(publish(&target, ok())),
        Code::FailedPrecondition,
        "not staged",
    )
    .await;
    // Nothing was made for any of them.
    assert!(
        mount_pods_of(k, &volume_id).is_empty(),
        "a refused request left a mount pod"
    );
    assert!(
        !record_of(&volume_id).exists(),
        "a refused request left the plugin's record"
    );
    assert!(
        !Path::new(&staging).exists(),
        "a refused request made {staging}"
    );
    eprintln!(
        "e2e: {} hostile node requests refused at once, nothing left behind",
        count + 3
    );

    // The same staging path with a correct request works, and the volume is used.
    node.node_stage_volume(stage_req(&volume_id, &context, &staging, ok()))
        .await
        .expect("a correct stage after refused ones");
    assert!(mounted(Path::new(&staging)), "{staging} is not mounted");
    std::fs::write(Path::new(&staging).join("hostile.txt"), b"written").unwrap();
    assert_eq!(
        std::fs::read(Path::new(&staging).join("hostile.txt")).unwrap(),
        b"written"
    );
    assert_eq!(mount_pods_of(k, &volume_id).len(), 1);
    // The same volume at a second staging path while it is staged at the first: refused,
    // the first untouched.
    let second = format!("{STAGING_ROOT}/{pv}-second/globalmount");
    refused(
        "a second staging path",
        node.node_stage_volume(stage_req(&volume_id, &context, &second, ok())),
        Code::FailedPrecondition,
        "staged on this node at",
    )
    .await;
    assert!(mounted(Path::new(&staging)));
    // Staging again where it is: done already.
    node.node_stage_volume(stage_req(&volume_id, &context, &staging, ok()))
        .await
        .expect("staging again is idempotent");
    node.node_unstage_volume(csi::NodeUnstageVolumeRequest {
        volume_id: volume_id.clone(),
        staging_target_path: staging.clone(),
    })
    .await
    .expect("unstage");
    assert!(!mounted(Path::new(&staging)));
    assert!(mount_pods_of(k, &volume_id).is_empty());
    assert!(!record_of(&volume_id).exists());
    k.kubectl(&["-n", NS, "delete", "pvc", "hostile", "--wait=false"]);
    let _ = std::fs::remove_dir_all(STAGING_ROOT);

    // The orphan goes by itself, with a Warning Event on it saying why.
    let reaped = until(
        "the orphaned mount pod removed by the node plugin",
        Duration::from_secs(240),
        Duration::from_secs(2),
        || {
            k.kubectl_ok(&["-n", RELEASE_NS, "get", "pod", "gk-mount-e2e-orphan"])
                .is_none()
                .then_some(started.elapsed())
        },
    )
    .await;
    let events = k.json(&[
        "-n",
        RELEASE_NS,
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=gk-mount-e2e-orphan,reason=MountPodOrphaned",
    ]);
    let notes: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .collect();
    assert!(
        notes.iter().any(|n| n.contains(GONE_VOLUME)),
        "no MountPodOrphaned event names {GONE_VOLUME}: {events}"
    );
    eprintln!("e2e: the orphaned mount pod was removed {reaped:?} after it was made");
    assert!(
        reaped >= Duration::from_secs(REAP_GRACE_SECONDS),
        "the orphan went {reaped:?} after it was made, before its grace of {REAP_GRACE_SECONDS} s"
    );
    until(
        "the orphan's release mark withdrawn once it is gone",
        Duration::from_secs(30),
        Duration::from_secs(1),
        || {
            let left: Vec<_> = std::fs::read_dir(ORPHAN_DIR)
                .unwrap()
                .filter_map(|e| e.ok())
                .collect();
            left.is_empty().then_some(())
        },
    )
    .await;
    std::fs::remove_dir(ORPHAN_DIR).unwrap();
}
