//! End to end on real nodes: `demo.sh` (three kubelets with containerd, locally built images,
//! the Helm chart, a 3-node GlusterCluster, a replica-3 pool, a subdirectory StorageClass, an
//! RWX PVC and two pods reading each other's files), then failures and day-one operations
//! against that chain, then `helm uninstall`.
//!
//! One test, in order, since every step builds on the chain the demo made. It leaves no node
//! running: other tests share the control plane and expect no kubelet.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gk_testenv::k8s::ControlPlane;
use gk_testenv::repo_root;
use serde_json::Value;

const NS: &str = "gk-demo";
const RELEASE_NS: &str = "glusterkube-system";
const NODE_DATA: &str = "/var/lib/glusterkube-node";

fn sh(cmd: &str, args: &[&str]) -> std::process::Output {
    Command::new(cmd)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"))
}

/// Runs a script with its output passed through (the demo's progress is worth seeing).
fn script(path: &str, args: &[&str], env: &[(&str, &str)]) {
    let started = Instant::now();
    let status = Command::new("bash")
        .arg(repo_root().join(path))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo_root())
        .status()
        .unwrap_or_else(|e| panic!("running {path}: {e}"));
    assert!(
        status.success(),
        "{path} {args:?} failed ({status}) after {:?}",
        started.elapsed()
    );
}

/// Runs a script and returns what it printed (both streams), failing when it fails.
fn script_output(path: &str, args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo_root().join(path))
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("running {path}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{path} {args:?} failed: {text}");
    text
}

struct Cluster {
    cp: ControlPlane,
}

impl Cluster {
    fn kubectl(&self, args: &[&str]) -> String {
        self.cp
            .kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}"))
    }

    fn kubectl_ok(&self, args: &[&str]) -> Option<String> {
        self.cp.kubectl(args).ok()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(&all)).expect("kubectl prints JSON")
    }

    /// The object as JSON, or None while it does not exist (a pod between its eviction and
    /// its StatefulSet making it again).
    fn json_opt(&self, args: &[&str]) -> Option<Value> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl_ok(&all)?).ok()
    }

    fn apply(&self, yaml: &str) {
        let f = std::env::temp_dir().join(format!("gk-e2e-{}.yaml", std::process::id()));
        std::fs::write(&f, yaml).unwrap();
        self.kubectl(&["apply", "-f", f.to_str().unwrap()]);
        let _ = std::fs::remove_file(&f);
    }

    /// The status of condition `kind` of `obj`.
    fn condition(&self, obj: &Value, kind: &str) -> Option<String> {
        Self::condition_of(obj, kind).map(|c| c["status"].as_str().unwrap_or("").to_string())
    }

    /// The whole condition `kind` of `obj` (status, reason, message).
    fn condition_of<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
        obj["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == kind)
    }

    /// A JSON merge patch of one object in the demo's namespace.
    fn merge_patch(&self, kind: &str, name: &str, patch: &str) {
        self.kubectl(&["-n", NS, "patch", kind, name, "--type=merge", "-p", patch]);
    }

    fn pod_phase(&self, name: &str) -> String {
        self.kubectl(&[
            "-n",
            NS,
            "get",
            "pod",
            name,
            "-o",
            "jsonpath={.status.phase}",
        ])
    }
}

/// Deletes `kind`/`name` of the demo's namespace and waits until the operator has finished
/// with it (its finalizer is the operator's, so only the operator lets it go).
async fn deleted_by_operator(k: &Cluster, kind: &str, name: &str) {
    k.kubectl(&["-n", NS, "delete", kind, name, "--wait=false"]);
    until(
        &format!("the operator deleting {kind} {name}"),
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            k.kubectl_ok(&["-n", NS, "get", kind, name])
                .is_none()
                .then_some(())
        },
    )
    .await;
}

/// Waits until pod `name` of the demo's namespace runs.
async fn running(k: &Cluster, name: &str) {
    until(
        &format!("pod {name} running"),
        Duration::from_secs(120),
        Duration::from_millis(500),
        || (k.pod_phase(name) == "Running").then_some(()),
    )
    .await;
}

/// Polls `f` every `every` until it returns Some, or panics naming `what` after `limit`.
async fn until<T>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(every).await;
    }
}

/// Whatever happens, leave the machine without the demo and without nodes (processes, mounts,
/// the bridge, the in-memory image store: the next run imports the images again in seconds).
struct Teardown;

