//! Mount pods: each staged volume's gluster FUSE client runs in a pod of its own on the node,
//! not in the node plugin's container, so restarting or upgrading the plugin never touches a
//! running mount. The plugin makes the pod at NodeStageVolume (the pod mounts the volume at
//! the staging path, which reaches the host and the plugin through the kubelet directory's
//! Bidirectional propagation) and deletes it at NodeUnstageVolume. The pod's own process
//! (`gk-csi --mode mount`, see `crate::mount_client`) restarts a client that dies, and the
//! plugin's repair pass binds the targets again.
//!
//! Pods are not owned by the plugin (nor by the release): they outlive a plugin upgrade and
//! `helm uninstall`, and a new client image reaches a volume when it is next staged.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gk_api::agents::pod_problem;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tonic::Status;

use crate::mount::{self, reattach};
use crate::state::StagedVolume;

/// What a mount pod's process mounts and keeps mounted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    pub servers: Vec<String>,
    pub volume: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdir: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub tls: bool,
    /// The staging path, the same on the host, in the plugin and in the pod.
    pub target: PathBuf,
}

impl MountSpec {
    pub fn of(v: &StagedVolume) -> Self {
        Self {
            servers: v.servers.clone(),
            volume: v.volume.clone(),
            subdir: v.subdir.clone(),
            flags: v.flags.clone(),
            tls: v.tls,
            target: v.staging.clone(),
        }
    }
}

/// How the node plugin makes mount pods (from the chart's values).
#[derive(Clone)]
pub struct MountPods {
    pub client: kube::Client,
    /// The plugin's namespace, where the CSI client certificate Secret lives.
    pub namespace: String,
    pub node: String,
    pub image: String,
    pub pull_policy: String,
    /// Secrets (in the plugin's namespace) the image is pulled with.
    pub pull_secrets: Vec<String>,
    /// The kubelet's root directory: its plugins/ directory holds the staging paths.
    pub kubelet_dir: PathBuf,
    /// The Secret with the CSI node plugins' gluster certificate.
    pub tls_secret: String,
    pub priority_class: Option<String>,
    /// The client container's resources, as Kubernetes JSON.
    pub resources: Option<serde_json::Value>,
    /// How long NodeStageVolume waits for the client to mount.
    pub mount_timeout: Duration,
    /// The uid of this node's Node object, the mount pods' owner: `kubectl drain` evicts a
    /// pod with an owner (without `--force`), and they go with the Node. None when the plugin
    /// could not read it (drain then refuses mount pods).
    pub node_uid: Option<String>,
}

/// How long a mount pod asked to stop (evicted by a drain, deleted by hand) keeps serving
/// while the volume is still staged: until the plugin unstages the volume (the last
/// application using it on the node has stopped, [`release_marker`]) or its client stops,
/// at most this long. Applications shutting down during a drain keep their files to the end.
pub const TERMINATION_GRACE: Duration = Duration::from_secs(600);

/// The file whose presence tells a mount pod that the plugin is done with the volume staged
/// at `staging` (written before the plugin deletes the pod, removed before it makes one): a
/// sibling of the staging path, in the kubelet's per-volume directory that the pod sees.
pub fn release_marker(staging: &Path) -> PathBuf {
    let mut name = staging
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_else(|| "staging".into());
    name.push(".released");
    staging.with_file_name(name)
}

/// Tells the mount pod of `staging` that it may stop at once.
pub(crate) fn release(staging: &Path) {
    if let Err(e) = std::fs::write(release_marker(staging), b"") {
        tracing::warn!(staging = %staging.display(), error = %e, "could not mark the volume released; its mount pod stops only when its grace period ends");
    }
}