impl Drop for Teardown {
    fn drop(&mut self) {
        let root = repo_root();
        let _ = Command::new("bash")
            .arg(root.join("demo.sh"))
            .arg("down")
            .status();
        let _ = Command::new("bash")
            .arg(root.join("tests/env/node.sh"))
            .arg("clean")
            .status();
    }
}

/// Every copy of `file` under the node-local brick directories of the demo cluster.
fn brick_copies(file: &str) -> Vec<PathBuf> {
    let out = sh(
        "find",
        &[
            NODE_DATA,
            "-path",
            "*/bricks/*",
            "-name",
            file,
            "-type",
            "f",
        ],
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("/.glusterfs/"))
        .map(PathBuf::from)
        .collect()
}

fn node_of(path: &Path) -> String {
    path.strip_prefix(NODE_DATA)
        .ok()
        .and_then(|p| p.components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn writer_pod(name: &str, claim: &str, script: &str) -> String {
    let script = script.replace('\n', "\n          ");
    format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {NS}, labels: {{app: gk-e2e}}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gk-node-1}}
  tolerations: [{{key: glusterkube.dev/local-node, operator: Exists, effect: NoSchedule}}]
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
    - name: main
      image: localhost/glusterkube/workload:{version}
      command: ["/bin/sh", "-c"]
      args:
        - |
          {script}
      volumeMounts: [{{name: data, mountPath: /data}}]
  volumes:
    - {{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}
"#,
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// The pool's TLS, checked from outside the operator: its options as gluster reports them,
/// and a FUSE client in a pod of its own, refused without a certificate and let in with the
/// CSI node plugins'.
async fn tls_enforced(k: &Cluster) {
    let pool = k.json(&["-n", NS, "get", "glustervolume", "pool"]);
    assert_eq!(pool["status"]["mount"]["tls"], true, "{}", pool["status"]);
    let volume = pool["status"]["mount"]["volume"]
        .as_str()
        .unwrap()
        .to_string();
    let uid = k.kubectl(&[
        "-n",
        NS,
        "get",
        "glustercluster",
        "demo",
        "-o",
        "jsonpath={.metadata.uid}",
    ]);
    let info = k.kubectl(&[
        "-n",
        NS,
        "exec",
        "demo-gk-node-1-0",
        "-c",
        "brick",
        "--",
        "gluster",
        "--mode=script",
        "volume",
        "info",
        &volume,
    ]);
    let allowed = {
        let mut names = [
            gk_operator::tls::access::CSI_CLIENT_IDENTITY.to_string(),
            gk_operator::tls::access::cluster_identity(&uid),
        ];
        names.sort();
        names.join(",")
    };
    for (key, value) in [
        ("client.ssl", "on"),
        ("server.ssl", "on"),
        ("ssl.cipher-list", gk_operator::tls::access::CIPHER_LIST),
        ("auth.ssl-allow", allowed.as_str()),
    ] {
        assert!(
            info.lines().any(|l| l.trim() == format!("{key}: {value}")),
            "gluster volume info {volume} lacks {key}: {value}:\n{info}"
        );
    }
    let server = format!("demo-gk-node-1-0.demo-bricks.{NS}.svc");
    let probe = format!(
        r#"try() {{
  label=$1; shift
  mkdir -p /mnt/$label
  glusterfs "$@" --volfile-server={server} --volfile-id={volume} --log-file=/tmp/$label.log /mnt/$label || true
  sleep 3
  if mountpoint -q /mnt/$label && echo probe > /mnt/$label/.gk-e2e-probe-$label; then
    rm -f /mnt/$label/.gk-e2e-probe-$label; echo "$label: wrote"
  else
    echo "$label: refused"; tail -n 3 /tmp/$label.log
  fi
  umount -l /mnt/$label 2>/dev/null || true
}}
try plain
mkdir -p /usr/lib/ssl && cp /certs/glusterfs.pem /certs/glusterfs.key /certs/glusterfs.ca /usr/lib/ssl/
try tls --secure-mgmt=yes"#
    );
    let script = probe.replace('\n', "\n          ");
    k.apply(&format!(
        r#"apiVersion: v1
kind: Pod
metadata: {{name: gk-e2e-tls-probe, namespace: {RELEASE_NS}}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gk-node-1}}
  tolerations: [{{key: glusterkube.dev/local-node, operator: Exists, effect: NoSchedule}}]
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  containers:
    - name: probe
      image: ghcr.io/glusterkube/brick:{version}
      imagePullPolicy: IfNotPresent
      securityContext: {{privileged: true}}
      command: ["/bin/sh", "-c"]
      args:
        - |
          {script}
      volumeMounts: [{{name: certs, mountPath: /certs, readOnly: true}}]
  volumes:
    - {{name: certs, secret: {{secretName: glusterkube-csi-gluster-tls}}}}
"#,
        version = env!("CARGO_PKG_VERSION"),
    ));
    let phase = until(
        "the TLS probe pod finished",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let p = k.kubectl(&[
                "-n",
                RELEASE_NS,
                "get",
                "pod",
                "gk-e2e-tls-probe",
                "-o",
                "jsonpath={.status.phase}",
            ]);
            (p == "Succeeded" || p == "Failed").then_some(p)
        },
    )
    .await;
    let log = k.kubectl(&["-n", RELEASE_NS, "logs", "gk-e2e-tls-probe"]);
    k.kubectl(&[
        "-n",
        RELEASE_NS,
        "delete",
        "pod",
        "gk-e2e-tls-probe",
        "--wait=false",
    ]);
    assert_eq!(phase, "Succeeded", "{log}");
    assert!(
        log.contains("plain: refused"),
        "a client without a certificate is refused: {log}"
    );
    assert!(
        log.contains("tls: wrote"),
        "the CSI node plugins' certificate is let in: {log}"
    );
}

#[tokio::test]
async fn chart_cluster_volume_pvc_and_pods_on_real_nodes() {
    let started = Instant::now();
    let cp = ControlPlane::ensure().unwrap();
    let k = Cluster { cp };
    let _teardown = Teardown;

    // 1. The demo, unchanged except for a faster health refresh, so that a short outage shows
    //    in status. The images must be built before `cargo test` (tests/run.sh does): cargo
    //    cannot build them from inside a running `cargo test`, which holds its lock.
    script(
        "demo.sh",
        &[],
        &[
            (
                "GK_DEMO_HELM_ARGS",
                "--set operator.refreshSeconds=5 --set operator.rolloutTimeoutSeconds=30",
            ),
            ("GK_IMAGES_BUILT", "1"),
        ],
    );
    eprintln!("e2e: demo done after {:?}", started.elapsed());
    let alice = brick_copies("alice.txt");
    let nodes: std::collections::BTreeSet<String> = alice.iter().map(|p| node_of(p)).collect();
    assert_eq!(
        nodes.len(),
        3,
        "alice.txt is on the bricks of all three nodes: {alice:?}"
    );
    let first = std::fs::read(&alice[0]).unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("hello from alice"));
    for p in &alice {
        assert_eq!(std::fs::read(p).unwrap(), first, "replica {p:?} differs");
    }
    for pod in ["alice", "bob"] {
        let log = k.kubectl(&["-n", NS, "logs", pod]);
        let other = if pod == "alice" { "bob" } else { "alice" };
        assert!(
            log.contains(&format!("{pod} read: hello from {other}")),
            "{pod}'s log: {log}"
        );
    }

    // 1b. Gluster's TLS on real kubelets: the pool carries the operator's access options, a
    //     client without a certificate is refused, and the same client with the CSI node
    //     plugins' certificate mounts and writes (so the refusal is the certificate's doing).
    tls_enforced(&k).await;
    eprintln!(
        "e2e: TLS options set and enforced after {:?}",
        started.elapsed()
    );

    // 2. A brick pod deleted during writes: no I/O error in the workload, the volume Degraded
    //    then Ready again, heal pending back to 0.
    k.apply(&writer_pod(
        "brick-loss-writer",
        "shared",
        "set -e\nmkdir -p /data/brick-loss\ni=0\nwhile [ $i -lt 120 ]; do\n  dd if=/dev/urandom of=/data/brick-loss/f$i bs=256k count=4 conv=fsync status=none\n  sha256sum /data/brick-loss/f$i >> /data/brick-loss/sums\n  i=$((i+1))\n  sleep 0.25\ndone\nsha256sum -c --quiet /data/brick-loss/sums\necho all 120 files written and verified",
    ));
    running(&k, "brick-loss-writer").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let killed_at = Instant::now();
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "pod",
        "demo-gk-node-2-0",
        "--wait=false",
    ]);
    let mut saw_degraded = false;
    let mut saw_bricks_down = String::new();
    until(
        "pool Degraded or bricks offline after the brick pod's deletion",
        Duration::from_secs(120),
        Duration::from_millis(500),
        || {
            let v = k.json(&["-n", NS, "get", "glustervolume", "pool"]);
            let summary = v["status"]["bricksSummary"]
                .as_str()
                .unwrap_or("")
                .to_string();
            saw_degraded |= k.condition(&v, "Degraded").as_deref() == Some("True");
            if summary != "3/3" && !summary.is_empty() {
                saw_bricks_down = summary;
            }
            (saw_degraded).then_some(())
        },
    )
    .await;
    eprintln!(
        "e2e: Degraded {:?} after the brick pod's deletion (bricks {saw_bricks_down})",
        killed_at.elapsed()
    );
    let healed = until(
        "pool Ready with 3/3 bricks and heal pending 0",
        Duration::from_secs(300),
        Duration::from_secs(1),
        || {
            let v = k.json(&["-n", NS, "get", "glustervolume", "pool"]);
            let ok = k.condition(&v, "Ready").as_deref() == Some("True")
                && k.condition(&v, "Degraded").as_deref() == Some("False")
                && v["status"]["bricksSummary"] == "3/3"
                && v["status"]["healPending"].as_i64() == Some(0);
            ok.then_some(killed_at.elapsed())
        },
    )
    .await;
    eprintln!("e2e: Ready again, heal pending 0, {healed:?} after the deletion");
    let phase = until(
        "the brick-loss writer finished",
        Duration::from_secs(300),
        Duration::from_secs(1),
        || {
            let p = k.pod_phase("brick-loss-writer");
            (p == "Succeeded" || p == "Failed").then_some(p)
        },
    )
    .await;
    let log = k.kubectl(&["-n", NS, "logs", "brick-loss-writer"]);
    assert_eq!(phase, "Succeeded", "the writer saw an I/O error: {log}");
    assert!(log.contains("all 120 files written and verified"), "{log}");

    // 2b. A brick image that cannot be pulled (a registry on a closed local port: nothing
    //     leaves the machine) stops the rollout at its first pod, which then serves nothing.
    //     Correcting the image restarts that pod at once, although its brick is offline, and
    //     the cluster is whole again without touching the other pods.
    let bad_at = Instant::now();
    k.merge_patch(
        "glustercluster",
        "demo",
        r#"{"spec":{"image":"127.0.0.1:9/glusterkube/brick:unpullable"}}"#,
    );
    until(
        "the first brick pod stuck pulling the unpullable image",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            let p = k.json_opt(&["-n", NS, "get", "pod", "demo-gk-node-1-0"])?;
            let waiting = p["status"]["containerStatuses"]
                .as_array()?
                .iter()
                .filter_map(|c| c["state"]["waiting"]["reason"].as_str())
                .any(|r| r == "ErrImagePull" || r == "ImagePullBackOff");
            waiting.then_some(())
        },
    )
    .await;
    // The cluster says why, from the pod's status, not just that an agent does not answer.
    let why = until(
        "the GlusterCluster naming the image that cannot be pulled",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let c = k.json(&["-n", NS, "get", "glustercluster", "demo"]);
            let ready = Cluster::condition_of(&c, "Ready")?;
            let message = ready["message"].as_str()?.to_string();
            message.contains("cannot be pulled").then_some(message)
        },
    )
    .await;
    assert!(
        why.contains("127.0.0.1:9/glusterkube/brick:unpullable"),
        "{why}"
    );
    until(
        "the rollout holding at 1 of 3 updated",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let c = k.json(&["-n", NS, "get", "glustercluster", "demo"]);
            (c["status"]["rollout"]["updated"].as_i64() == Some(1)).then_some(())
        },
    )
    .await;
    // Held there past the rollout timeout (30 s here): the cluster says so, and the other two
    // keep serving the old template.
    let stalled = until(
        "the GlusterCluster Degraded with reason RolloutStalled",
        Duration::from_secs(120),
        Duration::from_secs(1),
        || {
            let c = k.json(&["-n", NS, "get", "glustercluster", "demo"]);
            let d = Cluster::condition_of(&c, "Degraded")?;
            (d["status"] == "True" && d["reason"] == "RolloutStalled")
                .then(|| d["message"].as_str().unwrap_or("").to_string())
        },
    )
    .await;
    assert!(stalled.contains("demo-gk-node-1-0"), "{stalled}");
    let held = k.json(&["-n", NS, "get", "glustercluster", "demo"]);
    assert_eq!(
        held["status"]["rollout"]["updated"].as_i64(),
        Some(1),
        "one pod at a time: {}",
        held["status"]
    );
    for other in ["demo-gk-node-2-0", "demo-gk-node-3-0"] {
        assert_eq!(k.pod_phase(other), "Running", "{other} was left alone");
    }
    k.merge_patch("glustercluster", "demo", r#"{"spec":{"image":null}}"#);
    let fixed = until(
        "the stuck pod restarted on the corrected image and the pool 3/3 again",
        Duration::from_secs(300),
        Duration::from_secs(1),
        || {
            let c = k.json(&["-n", NS, "get", "glustercluster", "demo"]);
            let v = k.json(&["-n", NS, "get", "glustervolume", "pool"]);
            let ok = k.condition(&c, "Ready").as_deref() == Some("True")
                && k.condition(&c, "Progressing").as_deref() == Some("False")
                && k.condition(&v, "Degraded").as_deref() == Some("False")
                && v["status"]["bricksSummary"] == "3/3";
            ok.then_some(bad_at.elapsed())
        },
    )
    .await;
    eprintln!("e2e: unpullable image corrected, pool whole {fixed:?} after the bad image");

    // 3. The CSI node plugin deleted during writes. The plugin runs the FUSE clients itself
    //    (the chart's default, mountOnHost: false), so the mounts break with it; the restarted
    //    plugin remounts the staging path, re-binds the published targets and re-attaches the
    //    repaired mount inside the running container before it reports ready. The running
    //    writer (never restarted) must write again and read its first file; it stops after
    //    20 good writes in a row that follow a failure. A pod started after the repair must
    //    read the earlier data and write too.
    k.apply(&writer_pod(
        "plugin-loss-writer",
        "shared",
        "mkdir -p /data/plugin-loss\nok=0; failed=0; tail=0; first_error=''; i=0\nwhile [ $i -lt 600 ]; do\n  if err=$(echo \"line $i\" 2>&1 > /data/plugin-loss/f$i); then ok=$((ok+1)); tail=$((tail+1)); else failed=$((failed+1)); tail=0; [ -n \"$first_error\" ] || first_error=\"$err\"; fi\n  i=$((i+1))\n  if [ $failed -gt 0 ] && [ $tail -ge 20 ]; then break; fi\n  sleep 0.5\ndone\necho \"first file: $(cat /data/plugin-loss/f0 2>&1)\"\necho \"writes ok=$ok failed=$failed good since the last failure=$tail first error: $first_error\"",
    ));
    running(&k, "plugin-loss-writer").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let old_plugin = k.kubectl(&[
        "-n",
        RELEASE_NS,
        "get",
        "pod",
        "-l",
        "app.kubernetes.io/component=csi-node",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ]);
    let plugin_killed = Instant::now();
    k.kubectl(&[
        "-n",
        RELEASE_NS,
        "delete",
        "pod",
        &old_plugin,
        "--wait=false",
    ]);
    let back = until(
        "a new CSI node plugin Ready",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            let v = k.json(&[
                "-n",
                RELEASE_NS,
                "get",
                "pod",
                "-l",
                "app.kubernetes.io/component=csi-node",
            ]);
            v["items"].as_array()?.iter().find_map(|p| {
                let ready = p["status"]["conditions"]
                    .as_array()?
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True");
                (p["metadata"]["name"] != old_plugin.as_str() && ready)
                    .then(|| plugin_killed.elapsed())
            })
        },
    )
    .await;
    let phase = until(
        "the plugin-loss writer finished",
        Duration::from_secs(420),
        Duration::from_secs(1),
        || {
            let p = k.pod_phase("plugin-loss-writer");
            (p == "Succeeded" || p == "Failed").then_some(p)
        },
    )
    .await;
    let log = k.kubectl(&["-n", NS, "logs", "plugin-loss-writer"]);
    let counts = log.lines().last().unwrap_or("").to_string();
    eprintln!("e2e: CSI node plugin deleted: new plugin Ready after {back:?}; the running workload: {counts}");
    assert_eq!(phase, "Succeeded", "{log}");
    assert!(counts.starts_with("writes ok="), "{log}");
    assert!(
        log.contains("first file: line 0"),
        "the running writer reads its first file after the repair: {log}"
    );
    assert!(
        counts.contains("good since the last failure=20 "),
        "the running writer writes again after the repair: {log}"
    );
    k.apply(&writer_pod(
        "after-repair",
        "shared",
        "set -e\ntest -s /data/plugin-loss/f0\necho after > /data/plugin-loss/after\ncat /data/plugin-loss/after\ncat /data/alice.txt",
    ));
    let phase = until(
        "after-repair finished",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            let p = k.pod_phase("after-repair");
            (p == "Succeeded" || p == "Failed").then_some(p)
        },
    )
    .await;
    let log = k.kubectl(&["-n", NS, "logs", "after-repair"]);
    assert_eq!(
        phase, "Succeeded",
        "a pod started after the repair reads and writes: {log}"
    );
    assert!(
        log.contains("after") && log.contains("hello from alice"),
        "{log}"
    );

    // 4. Online expansion of the bound PVC.
    k.merge_patch(
        "pvc",
        "shared",
        r#"{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}"#,
    );
    until(
        "PVC shared at 2Gi",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || {
            let v = k.json(&["-n", NS, "get", "pvc", "shared"]);
            (v["status"]["capacity"]["storage"] == "2Gi").then_some(())
        },
    )
    .await;
    let pv = k.kubectl(&[
        "-n",
        NS,
        "get",
        "pvc",
        "shared",
        "-o",
        "jsonpath={.spec.volumeName}",
    ]);
    let pv_size = k.kubectl(&["get", "pv", &pv, "-o", "jsonpath={.spec.capacity.storage}"]);
    assert_eq!(pv_size, "2Gi");
    // A pod that mounts it now sees the new limit.
    k.apply(&writer_pod("df-reader", "shared", "df -k /data | tail -1"));
    until(
        "df-reader finished",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || (k.pod_phase("df-reader") == "Succeeded").then_some(()),
    )
    .await;
    let df = k.kubectl(&["-n", NS, "logs", "df-reader"]);
    let size_kib: u64 = df
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    assert!(
        (2 * 1024 * 1024 * 95 / 100..=2 * 1024 * 1024).contains(&size_kib),
        "df in the pod shows the expanded 2Gi limit: {df}"
    );

    // 5. A dedicated-mode PVC gets a GlusterVolume of its own, which goes with the PVC
    //    (reclaimPolicy Delete); a Retain PV of the subdirectory class keeps its data.
    k.apply(&format!(
        r#"apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: gk-e2e-dedicated}}
provisioner: gluster.glusterkube.dev
parameters: {{mode: dedicated, cluster: {NS}/demo, type: Replicate, replica: "3", brickCount: "3"}}
reclaimPolicy: Delete
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {{name: gk-e2e-retain}}
provisioner: gluster.glusterkube.dev
parameters: {{pool: {NS}/pool}}
reclaimPolicy: Retain
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: dedicated, namespace: {NS}}}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: gk-e2e-dedicated
  resources: {{requests: {{storage: 1Gi}}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: kept, namespace: {NS}}}