/// Withdraws a release: before a pod is made to serve `staging`, and once the pod is gone (the
/// kubelet removes the staging path's directory after NodeUnstageVolume, and fails to while a
/// file of ours is in it).
pub(crate) fn unrelease(staging: &Path) {
    match std::fs::remove_file(release_marker(staging)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(staging = %staging.display(), error = %e, "could not remove an old release mark; a drain may stop this volume's mount pod early");
        }
    }
}

/// The files of a gluster certificate, as gluster reads them from OpenSSL's directory.
pub const GLUSTER_TLS_FILES: [&str; 3] = ["glusterfs.pem", "glusterfs.key", "glusterfs.ca"];

/// The label every mount pod carries.
pub const MOUNT_POD_LABEL: (&str, &str) = ("app.kubernetes.io/component", "mount");
/// The annotation naming the volume a mount pod serves.
pub const VOLUME_ANNOTATION: &str = "glusterkube.dev/volume-id";
/// The annotation naming the staging path a mount pod mounts.
pub const STAGING_ANNOTATION: &str = "glusterkube.dev/staging";

/// The mount pod of `volume_id` on `node`: one per volume and node (a volume is staged once
/// per node), named by a stable hash so the plugin finds it again after a restart.
pub fn pod_name(node: &str, volume_id: &str) -> String {
    let hash = gk_api::names::stable_hash(format!("{node}\n{volume_id}").as_bytes());
    format!("gk-mount-{hash:016x}")
}