spec:
  accessModes: [ReadWriteMany]
  storageClassName: gk-e2e-retain
  resources: {{requests: {{storage: 1Gi}}}}
"#
    ));
    for claim in ["dedicated", "kept"] {
        until(
            &format!("PVC {claim} Bound"),
            Duration::from_secs(240),
            Duration::from_secs(1),
            || {
                (k.kubectl(&[
                    "-n",
                    NS,
                    "get",
                    "pvc",
                    claim,
                    "-o",
                    "jsonpath={.status.phase}",
                ]) == "Bound")
                    .then_some(())
            },
        )
        .await;
    }
    let volumes_with_dedicated = k.json(&["-n", NS, "get", "glustervolumes"]);
    let dedicated_pv = k.kubectl(&[
        "-n",
        NS,
        "get",
        "pvc",
        "dedicated",
        "-o",
        "jsonpath={.spec.volumeName}",
    ]);
    let own: Vec<String> = volumes_with_dedicated["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|n| n != "pool")
        .collect();
    assert_eq!(
        own.len(),
        1,
        "one GlusterVolume for the dedicated PV {dedicated_pv}: {own:?}"
    );
    let own_ready = k.json(&["-n", NS, "get", "glustervolume", &own[0]]);
    assert_eq!(k.condition(&own_ready, "Ready").as_deref(), Some("True"));
    // Data in the Retain volume, written through a pod, must outlive the claim.
    k.apply(&writer_pod(
        "kept-writer",
        "kept",
        "echo keep-me > /data/kept.txt && sync",
    ));
    until(
        "kept-writer finished",
        Duration::from_secs(180),
        Duration::from_secs(1),
        || (k.pod_phase("kept-writer") == "Succeeded").then_some(()),
    )
    .await;
    let kept_pv = k.kubectl(&[
        "-n",
        NS,
        "get",
        "pvc",
        "kept",
        "-o",
        "jsonpath={.spec.volumeName}",
    ]);
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "pod",
        "kept-writer",
        "df-reader",
        "brick-loss-writer",
        "plugin-loss-writer",
        "after-repair",
    ]);
    k.kubectl(&["-n", NS, "delete", "pvc", "dedicated", "kept"]);
    until(
        "the dedicated GlusterVolume and its PV gone",
        Duration::from_secs(240),
        Duration::from_secs(1),
        || {
            let gone_gv = k
                .kubectl_ok(&["-n", NS, "get", "glustervolume", &own[0]])
                .is_none();
            let gone_pv = k.kubectl_ok(&["get", "pv", &dedicated_pv]).is_none();
            (gone_gv && gone_pv).then_some(())
        },
    )
    .await;
    let kept_phase = until(
        "the Retain PV Released",
        Duration::from_secs(60),
        Duration::from_secs(1),
        || {
            let p = k.kubectl(&["get", "pv", &kept_pv, "-o", "jsonpath={.status.phase}"]);
            (p == "Released").then_some(p)
        },
    )
    .await;
    assert_eq!(kept_phase, "Released");
    let kept = brick_copies("kept.txt");
    assert_eq!(
        kept.len(),
        3,
        "the Retain PV's data stays on all three bricks: {kept:?}"
    );
    k.kubectl(&["delete", "pv", &kept_pv]);
    k.kubectl(&[
        "delete",
        "storageclass",
        "gk-e2e-dedicated",
        "gk-e2e-retain",
    ]);

    // 6. The operator deletes what it made by itself: once no pod or claim uses the pool,
    //    deleting the GlusterVolume stops and deletes the gluster volume, and the GlusterCluster
    //    goes once no volume lives on it. Nothing strips a finalizer here.
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "pods",
        "--all",
        "--wait=true",
        "--timeout=120s",
    ]);
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "pvc",
        "--all",
        "--wait=true",
        "--timeout=180s",
    ]);
    let deleted_at = Instant::now();
    deleted_by_operator(&k, "glustervolume", "pool").await;
    let listed = k.kubectl(&[
        "-n",
        NS,
        "exec",
        "demo-gk-node-2-0",
        "-c",
        "brick",
        "--",
        "gluster",
        "--mode=script",
        "volume",
        "list",
    ]);
    assert!(
        !listed.lines().any(|l| l.trim() == "gk-demo-pool"),
        "the gluster volume is gone with its GlusterVolume: {listed}"
    );
    deleted_by_operator(&k, "glustercluster", "demo").await;
    eprintln!(
        "e2e: the operator deleted the pool and the cluster in {:?}",
        deleted_at.elapsed()
    );

    // 7. helm uninstall (after the demo's own objects) leaves nothing running, and had no
    //    finalizer to strip.
    let down = script_output("demo.sh", &["down"]);
    assert!(
        !down.contains("did not finish deleting"),
        "demo.sh down had to strip finalizers: {down}"
    );
    let pods = k.json(&["get", "pods", "-A"]);
    let left: Vec<&str> = pods["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            p["spec"]["nodeName"]
                .as_str()
                .is_some_and(|n| n.starts_with("gk-node-"))
        })
        .map(|p| p["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert!(
        left.is_empty(),
        "pods left on the nodes after uninstall: {left:?}"
    );
    for n in 1..=3 {
        let out = sh(
            "bash",
            &[
                "tests/env/node.sh",
                "ctr",
                &n.to_string(),
                "tasks",
                "ls",
                "-q",
            ],
        );
        let tasks = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            tasks.is_empty(),
            "containers still running on gk-node-{n}: {tasks}"
        );
    }
    eprintln!("e2e: all checks passed in {:?}", started.elapsed());
}