impl MountPods {
    /// The pod that serves `v` on this node.
    pub fn pod(&self, v: &StagedVolume) -> Result<Pod, Status> {
        let spec = serde_json::to_string(&MountSpec::of(v))
            .map_err(|e| Status::internal(format!("mount spec of {}: {e}", v.volume_id)))?;
        let plugins = self.kubelet_dir.join("plugins");
        let mut mounts = vec![
            json!({"name": "kubelet-plugins", "mountPath": plugins, "mountPropagation": "Bidirectional"}),
            json!({"name": "fuse", "mountPath": "/dev/fuse"}),
        ];
        let mut volumes = vec![
            json!({"name": "kubelet-plugins", "hostPath": {"path": plugins, "type": "Directory"}}),
            json!({"name": "fuse", "hostPath": {"path": "/dev/fuse", "type": "CharDevice"}}),
        ];
        // glusterfs reads its certificate from OpenSSL's directory, per connection.
        let gluster_tls =
            json!({"name": "gluster-tls", "mountPath": "/usr/lib/ssl", "readOnly": true});
        match &v.tls_secret {
            // A pool made by hand: its own certificate, only the three files of it (the
            // Secret also holds the brick agents' client key, which no mount needs).
            Some(secret) => {
                mounts.push(gluster_tls);
                let items: Vec<_> = GLUSTER_TLS_FILES
                    .iter()
                    .map(|f| json!({"key": f, "path": f}))
                    .collect();
                volumes.push(json!({"name": "gluster-tls", "secret": {"secretName": secret, "defaultMode": 0o400, "items": items}}));
            }
            None if v.tls => {
                mounts.push(gluster_tls);
                volumes.push(json!({"name": "gluster-tls", "secret": {"secretName": self.tls_secret, "defaultMode": 0o400}}));
            }
            None => {}
        }
        let mut container = json!({
            "name": "client",
            "image": self.image,
            "imagePullPolicy": self.pull_policy,
            "command": ["/usr/local/bin/gk-csi"],
            "args": ["--mode=mount"],
            "env": [{"name": "GK_MOUNT_SPEC", "value": spec}],
            // FUSE and Bidirectional propagation need a privileged container.
            "securityContext": {"privileged": true},
            "volumeMounts": mounts,
        });
        if let Some(r) = &self.resources {
            container["resources"] = r.clone();
        }
        let mut pod_spec = json!({
            "nodeName": self.node,
            // The client connects from the node, as any node-level mount would.
            "hostNetwork": true,
            "dnsPolicy": "ClusterFirstWithHostNet",
            "automountServiceAccountToken": false,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": TERMINATION_GRACE.as_secs(),
            // Wherever the node plugin runs, its mounts must run too.
            "tolerations": [{"operator": "Exists"}],
            "containers": [container],
            "volumes": volumes,
        });
        if let Some(pc) = &self.priority_class {
            pod_spec["priorityClassName"] = json!(pc);
        }
        if !self.pull_secrets.is_empty() {
            pod_spec["imagePullSecrets"] = self
                .pull_secrets
                .iter()
                .map(|name| json!({"name": name}))
                .collect();
        }
        let owners: Vec<serde_json::Value> = self
            .node_uid
            .iter()
            .map(|uid| {
                json!({"apiVersion": "v1", "kind": "Node", "name": self.node, "uid": uid,
                       "controller": true, "blockOwnerDeletion": false})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": pod_name(&self.node, &v.volume_id),
                "namespace": self.namespace,
                "ownerReferences": owners,
                "labels": {
                    "app.kubernetes.io/name": "glusterkube",
                    MOUNT_POD_LABEL.0: MOUNT_POD_LABEL.1,
                    "glusterkube.dev/node": self.node,
                },
                "annotations": {VOLUME_ANNOTATION: v.volume_id, STAGING_ANNOTATION: v.staging},
            },
            "spec": pod_spec,
        }))
        .map_err(|e| Status::internal(format!("mount pod of {}: {e}", v.volume_id)))
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Makes the mount pod of `v` unless it exists as `v` asks. One that mounts something
    /// else (other flags or servers, another staging path: a stage that failed before) and
    /// serves nothing is replaced, so a corrected request never waits on a pod made for a
    /// wrong one.
    pub async fn ensure(&self, v: &StagedVolume) -> Result<(), Status> {
        let pod = self.pod(v)?;
        let name = pod_name(&self.node, &v.volume_id);
        for _ in 0..2 {
            unrelease(&v.staging);
            match self.api().create(&PostParams::default(), &pod).await {
                Ok(_) => {
                    tracing::info!(volume_id = %v.volume_id, pod = %name, "made mount pod");
                    return Ok(());
                }
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    return Err(Status::unavailable(format!(
                        "making the mount pod of {}: {e}",
                        v.volume_id
                    )))
                }
            }
            let existing = self
                .api()
                .get_opt(&name)
                .await
                .map_err(|e| Status::unavailable(format!("reading mount pod {name}: {e}")))?;
            let Some(existing) = existing else { continue };
            let same = existing.metadata.deletion_timestamp.is_none()
                && existing
                    .spec
                    .as_ref()
                    .and_then(|s| s.containers.first())
                    .and_then(|c| c.env.clone())
                    == pod
                        .spec
                        .as_ref()
                        .and_then(|s| s.containers.first())
                        .and_then(|c| c.env.clone());
            if same || serving(&v.staging) {
                return Ok(());
            }
            tracing::warn!(volume_id = %v.volume_id, pod = %name, "the mount pod mounts something else and serves nothing; replacing it");
            self.remove(&v.volume_id, &v.staging).await?;
        }
        Err(Status::unavailable(format!(
            "mount pod {name} of {} was made by another request meanwhile; the kubelet will call again",
            v.volume_id
        )))
    }

    /// Makes the mount pod of `v` and waits until its client serves the staging path. A pod
    /// that cannot run (its image cannot be pulled, say) fails at once, saying why.
    pub async fn mount(&self, v: &StagedVolume) -> Result<(), Status> {
        self.ensure(v).await?;
        let name = pod_name(&self.node, &v.volume_id);
        let deadline = Instant::now() + self.mount_timeout;
        let mut checked = Instant::now();
        loop {
            if serving(&v.staging) {
                return Ok(());
            }
            if checked.elapsed() >= Duration::from_secs(2) {
                checked = Instant::now();
                if let Ok(Some(pod)) = self.api().get_opt(&name).await {
                    if let Some((why, true)) = pod_problem(&pod) {
                        return Err(Status::unavailable(format!(
                            "mount pod {name} of {}: {why}",
                            v.volume_id
                        )));
                    }
                }
            }
            if Instant::now() > deadline {
                return Err(Status::deadline_exceeded(format!(
                    "mount pod {name} has not mounted {} within {}s; see `kubectl -n {} logs {name}`",
                    v.volume_id,
                    self.mount_timeout.as_secs(),
                    self.namespace
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Deletes the mount pod of `volume_id`, staged at `staging`, and waits until it is gone
    /// (released first, so it stops at once; its client unmounts as it stops). The release is
    /// withdrawn once the pod is gone.
    pub async fn remove(&self, volume_id: &str, staging: &Path) -> Result<(), Status> {
        release(staging);
        let gone = self.delete_and_wait(volume_id).await;
        if gone.is_ok() {
            unrelease(staging);
        }
        gone
    }

    /// Withdraws the release of `staging` once pod `name`, deleted by the reaper, is gone: a
    /// pod that never ran our process (a crash loop, an image that cannot start) does not
    /// remove the mark as it stops, and the kubelet cannot remove the volume's directory while
    /// the mark is in it. Gives up once the pod's grace period and a minute have passed.
    pub async fn unrelease_when_gone(&self, name: &str, staging: &Path) {
        let deadline = Instant::now() + TERMINATION_GRACE + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(None) = self.api().get_opt(name).await {
                unrelease(staging);
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        tracing::warn!(pod = name, staging = %staging.display(), "the reaped mount pod is still there; its release mark stays");
    }

    async fn delete_and_wait(&self, volume_id: &str) -> Result<(), Status> {
        let name = pod_name(&self.node, volume_id);
        match self.api().delete(&name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
            Err(e) => {
                return Err(Status::unavailable(format!(
                    "deleting mount pod {name}: {e}"
                )))
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match self.api().get_opt(&name).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) | Err(_) => tokio::time::sleep(Duration::from_millis(300)).await,
            }
        }
        Err(Status::deadline_exceeded(format!(
            "mount pod {name} is still stopping; the kubelet will call again"
        )))
    }
}

/// Whether a live gluster client serves `path` (a FUSE mount there, and its process alive).
pub fn serving(path: &Path) -> bool {
    let mounted = reattach::own_mounts().is_ok_and(|t| {
        t.iter()
            .rev()
            .find(|m| m.mount_point == path)
            .is_some_and(|m| m.fs_type.starts_with("fuse"))
    });
    mounted && mount::fuse_client_pid(path).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn staged(tls: bool) -> StagedVolume {
        StagedVolume {
            volume_id: "subdir/storage/pool/pvc-1".into(),
            staging: PathBuf::from("/var/lib/kubelet/plugins/kubernetes.io/csi/x/globalmount"),
            servers: vec!["a".into(), "b".into()],
            volume: "storage-pool".into(),
            subdir: Some("pvc-1".into()),
            flags: vec![],
            tls,
            tls_secret: None,
            mount_pod: None,
            targets: vec![],
        }
    }

    async fn pods() -> MountPods {
        // A client that is never called: building the pod needs none.
        let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
        MountPods {
            client: kube::Client::try_from(config).unwrap(),
            namespace: "glusterkube-system".into(),
            node: "n1".into(),
            image: "ghcr.io/glusterkube/csi:1".into(),
            pull_policy: "IfNotPresent".into(),
            pull_secrets: vec!["regcred".into()],
            kubelet_dir: PathBuf::from("/var/lib/kubelet"),
            tls_secret: "glusterkube-csi-gluster-tls".into(),
            priority_class: Some("system-node-critical".into()),
            resources: None,
            mount_timeout: Duration::from_secs(60),
            node_uid: Some("0f9c2e3a-node-uid".into()),
        }
    }

    #[test]
    fn the_release_mark_sits_beside_the_staging_path() {
        assert_eq!(
            release_marker(Path::new(
                "/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount"
            )),
            PathBuf::from("/var/lib/kubelet/plugins/kubernetes.io/csi/d/abc/globalmount.released")
        );
        let dir = std::env::temp_dir().join(format!("gk-release-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("globalmount")).unwrap();
        let staging = dir.join("globalmount");
        unrelease(&staging); // nothing to withdraw: fine
        release(&staging);
        assert!(release_marker(&staging).exists());
        unrelease(&staging);
        assert!(!release_marker(&staging).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_mount_pod_runs_the_client_on_the_node_and_propagates_its_mount() {
        let p = pods().await;
        let v = serde_json::to_value(p.pod(&staged(true)).unwrap()).unwrap();
        assert_eq!(
            v["metadata"]["name"],
            pod_name("n1", "subdir/storage/pool/pvc-1")
        );
        assert_eq!(v["spec"]["nodeName"], "n1");
        // Owned by its Node: drain evicts it without --force, and it goes with the Node.
        assert_eq!(
            v["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "n1",
                    "uid": "0f9c2e3a-node-uid", "controller": true, "blockOwnerDeletion": false}])
        );
        assert_eq!(
            v["spec"]["terminationGracePeriodSeconds"],
            TERMINATION_GRACE.as_secs()
        );
        assert_eq!(v["spec"]["priorityClassName"], "system-node-critical");
        assert_eq!(v["spec"]["imagePullSecrets"], json!([{"name": "regcred"}]));
        let c = &v["spec"]["containers"][0];
        assert_eq!(c["securityContext"]["privileged"], true);
        let spec: MountSpec = serde_json::from_str(c["env"][0]["value"].as_str().unwrap()).unwrap();
        assert_eq!(spec, MountSpec::of(&staged(true)));
        let mounts = c["volumeMounts"].as_array().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m["mountPath"] == "/var/lib/kubelet/plugins"
                && m["mountPropagation"] == "Bidirectional"));
        assert!(mounts.iter().any(|m| m["mountPath"] == "/usr/lib/ssl"));
        // No certificate for a volume without TLS.
        let plain = serde_json::to_value(p.pod(&staged(false)).unwrap()).unwrap();
        assert!(!plain.to_string().contains("gluster-tls"));
        // A pool made by hand: its own Secret, and only the certificate's files of it.
        let own = StagedVolume {
            tls_secret: Some("legacy-pool".into()),
            ..staged(true)
        };
        let v = serde_json::to_value(p.pod(&own).unwrap()).unwrap();
        let secret = v["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|vol| vol["name"] == "gluster-tls")
            .unwrap()["secret"]
            .clone();
        assert_eq!(secret["secretName"], "legacy-pool");
        assert_eq!(
            secret["items"],
            json!([
                {"key": "glusterfs.pem", "path": "glusterfs.pem"},
                {"key": "glusterfs.key", "path": "glusterfs.key"},
                {"key": "glusterfs.ca", "path": "glusterfs.ca"},
            ])
        );
        // I/O TLS without management TLS still needs the certificate.
        let io_only = StagedVolume {
            tls_secret: Some("legacy-pool".into()),
            ..staged(false)
        };
        let v = serde_json::to_value(p.pod(&io_only).unwrap()).unwrap();
        assert!(v.to_string().contains("legacy-pool"));
        // Without the Node's uid, no owner (drain then needs --force for it).
        let unowned = MountPods {
            node_uid: None,
            ..pods().await
        };
        let v = serde_json::to_value(unowned.pod(&staged(true)).unwrap()).unwrap();
        assert!(v["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|o| o.is_empty()));
        // One pod per volume and node.
        assert_ne!(pod_name("n1", "a"), pod_name("n2", "a"));
        assert_ne!(pod_name("n1", "a"), pod_name("n1", "b"));
    }
}
