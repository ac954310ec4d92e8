//! The Helm chart and the plain manifests in deploy/, against the real local apiserver:
//! lint, values schema, least-privilege RBAC (checked on the rendered text and by running the
//! operator's and CSI controller's own code under their service accounts), server-side
//! validation, parity of deploy/ with the chart's default render, and a release installed,
//! upgraded and uninstalled with nothing cluster-scoped left behind but the CRDs.
//!
//! Nothing here needs a kubelet: pods stay Pending, which is all these checks need.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use gk_testenv::deploy::{self, metric_names, render, run_helm};
use gk_testenv::k8s::ControlPlane;
use gk_testenv::repo_root;
use gk_testenv::roles::{as_service_account, CallLog};
use serde_json::{json, Value};

/// Every YAML document of a multi-document stream (documents split at `---` lines, as
/// helm and kubectl write them), as JSON values; empty documents dropped.
fn docs(yaml: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut doc = String::new();
    for line in yaml.lines().chain(std::iter::once("---")) {
        if line == "---" {
            let v: Value = serde_yaml::from_str(&doc)
                .unwrap_or_else(|e| panic!("invalid YAML document: {e}\n{doc}"));
            if !v.is_null() {
                out.push(v);
            }
            doc.clear();
        } else {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    out
}

type Key = (String, String, String);

fn key(v: &Value) -> Key {
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

/// The objects of a render, by kind, namespace and name (each must be unique).
fn by_key(objects: Vec<Value>) -> BTreeMap<Key, Value> {
    let mut out = BTreeMap::new();
    for o in objects {
        let k = key(&o);
        assert!(out.insert(k.clone(), o).is_none(), "{k:?} is defined twice");
    }
    out
}

/// A process-unique name, so this test can run beside other runs on the shared apiserver.
fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", std::process::id())
}

fn kubectl(cp: &ControlPlane, args: &[&str]) -> String {
    cp.kubectl(args)
        .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
}

/// kubectl with `input` as the file behind `-f`.
fn kubectl_with_file(cp: &ControlPlane, input: &str, args: &[&str]) -> Result<String, String> {
    let path = std::env::temp_dir().join(format!(
        "gk-deploy-{}-{}.yaml",
        std::process::id(),
        input.len()
    ));
    std::fs::write(&path, input).expect("writing a temporary manifest");
    let mut all = args.to_vec();
    all.extend_from_slice(&["-f", path.to_str().expect("utf-8 path")]);
    let r = cp.kubectl(&all).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&path);
    r
}

/// The chart's name prefix for a release (its "glusterkube.fullname" helper).
fn fullname(release: &str) -> String {
    if release.contains("glusterkube") {
        release.to_string()
    } else {
        format!("{release}-glusterkube")
    }
}

/// Removes what a test made on the shared apiserver (its release and namespace), also when
/// the test panics halfway.
struct Cleanup {
    cp: ControlPlane,
    namespace: String,
    release: Option<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(release) = &self.release {
            let kubeconfig = self.cp.kubeconfig.to_str().unwrap_or_default().to_string();
            let _ = run_helm(&[
                "uninstall",
                release,
                "--namespace",
                &self.namespace,
                "--kubeconfig",
                &kubeconfig,
                "--ignore-not-found",
            ]);
        }
        // Custom resources first: deleted, then stripped of finalizers, which no operator
        // (ours is not running; another release's may be) can complete without brick agents.
        // Once an object is being deleted nobody can add a finalizer back.
        let kinds = "glustervolumes.glusterkube.dev,glusterclusters.glusterkube.dev";
        let ns = ["-n", self.namespace.as_str()];
        let _ = self
            .cp
            .kubectl(&[&ns[..], &["delete", kinds, "--all", "--wait=false"]].concat());
        let left = self
            .cp
            .kubectl(&[&ns[..], &["get", kinds, "-o", "name"]].concat())
            .unwrap_or_default();
        let no_finalizers = r#"{"metadata":{"finalizers":null}}"#;
        for object in left.lines() {
            let patch = ["patch", object, "--type=merge", "-p", no_finalizers];
            let _ = self.cp.kubectl(&[&ns[..], &patch[..]].concat());
        }
        let _ = self.cp.kubectl(&[
            "delete",
            "namespace",
            &self.namespace,
            "--wait=false",
            "--ignore-not-found",
        ]);
    }
}

/// Keeps the release's pods off every node: the shared apiserver may have real kubelets
/// (other tests' nodes), and a second operator or node plugin there would interfere.
const NO_NODE: &[&str] = &[
    "--set",
    "operator.nodeSelector.gk-deploy-test=unschedulable",
    "--set",
    "csi.controller.nodeSelector.gk-deploy-test=unschedulable",
    "--set",
    "csi.node.nodeSelector.gk-deploy-test=unschedulable",
];

fn control_plane() -> ControlPlane {
    ControlPlane::ensure().expect("the local control plane (tests/env/k8s.sh)")
}

/// Values that switch every optional part on (the ServiceMonitor needs the Prometheus
/// Operator's CRD, so it is only rendered, not applied).
const ALL_OPTIONS: &[&str] = &[
    "--set",
    "csi.node.updateStrategy=OnDelete",
    "--set",
    "imagePullSecrets[0].name=regcred",
    "--set",
    "storageClasses[0].name=gk-test-subdir",
    "--set",
    "storageClasses[0].isDefault=true",
    "--set",
    "storageClasses[0].parameters.pool=storage/pool",
    "--set",
    "storageClasses[1].name=gk-test-dedicated",
    "--set",
    "storageClasses[1].allowVolumeExpansion=false",
    "--set",
    "storageClasses[1].parameters.mode=dedicated",
    "--set",
    "storageClasses[1].parameters.cluster=storage/gluster",
    "--set",
    "csi.controller.replicas=2",
    "--set",
    "operator.replicas=2",
    // The NetworkPolicies go to a namespace every apiserver has, for the server dry run.
    "--set",
    "networkPolicy.enabled=true",
    "--set",
    "networkPolicy.brickNamespaces={default}",
    "--set",
    "networkPolicy.nodeCIDRs={10.0.0.0/16}",
];

#[test]
fn chart_lints_clean() {
    let chart = deploy::chart_dir();
    let chart = chart.to_str().expect("utf-8 path");
    for extra in [
        &[][..],
        ALL_OPTIONS,
        &["--set", "metrics.serviceMonitor.enabled=true"],
    ] {
        let mut args = vec!["lint", "--strict", chart];
        args.extend_from_slice(extra);
        let out = run_helm(&args).unwrap_or_else(|e| panic!("helm lint {extra:?}: {e}"));
        assert!(
            out.contains("1 chart(s) linted, 0 chart(s) failed"),
            "{out}"
        );
        assert!(
            !out.contains("[WARNING]") && !out.contains("[ERROR]"),
            "helm lint {extra:?} is not clean:\n{out}"
        );
    }
}

/// More than one operator or CSI controller replica gets a PodDisruptionBudget over exactly
/// the Deployment's pods, letting a drain take one at a time; one replica gets none (a budget
/// allowing no eviction would block every drain of its node).
#[test]
fn disruption_budgets_follow_the_replicas() {
    let budgets = |extra: &[&str]| -> Vec<Value> {
        docs(&render("gk", "ns", extra).unwrap())
            .into_iter()
            .filter(|o| o["kind"] == "PodDisruptionBudget")
            .collect()
    };
    assert!(budgets(&[]).is_empty(), "one replica each: no budget");
    let two = [
        "--set",
        "operator.replicas=2",
        "--set",
        "csi.controller.replicas=3",
    ];
    let objects = docs(&render("gk", "ns", &two).unwrap());
    let found = budgets(&two);
    assert_eq!(found.len(), 2, "{found:?}");
    for component in ["operator", "csi-controller"] {
        let name = format!("gk-glusterkube-{component}");
        let deployment = objects
            .iter()
            .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        let budget = found
            .iter()
            .find(|b| b["metadata"]["name"] == name.as_str())
            .unwrap_or_else(|| panic!("no budget {name}: {found:?}"));
        assert_eq!(
            budget["spec"]["selector"], deployment["spec"]["selector"],
            "{name}'s budget selects its Deployment's pods"
        );
        assert_eq!(budget["spec"]["maxUnavailable"], 1, "{name}");
        assert_eq!(budget["metadata"]["namespace"], "ns");
    }
    let only_operator = budgets(&["--set", "operator.replicas=2"]);
    assert_eq!(only_operator.len(), 1);
    assert_eq!(
        only_operator[0]["metadata"]["name"],
        "gk-glusterkube-operator"
    );
}

/// The CSI controller's gk-csi is probed for liveness through the liveness-probe sidecar,
/// which calls its CSI Probe on the socket they share and serves /healthz on the port the
/// kubelet probes.
#[test]
fn csi_controller_is_probed_for_liveness() {
    let objects = docs(&render("gk", "ns", &["--set", "csi.controller.healthPort=9999"]).unwrap());
    let controller = objects
        .iter()
        .find(|o| {
            o["kind"] == "Deployment" && o["metadata"]["name"] == "gk-glusterkube-csi-controller"
        })
        .expect("the CSI controller Deployment");
    let containers = controller["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    let named = |n: &str| {
        containers
            .iter()
            .find(|c| c["name"] == n)
            .unwrap_or_else(|| panic!("no container {n}"))
    };
    let (gk, probe) = (named("gk-csi"), named("liveness-probe"));
    assert_eq!(gk["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(gk["livenessProbe"]["httpGet"]["port"], "healthz");
    assert!(gk["ports"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "healthz" && p["containerPort"] == 9999));
    let args = strings(&probe["args"]);
    assert!(args.contains(&"--health-port=9999"), "{args:?}");
    assert!(args.contains(&"--csi-address=/csi/csi.sock"), "{args:?}");
    let endpoint = gk["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "CSI_ENDPOINT")
        .unwrap();
    assert_eq!(endpoint["value"], "unix:///csi/csi.sock");
    for c in [gk, probe] {
        assert!(
            c["volumeMounts"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "socket-dir" && m["mountPath"] == "/csi"),
            "{} shares the socket directory",
            c["name"]
        );
    }
}

/// `nameOverride` and `fullnameOverride` rename every object the chart makes (and the name
/// label, which selectors use, consistently); a value that is no DNS name is refused, naming
/// it.
#[test]
fn name_overrides_rename_every_object() {
    let objects = |extra: &[&str]| docs(&render("rel", "ns", extra).unwrap());
    for (extra, prefix, label) in [
        (["--set", "fullnameOverride=store"], "store", "glusterkube"),
        (["--set", "nameOverride=gfs"], "rel-gfs", "gfs"),
    ] {
        let rendered = objects(&extra);
        assert!(rendered.len() > 10, "{extra:?}");
        for o in &rendered {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            // The CSIDriver is named after the driver, which is compiled in.
            if o["kind"] == "CSIDriver" {
                assert_eq!(name, "gluster.glusterkube.dev");
                continue;
            }
            assert!(name.starts_with(prefix), "{extra:?}: {} {name}", o["kind"]);
            if let Some(l) = o["metadata"]["labels"].get("app.kubernetes.io/name") {
                assert_eq!(l, label, "{extra:?}: {name}");
            }
            if let Some(sel) = o["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/name") {
                assert_eq!(sel, label, "{extra:?}: {name}'s selector");
            }
        }
    }
    let e = render("rel", "ns", &["--set", "fullnameOverride=Not_A_Name"]).unwrap_err();
    assert!(e.to_string().contains("fullnameOverride"), "{e}");
}

/// `helm template` works as a user runs it, without `--kube-version`: helm is built, as its
/// own release is, to assume the Kubernetes of the client-go it was built with, which the
/// chart's kubeVersion admits (the source's placeholder, 1.20, does not).
#[test]
fn chart_renders_with_helms_own_kubernetes_version() {
    let chart = deploy::chart_dir();
    let out = run_helm(&[
        "template",
        "glusterkube",
        chart.to_str().expect("utf-8 path"),
    ])
    .unwrap_or_else(|e| panic!("helm template without --kube-version: {e}"));
    assert!(out.contains("kind: DaemonSet"), "{out}");
}

/// The release's chart archive (docs/release.md): `helm package` names it with the
/// workspace version, and `helm show chart` of the archive says that version.
#[test]
fn chart_packages_with_the_workspace_version() {
    let dir = tempfile::tempdir().unwrap();
    let chart = deploy::chart_dir();
    let out = run_helm(&[
        "package",
        chart.to_str().unwrap(),
        "-d",
        dir.path().to_str().unwrap(),
    ])
    .unwrap();
    let archive = dir
        .path()
        .join(format!("glusterkube-{}.tgz", env!("CARGO_PKG_VERSION")));
    assert!(archive.is_file(), "{out}");
    let shown: Value =
        serde_yaml::from_str(&run_helm(&["show", "chart", archive.to_str().unwrap()]).unwrap())
            .unwrap();
    assert_eq!(shown["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(shown["appVersion"], env!("CARGO_PKG_VERSION"));
    // Where users find the project, as Artifact Hub and `helm show chart` list it.
    assert_eq!(shown["home"], gk_testenv::krew::HOMEPAGE);
    assert_eq!(shown["sources"][0], gk_testenv::krew::HOMEPAGE);
    assert!(shown["maintainers"][0]["name"].is_string(), "{shown}");
}

/// The plugin's release files as `tools/release-plugin.sh` makes them (the test's debug
/// binary in place of a release build), installed by krew itself from the manifest and the
/// archive, offline: kubectl then runs `kubectl gluster` from krew's directory. An archive
/// that is not the one the manifest names is refused by its checksum.
#[test]
fn plugin_installs_with_krew_from_its_release_manifest() {
    let version = env!("CARGO_PKG_VERSION");
    let binary = std::env::current_exe()
        .unwrap()
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("kubectl-gluster");
    assert!(
        binary.is_file(),
        "{} is missing: cargo build -p kubectl-gluster (tests/run.sh does)",
        binary.display()
    );
    let dir = tempfile::tempdir().unwrap();
    let dist = dir.path().join("dist");
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("tools/release-plugin.sh"))
        .env("GK_PLUGIN_BINARIES", format!("amd64={}", binary.display()))
        .env("GK_KREWGEN", env!("CARGO_BIN_EXE_krewgen"))
        .env("GK_DIST", &dist)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "release-plugin.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let archive = dist.join(gk_testenv::krew::archive_name(version, "linux", "amd64"));
    let manifest = dist.join("gluster.yaml");
    let m: Value = serde_yaml::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    assert_eq!(m["spec"]["version"], format!("v{version}"));
    assert_eq!(
        m["spec"]["platforms"][0]["uri"],
        format!(
            "{}/releases/download/v{version}/kubectl-gluster-{version}-linux-amd64.tar.gz",
            gk_testenv::krew::HOMEPAGE
        )
    );

    let krew = |root: &std::path::Path, archive: &std::path::Path| {
        std::process::Command::new("krew")
            .args(["install", "--manifest"])
            .arg(&manifest)
            .arg("--archive")
            .arg(archive)
            .env("KREW_ROOT", root)
            .env("KREW_NO_UPGRADE_CHECK", "1")
            .output()
            .expect("krew (tests/env/install-tools.sh builds it)")
    };
    let root = dir.path().join("krew");
    let out = krew(&root, &archive);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && said.contains("Installed plugin: gluster"),
        "krew install: {said}"
    );
    let path = format!(
        "{}:{}",
        root.join("bin").display(),
        std::env::var("PATH").unwrap()
    );
    let out = std::process::Command::new("kubectl")
        .args(["gluster", "-h"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && help.contains("glusterkube storage at a glance"),
        "kubectl gluster -h through krew's directory: {help}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let tampered = dir
        .path()
        .join(gk_testenv::krew::archive_name(version, "linux", "amd64"));
    let mut bytes = std::fs::read(&archive).unwrap();
    bytes.push(0);
    std::fs::write(&tampered, bytes).unwrap();
    let out = krew(&dir.path().join("krew-2"), &tampered);
    assert!(
        !out.status.success(),
        "krew installed an archive whose checksum is not the manifest's: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The root Dockerfile builds what tests/env/images.sh builds: the same Debian packages,
/// the same binaries, one target per image of ours with the same entrypoint.
#[test]
fn dockerfile_matches_the_image_builder() {
    let root = gk_testenv::repo_root();
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let builder = std::fs::read_to_string(root.join("tests/env/images.sh")).unwrap();
    let words = |s: &str| -> Vec<String> {
        let mut w: Vec<String> = s.split_whitespace().map(String::from).collect();
        w.sort();
        w
    };
    let packages = builder
        .lines()
        .find_map(|l| l.strip_prefix("debian_packages=("))
        .and_then(|l| l.strip_suffix(')'))
        .expect("debian_packages in images.sh");
    let base = dockerfile
        .split("AS base")
        .nth(1)
        .and_then(|b| b.split("apt-get install -y --no-install-recommends").nth(1))
        .and_then(|b| b.split("\\").next())
        .expect("the base stage's apt-get install");
    assert_eq!(words(base), words(packages), "Debian packages differ");
    let bins = |text: &str| -> Vec<String> {
        let mut b: Vec<String> = text
            .split("--bin ")
            .skip(1)
            .map(|s| {
                s.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                    .collect::<String>()
            })
            .collect();
        b.sort();
        b
    };
    assert_eq!(bins(&dockerfile), bins(&builder), "cargo binaries differ");
    for image in [
        "brick",
        "csi",
        "operator",
        "csi-liveness",
        "csi-node-registrar",
    ] {
        let entry = builder
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("image {image} \'")))
            .and_then(|l| l.split('\'').next())
            .unwrap_or_else(|| panic!("images.sh builds no image {image}"));
        let stage = dockerfile
            .split("\nFROM ")
            .find(|s| {
                s.lines()
                    .next()
                    .is_some_and(|l| l.ends_with(&format!(" AS {image}")))
            })
            .unwrap_or_else(|| panic!("the Dockerfile has no target {image}"));
        let want = format!("ENTRYPOINT {entry}");
        assert!(
            stage.lines().any(|l| l.replace(", ", ",") == want),
            "target {image}: want {want} in\n{stage}"
        );
    }
    // Both put gluster's patched translators (gluster-patches/) over the Debian layer, in
    // every image that has it.
    assert!(
        dockerfile.contains("RUN bash /src/gluster-patches/build.sh /out")
            && dockerfile.contains("COPY --from=gluster-fix /out/ /"),
        "the Dockerfile's base stage lacks the patched translators"
    );
    let on_base: Vec<&str> = builder
        .lines()
        .filter(|l| l.trim_start().starts_with("image ") && l.contains("\"$base\""))
        .collect();
    assert_eq!(on_base.len(), 5, "{on_base:#?}");
    for l in on_base {
        assert!(
            l.contains("\"$base\" \"$fix\""),
            "no patched translators in: {l}"
        );
    }
}

#[test]
fn chart_version_is_the_workspace_version() {
    let chart: Value = serde_yaml::from_str(
        &std::fs::read_to_string(deploy::chart_dir().join("Chart.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(chart["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));
    // Images default to that version; sidecars are pinned to released tags.
    let objects = docs(&render("gk", "ns", &[]).unwrap());
    let images: Vec<String> = objects
        .iter()
        .flat_map(|o| {
            o.pointer("/spec/template/spec/containers")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .map(|c| c["image"].as_str().unwrap().to_string())
        .collect();
    let version = env!("CARGO_PKG_VERSION");
    for want in [
        format!("ghcr.io/glusterkube/operator:{version}"),
        format!("ghcr.io/glusterkube/csi:{version}"),
    ] {
        assert!(images.contains(&want), "{want} not in {images:?}");
    }
    for image in &images {
        let (_, tag) = image.rsplit_once(':').expect("every image has a tag");
        assert!(!tag.is_empty() && tag != "latest", "{image} is not pinned");
    }
    let operator = objects
        .iter()
        .find(|o| {
            key(o)
                == (
                    "Deployment".into(),
                    "ns".into(),
                    "gk-glusterkube-operator".into(),
                )
        })
        .expect("the operator Deployment");
    let env = &operator["spec"]["template"]["spec"]["containers"][0]["env"];
    assert!(
        env.as_array().unwrap().contains(&json!({
            "name": "GK_BRICK_IMAGE",
            "value": format!("ghcr.io/glusterkube/brick:{version}"),
        })),
        "{env}"
    );
}

#[test]
fn bad_values_fail_naming_the_value() {
    for (set, named) in [
        ("operator.image.pullPolicy=Sometimes", "pullPolicy"),
        ("csi.node.kubeletDir=var/lib/kubelet", "kubeletDir"),
        (
            "csi.node.kubeletDir=/a/very/long/kubelet/root/directory/that/makes/the/socket/path/too/long",
            "kubeletDir",
        ),
        ("operator.refreshSeconds=0", "refreshSeconds"),
        ("operator.replicas=0", "replicas"),
        ("storageClasses[0].name=x", "parameters"),
        ("csi.fsGroupPolicy=Sometimes", "fsGroupPolicy"),
    ] {
        let err = render("gk", "ns", &["--set", set])
            .expect_err(&format!("--set {set} was accepted"))
            .to_string();
        assert!(
            err.contains("values don't meet the specifications of the schema") && err.contains(named),
            "--set {set}: the error does not name {named}: {err}"
        );
    }
    // helm install refuses them the same way, before creating anything.
    let cp = control_plane();
    let chart = deploy::chart_dir();
    let err = run_helm(&[
        "install",
        "gk",
        chart.to_str().unwrap(),
        "--dry-run=client",
        "--kubeconfig",
        cp.kubeconfig.to_str().unwrap(),
        "--namespace",
        "default",
        "--set",
        "csi.controller.replicas=0",
    ])
    .expect_err("replicas 0 was accepted")
    .to_string();
    assert!(err.contains("replicas") && err.contains("minimum"), "{err}");
}

/// The ClusterRoles and Roles of a render with the service accounts bound to each.
fn roles(objects: &[Value]) -> Vec<(Value, Vec<String>)> {
    let bindings: Vec<&Value> = objects
        .iter()
        .filter(|o| {
            matches!(
                o["kind"].as_str(),
                Some("ClusterRoleBinding" | "RoleBinding")
            )
        })
        .collect();
    objects
        .iter()
        .filter(|o| matches!(o["kind"].as_str(), Some("ClusterRole" | "Role")))
        .map(|role| {
            let subjects = bindings
                .iter()
                .filter(|b| b["roleRef"]["name"] == role["metadata"]["name"])
                .filter(|b| b["roleRef"]["kind"] == role["kind"])
                .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
                .map(|s| {
                    format!(
                        "{}/{}",
                        s["namespace"].as_str().unwrap(),
                        s["name"].as_str().unwrap()
                    )
                })
                .collect();
            (role.clone(), subjects)
        })
        .collect()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Whether `role` grants `verb` on `group`/`resource`.
fn grants(role: &Value, group: &str, resource: &str, verb: &str) -> bool {
    role["rules"].as_array().unwrap().iter().any(|r| {
        strings(&r["apiGroups"]).contains(&group)
            && strings(&r["resources"]).contains(&resource)
            && strings(&r["verbs"]).contains(&verb)
    })
}

/// The least-privilege properties, on one render (text and parsed objects).
fn check_rbac(text: &str, release: &str, ns: &str) {
    let full = fullname(release);
    let objects = docs(text);
    let roles = roles(&objects);
    assert_eq!(
        roles.len(),
        6,
        "operator and CSI controller ClusterRoles, the two lease Roles, the mount pods' Role, \
         the node plugin's ClusterRole (reading its Node)"
    );
    let mut rules = 0;
    for (role, subjects) in &roles {
        let name = role["metadata"]["name"].as_str().unwrap();
        assert!(!subjects.is_empty(), "{name} is bound to nobody");
        for s in subjects {
            assert!(
                s.starts_with(&format!("{ns}/{full}-")),
                "{name} bound to {s}"
            );
        }
        assert!(role.get("aggregationRule").is_none(), "{name} aggregates");
        for rule in role["rules"].as_array().expect("rules") {
            rules += 1;
            assert!(rule.get("nonResourceURLs").is_none(), "{name}: {rule}");
            for field in ["apiGroups", "resources", "verbs"] {
                let values = strings(&rule[field]);
                assert!(!values.is_empty(), "{name}: {field} empty in {rule}");
                assert!(
                    values.iter().all(|v| !v.contains('*')),
                    "{name}: wildcard in {field}: {rule}"
                );
            }
            for r in strings(&rule["resources"]) {
                assert!(
                    ![
                        "pods/exec",
                        "pods/attach",
                        "pods/portforward",
                        "nodes/proxy",
                        "serviceaccounts/token"
                    ]
                    .contains(&r),
                    "{name} grants {r}"
                );
            }
            for v in strings(&rule["verbs"]) {
                assert!(
                    !["escalate", "bind", "impersonate", "deletecollection"].contains(&v),
                    "{name} grants {v}"
                );
            }
            // Nobody may delete Secrets (the agent PKI), and the CSI side only reads one.
            if strings(&rule["resources"]).contains(&"secrets") {
                assert!(
                    !strings(&rule["verbs"]).contains(&"delete"),
                    "{name}: {rule}"
                );
            }
        }
    }
    let role = |suffix: &str| {
        &roles
            .iter()
            .find(|(r, _)| {
                r["kind"] == "ClusterRole"
                    && r["metadata"]["name"] == format!("{full}-{suffix}").as_str()
            })
            .unwrap_or_else(|| panic!("no ClusterRole {suffix}"))
            .0
    };
    let operator = role("operator");
    let csi = role("csi-controller");
    for verb in ["create", "patch"] {
        assert!(
            grants(operator, "events.k8s.io", "events", verb),
            "operator events {verb}"
        );
    }
    // The operator deletes one kind of object itself: the StatefulSet of a storage node
    // removed from a cluster (once it left the trusted pool). Everything else it owns goes by
    // garbage collection.
    for rule in operator["rules"].as_array().unwrap() {
        let deletes = strings(&rule["verbs"]).contains(&"delete");
        assert!(
            !deletes || strings(&rule["resources"]) == ["statefulsets"],
            "operator: {rule}"
        );
    }
    // The operator's CRDs, by name, read and patched only (crd_upgrade); nothing else of
    // apiextensions.
    for rule in operator["rules"].as_array().unwrap() {
        if strings(&rule["apiGroups"]).contains(&"apiextensions.k8s.io") {
            assert_eq!(
                strings(&rule["resourceNames"]),
                [
                    "glusterclusters.glusterkube.dev",
                    "glustervolumes.glusterkube.dev"
                ],
                "operator: {rule}"
            );
            assert_eq!(
                strings(&rule["verbs"]),
                ["get", "patch"],
                "operator: {rule}"
            );
        }
    }
    assert!(grants(csi, "", "secrets", "get"));
    for verb in ["list", "watch", "create", "patch"] {
        assert!(
            !grants(csi, "", "secrets", verb),
            "csi-controller secrets {verb}"
        );
    }

    // The operator's Role is its leader Lease alone, in the release namespace.
    let operator_sa = format!("{ns}/{full}-operator");
    let (lease_role, _) = roles
        .iter()
        .find(|(r, s)| r["kind"] == "Role" && s.contains(&operator_sa))
        .expect("the operator's lease Role");
    assert_eq!(lease_role["metadata"]["namespace"], ns);
    for rule in lease_role["rules"].as_array().unwrap() {
        assert_eq!(
            strings(&rule["apiGroups"]),
            ["coordination.k8s.io"],
            "{rule}"
        );
        assert_eq!(strings(&rule["resources"]), ["leases"], "{rule}");
        for v in strings(&rule["verbs"]) {
            assert!(["get", "create", "patch"].contains(&v), "{rule}");
        }
    }

    // The CSI controller's Role, in the release namespace: its sidecars' Leases, and listing
    // the Secrets of external pools, which live there (reading one by name is the
    // ClusterRole's get).
    let csi_sa = format!("{ns}/{full}-csi-controller");
    let (csi_role, _) = roles
        .iter()
        .find(|(r, s)| r["kind"] == "Role" && s.contains(&csi_sa))
        .expect("the CSI controller's Role");
    assert_eq!(csi_role["metadata"]["namespace"], ns);
    for rule in csi_role["rules"].as_array().unwrap() {
        match strings(&rule["resources"]).as_slice() {
            ["leases"] => {
                for v in strings(&rule["verbs"]) {
                    assert!(["get", "create", "update"].contains(&v), "{rule}");
                }
            }
            ["secrets"] => assert_eq!(strings(&rule["verbs"]), ["list"], "{rule}"),
            other => panic!("the CSI controller's Role grants {other:?}"),
        }
    }

    // The node plugin may only make, read, list and delete pods (its mount pods) and publish
    // Events (about mount pods it removed), in its own namespace, and read Nodes (its own,
    // the mount pods' owner) and nothing else of the cluster.
    let node_sa = format!("{ns}/{full}-csi-node");
    for (role, subjects) in &roles {
        if !subjects.contains(&node_sa) {
            continue;
        }
        if role["kind"] == "ClusterRole" {
            assert_eq!(
                role["rules"],
                serde_json::json!([{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
                "{}",
                role["metadata"]["name"]
            );
            continue;
        }
        assert_eq!(role["metadata"]["namespace"], ns);
        for rule in role["rules"].as_array().unwrap() {
            let allowed: &[&str] = match strings(&rule["resources"]).as_slice() {
                ["pods"] => &["get", "list", "create", "delete"],
                ["events"] => {
                    assert_eq!(strings(&rule["apiGroups"]), ["events.k8s.io"], "{rule}");
                    &["create", "patch"]
                }
                other => panic!("the node plugin's Role grants {other:?}"),
            };
            for v in strings(&rule["verbs"]) {
                assert!(allowed.contains(&v), "{rule}");
            }
        }
    }
    let sa = objects
        .iter()
        .find(|o| {
            key(o)
                == (
                    "ServiceAccount".into(),
                    ns.into(),
                    format!("{full}-csi-node"),
                )
        })
        .expect("the node service account");
    assert_eq!(sa["automountServiceAccountToken"], false);
    let ds = objects
        .iter()
        .find(|o| o["kind"] == "DaemonSet")
        .expect("the node DaemonSet");
    assert_eq!(
        ds["spec"]["template"]["spec"]["automountServiceAccountToken"],
        false
    );

    // Every rule is preceded by a comment saying why (read from the rendered text, where
    // comments survive), and every rule found by parsing is counted here too.
    let lines: Vec<&str> = text.lines().collect();
    let mut commented = 0;
    let mut in_rules = false;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("rules:") {
            in_rules = true;
            continue;
        }
        if !line.starts_with(' ') && !line.starts_with('-') {
            in_rules = false;
        }
        if in_rules && line.starts_with("  - ") {
            let prev = lines[..i]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap();
            assert!(
                prev.trim_start().starts_with('#') && prev.len() > 10,
                "rule without a comment saying why:\n{}\n{}",
                prev,
                line
            );
            commented += 1;
        }
    }
    assert_eq!(
        commented, rules,
        "every parsed rule was checked for its comment"
    );
}

#[test]
fn rbac_is_least_privilege() {
    check_rbac(&render("gk", "ns", &[]).unwrap(), "gk", "ns");
    check_rbac(&render("gk", "ns", ALL_OPTIONS).unwrap(), "gk", "ns");
    // deploy/ carries the same rules and comments.
    let plain = std::fs::read_to_string(repo_root().join(deploy::MANIFEST)).unwrap();
    check_rbac(&plain, deploy::RELEASE, deploy::NAMESPACE);
}

/// The optional NetworkPolicies: none by default; when enabled, one per brick namespace that
/// selects the operator's brick pods and admits only brick pods, the node addresses and this
/// release's operator and CSI controller, each on its own ports. No rule admits everyone.
#[test]
fn network_policies_admit_only_gluster_traffic_into_brick_pods() {
    let default = docs(&render("gk", "ns", &[]).unwrap());
    assert!(!default.iter().any(|o| o["kind"] == "NetworkPolicy"));

    let objects = docs(
        &render(
            "gk",
            "gk-sys",
            &[
                "--set",
                "networkPolicy.enabled=true",
                "--set",
                "networkPolicy.brickNamespaces={storage,more}",
                "--set",
                "networkPolicy.nodeCIDRs={10.0.0.0/16,fd00::/64}",
            ],
        )
        .unwrap(),
    );
    let policies: Vec<&Value> = objects
        .iter()
        .filter(|o| o["kind"] == "NetworkPolicy")
        .collect();
    let namespaces: Vec<&str> = policies
        .iter()
        .map(|p| p["metadata"]["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["storage", "more"]);
    let (label, value) = gk_api::names::BRICK_POD_SELECTOR.split_once('=').unwrap();
    let agent_port = json!(gk_api::agents::AGENT_PORT);
    for p in policies {
        let spec = &p["spec"];
        assert_eq!(spec["podSelector"]["matchLabels"][label], value, "{p}");
        assert_eq!(spec["policyTypes"], json!(["Ingress"]));
        let rules = spec["ingress"].as_array().unwrap();
        assert_eq!(rules.len(), 3, "{p}");
        for r in rules {
            let from = r["from"].as_array().expect("every rule names its sources");
            assert!(!from.is_empty() && !r["ports"].as_array().unwrap().is_empty());
        }
        // Brick to brick.
        assert_eq!(
            rules[0]["from"][0]["podSelector"]["matchLabels"][label],
            value
        );
        let ports: Vec<(Value, Value)> = rules[0]["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["port"].clone(), p["endPort"].clone()))
            .collect();
        assert_eq!(
            ports,
            [(json!(24007), Value::Null), (json!(49152), json!(60999))]
        );
        // Node addresses (the CSI node plugin is on the host network) to the same ports.
        let cidrs: Vec<&str> = rules[1]["from"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["ipBlock"]["cidr"].as_str().unwrap())
            .collect();
        assert_eq!(cidrs, ["10.0.0.0/16", "fd00::/64"]);
        assert_eq!(rules[1]["ports"], rules[0]["ports"]);
        // This release's operator and CSI controller, to the agent only.
        let peer = &rules[2]["from"][0];
        assert_eq!(
            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            "gk-sys"
        );
        assert_eq!(
            peer["podSelector"]["matchExpressions"][1]["values"],
            json!(["operator", "csi-controller"])
        );
        assert_eq!(
            rules[2]["ports"],
            json!([{"protocol": "TCP", "port": agent_port}])
        );
    }

    // A bad CIDR is refused by the values schema.
    let err = render(
        "gk",
        "gk-sys",
        &["--set", "networkPolicy.nodeCIDRs={everywhere}"],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("nodeCIDRs"), "{err}");
}

#[test]
fn node_plugin_pod_is_what_a_kubelet_needs() {
    let objects = docs(&render("gk", "ns", &[]).unwrap());
    let ds = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    let spec = &ds["spec"]["template"]["spec"];
    let containers = spec["containers"].as_array().unwrap();
    let names: Vec<&str> = containers
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["node-driver-registrar", "gk-csi", "liveness-probe"]);
    let plugin = &containers[1];
    assert_eq!(plugin["securityContext"]["privileged"], true);
    // The sidecars beside it get nothing: no capabilities, no escalation, read-only root.
    for sidecar in [&containers[0], &containers[2]] {
        let sc = &sidecar["securityContext"];
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{sidecar}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{sidecar}");
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{sidecar}");
        assert!(sc["privileged"].is_null() && sc["capabilities"]["add"].is_null());
    }
    let mounts = plugin["volumeMounts"].as_array().unwrap();
    let propagation = |path: &str| {
        mounts
            .iter()
            .find(|m| m["mountPath"] == path)
            .map(|m| m["mountPropagation"].clone())
    };
    assert_eq!(
        propagation("/var/lib/kubelet/pods"),
        Some(json!("Bidirectional"))
    );
    assert_eq!(
        propagation("/var/lib/kubelet/plugins"),
        Some(json!("Bidirectional"))
    );
    // The plugin runs no FUSE client (mount pods do): no /dev/fuse, no certificate.
    assert!(propagation("/dev/fuse").is_none(), "/dev/fuse is mounted");
    assert!(
        propagation("/usr/lib/ssl").is_none(),
        "the certificate is mounted"
    );
    // Its API token is projected into gk-csi alone.
    assert_eq!(spec["automountServiceAccountToken"], false);
    assert!(propagation("/var/run/secrets/kubernetes.io/serviceaccount").is_some());
    for sidecar in [&containers[0], &containers[2]] {
        assert!(
            !sidecar.to_string().contains("api-token"),
            "{sidecar} gets the token"
        );
    }
    let env = |name: &str| {
        plugin["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name)
            .map(|e| e["value"].clone())
    };
    assert_eq!(env("GK_FUSE_CLIENTS"), Some(json!("mount-pods")));
    assert_eq!(
        env("GK_MOUNT_IMAGE"),
        Some(json!(format!(
            "ghcr.io/glusterkube/csi:{}",
            env!("CARGO_PKG_VERSION")
        )))
    );
    // The registration socket path fits a unix socket (107 bytes) with room to spare.
    let registrar = &containers[0]["args"];
    let path = strings(registrar)
        .iter()
        .find_map(|a| a.strip_prefix("--kubelet-registration-path="))
        .expect("registration path")
        .to_string();
    assert_eq!(
        path,
        "/var/lib/kubelet/plugins/gluster.glusterkube.dev/csi.sock"
    );
    let endpoint = plugin["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "CSI_ENDPOINT")
        .unwrap()["value"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        endpoint,
        format!("unix://{path}"),
        "the registrar announces the plugin's socket"
    );
    // With the longest kubeletDir the schema allows, the socket path still fits.
    let longest = format!("/{}", "k".repeat(59));
    let objects = docs(
        &render(
            "gk",
            "ns",
            &["--set", &format!("csi.node.kubeletDir={longest}")],
        )
        .unwrap(),
    );
    let ds = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    let args = strings(&ds["spec"]["template"]["spec"]["containers"][0]["args"])
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>();
    let path = args
        .iter()
        .find_map(|a| a.strip_prefix("--kubelet-registration-path="))
        .unwrap();
    assert!(path.len() <= 107, "{path} is {} bytes", path.len());
    // hostPID: the plugin sees its mount pods' clients, and re-attaches repaired mounts
    // inside running containers.
    assert_eq!(spec["hostPID"], true);
    assert_eq!(ds_default_strategy(), json!("RollingUpdate"));
    let objects = docs(
        &render(
            "gk",
            "ns",
            &[
                "--set",
                "csi.node.updateStrategy=OnDelete",
                "--set",
                "csi.mountPod.image.tag=next",
            ],
        )
        .unwrap(),
    );
    let ds = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "OnDelete"}));
    let plugin_env = ds["spec"]["template"]["spec"]["containers"][1]["env"].to_string();
    assert!(
        plugin_env.contains("ghcr.io/glusterkube/csi:next"),
        "{plugin_env}"
    );

    let driver = docs(&render("gk", "ns", &[]).unwrap())
        .into_iter()
        .find(|o| o["kind"] == "CSIDriver")
        .unwrap();
    assert_eq!(driver["metadata"]["name"], gk_csi::DRIVER_NAME);
    assert_eq!(driver["spec"]["attachRequired"], false);
    assert_eq!(driver["spec"]["podInfoOnMount"], false);
    assert_eq!(driver["spec"]["fsGroupPolicy"], "File");
}

/// The node plugin DaemonSet's update strategy type with the default values.
fn ds_default_strategy() -> Value {
    let objects = docs(&render("gk", "ns", &[]).unwrap());
    let ds = objects.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    ds["spec"]["updateStrategy"]["type"].clone()
}

#[test]
fn alerts_fire_as_their_unit_tests_say() {
    let dir = tempfile::tempdir().unwrap();
    let rules = deploy::alert_rules().unwrap();
    std::fs::write(
        dir.path().join("rules.yaml"),
        serde_yaml::to_string(&rules).unwrap(),
    )
    .unwrap();
    let cases = repo_root().join("tests/alerts/glusterkube.test.yaml");
    let test_file = dir.path().join("glusterkube.test.yaml");
    std::fs::copy(&cases, &test_file).unwrap();
    let promtool = deploy::tool("promtool").unwrap();
    for args in [
        vec!["check", "rules", "rules.yaml"],
        vec!["test", "rules", "glusterkube.test.yaml"],
    ] {
        let out = std::process::Command::new(&promtool)
            .args(&args)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Every alert has cases: one where it fires (and, in the file, one where it must not).
    let tested: Value = serde_yaml::from_str(&std::fs::read_to_string(&cases).unwrap()).unwrap();
    let firing: BTreeSet<&str> = tested["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().unwrap())
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str())
        .collect();
    let alerts = deploy::alert_expressions(&rules);
    assert!(alerts.len() >= 8, "{alerts:?}");
    for (alert, _) in &alerts {
        assert!(
            firing.contains(alert.as_str()),
            "no case of {cases:?} fires {alert}"
        );
    }
}

#[test]
fn dashboard_shows_what_the_operator_exports() {
    // Every series name the operator exposes, from its own encoder.
    let m = gk_operator::metrics::Metrics::default();
    m.reconcile_started("GlusterVolume").finish();
    m.error("kube");
    m.volume("ns", "v", &Default::default());
    m.capacity("ns", "v", 1, 0);
    m.persistent_volumes(&BTreeMap::from([(("ns".into(), "v".into()), 1)]));
    let exported: BTreeSet<String> = m
        .encode()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .map(str::to_string)
        .collect();

    let objects = docs(&render("gk", "ns", &[]).unwrap());
    let cm = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap")
        .expect("the dashboard ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let dashboard: Value = serde_json::from_str(cm["data"]["glusterkube.json"].as_str().unwrap())
        .expect("the dashboard is JSON");
    let mut used = BTreeSet::new();
    let mut titles = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        titles.push(panel["title"].as_str().unwrap().to_string());
        for t in panel["targets"].as_array().unwrap() {
            used.extend(metric_names(t["expr"].as_str().unwrap()));
        }
    }
    for name in &used {
        assert!(
            exported.contains(name),
            "the dashboard queries {name}, which the operator does not export: {exported:?}"
        );
    }
    for needed in [
        "glusterkube_volume_bricks_online",
        "glusterkube_volume_heal_pending",
        "glusterkube_volume_capacity_bytes",
        "glusterkube_volume_used_bytes",
        "glusterkube_volume_persistent_volumes",
        "glusterkube_reconcile_errors_total",
    ] {
        assert!(
            used.contains(needed),
            "no panel shows {needed}; panels: {titles:?}"
        );
    }
    // Disabled, it is gone; the ServiceMonitor appears only when asked for.
    let off = docs(
        &render(
            "gk",
            "ns",
            &["--set", "metrics.grafanaDashboard.enabled=false"],
        )
        .unwrap(),
    );
    assert!(off.iter().all(|o| o["kind"] != "ConfigMap"));
    assert!(objects.iter().all(|o| o["kind"] != "ServiceMonitor"));
    let on = docs(
        &render(
            "gk",
            "ns",
            &["--set", "metrics.serviceMonitor.enabled=true"],
        )
        .unwrap(),
    );
    let sm = on
        .iter()
        .find(|o| o["kind"] == "ServiceMonitor")
        .expect("a ServiceMonitor");
    let svc = on.iter().find(|o| o["kind"] == "Service").unwrap();
    for (k, v) in sm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(
            &svc["metadata"]["labels"][k], v,
            "the ServiceMonitor selects the metrics Service"
        );
    }
    assert_eq!(
        sm["spec"]["endpoints"][0]["port"],
        svc["spec"]["ports"][0]["name"]
    );
    // The CSI pods' /metrics: the PodMonitor selects both CSI workloads, and each has the
    // port it scrapes, on the container that serves it.
    let pm = on
        .iter()
        .find(|o| o["kind"] == "PodMonitor")
        .expect("a PodMonitor");
    let components = &pm["spec"]["selector"]["matchExpressions"][0]["values"];
    for name in ["csi-controller", "csi-node"] {
        let workload = on
            .iter()
            .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
            .find(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == name)
            .unwrap_or_else(|| panic!("no {name} workload"));
        let labels = &workload["spec"]["template"]["metadata"]["labels"];
        assert!(
            components
                .as_array()
                .unwrap()
                .contains(&labels["app.kubernetes.io/component"]),
            "the PodMonitor selects {name}"
        );
        for (k, v) in pm["spec"]["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(&labels[k], v, "the PodMonitor selects {name}'s pods");
        }
        let csi = workload["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "gk-csi")
            .unwrap();
        let port = csi["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == pm["spec"]["podMetricsEndpoints"][0]["port"])
            .unwrap_or_else(|| panic!("{name}'s gk-csi has no metrics port"));
        let addr = csi["env"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == "GK_METRICS_ADDR")
            .unwrap()["value"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            addr.ends_with(&format!(":{}", port["containerPort"])),
            "{name} serves /metrics on {addr}, its port is {}",
            port["containerPort"]
        );
    }
}

/// deploy/ as kubectl sees it (kustomize), one object per key.
fn deploy_objects(cp: &ControlPlane) -> BTreeMap<Key, Value> {
    let dir = repo_root().join("deploy");
    by_key(
        docs(&kubectl(cp, &["kustomize", dir.to_str().unwrap()]))
            .into_iter()
            .map(normalized)
            .collect(),
    )
}

/// Whole numbers as integers: kustomize writes some as 1024.0.
fn normalized(v: Value) -> Value {
    match v {
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 => json!(f as i64),
            _ => Value::Number(n),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(normalized).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, normalized(v))).collect()),
        other => other,
    }
}

/// Drops the labels only Helm sets, which deploy/ leaves out.
fn without_helm_labels(mut v: Value) -> Value {
    if let Some(labels) = v
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove("helm.sh/chart");
        labels.remove("app.kubernetes.io/managed-by");
    }
    v
}

#[test]
fn deploy_is_the_chart_default_render() {
    let committed = std::fs::read_to_string(repo_root().join(deploy::MANIFEST)).unwrap();
    assert!(
        committed == deploy::expected_manifest().unwrap(),
        "{} is stale: run `cargo run -p gk-testenv --bin deploygen`",
        deploy::MANIFEST
    );
    // Independently of the generator: what kubectl applies from deploy/ is exactly the
    // chart's default render plus the CRDs and the namespace, object for object.
    let cp = control_plane();
    let from_deploy = deploy_objects(&cp);
    let mut from_chart = by_key(
        docs(&render(deploy::RELEASE, deploy::NAMESPACE, &[]).unwrap())
            .into_iter()
            .map(without_helm_labels)
            .map(normalized)
            .collect(),
    );
    let crds = std::fs::read_to_string(deploy::chart_dir().join("crds/crds.yaml")).unwrap();
    from_chart.extend(by_key(docs(&crds).into_iter().map(normalized).collect()));
    let keys = |m: &BTreeMap<Key, Value>| m.keys().cloned().collect::<BTreeSet<_>>();
    let extra: Vec<_> = keys(&from_deploy)
        .difference(&keys(&from_chart))
        .cloned()
        .collect();
    assert_eq!(
        extra,
        vec![(
            "Namespace".to_string(),
            String::new(),
            deploy::NAMESPACE.to_string()
        )],
        "deploy/ adds only the namespace"
    );
    let missing: Vec<_> = keys(&from_chart)
        .difference(&keys(&from_deploy))
        .cloned()
        .collect();
    assert!(
        missing.is_empty(),
        "the chart has objects deploy/ lacks: {missing:?}"
    );
    for (k, chart_obj) in &from_chart {
        assert_eq!(
            &from_deploy[k], chart_obj,
            "{k:?} differs between deploy/ and the chart"
        );
    }
    assert!(from_chart.len() >= 17, "{} objects", from_chart.len());
}

/// Rewrites the namespace of a rendered stream, for a dry run in a namespace of our own.
fn in_namespace(text: &str, from: &str, to: &str) -> String {
    text.replace(&format!("namespace: {from}"), &format!("namespace: {to}"))
        .replace(&format!("name: {from}\n"), &format!("name: {to}\n"))
        .replace(
            &format!("--leader-election-namespace={from}"),
            &format!("--leader-election-namespace={to}"),
        )
}

#[tokio::test]
async fn manifests_pass_server_side_validation() {
    let cp = control_plane();
    let client = cp.client().await.unwrap();
    ControlPlane::install_crds(&client, &gk_api::crd::all())
        .await
        .unwrap();
    let ns = unique("gk-deploy-dry");
    let _cleanup = Cleanup {
        cp: cp.clone(),
        namespace: ns.clone(),
        release: None,
    };
    ControlPlane::ensure_namespace(&client, &ns).await.unwrap();

    // deploy/ as `kubectl apply --server-side -k deploy/` sends it, in our namespace. Other
    // tests apply the CRDs on this shared apiserver under their own field manager, so taking
    // their fields over needs --force-conflicts here (a fresh cluster does not).
    let dir = repo_root().join("deploy");
    let plain = in_namespace(
        &kubectl(&cp, &["kustomize", dir.to_str().unwrap()]),
        deploy::NAMESPACE,
        &ns,
    );
    let out = kubectl_with_file(
        &cp,
        &plain,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--dry-run=server",
        ],
    )
    .unwrap_or_else(|e| panic!("deploy/ refused: {e}"));
    assert!(
        out.contains(
            "csidriver.storage.k8s.io/gluster.glusterkube.dev serverside-applied (server dry run)"
        ),
        "{out}"
    );
    assert_eq!(
        out.matches("(server dry run)").count(),
        deploy_objects(&cp).len(),
        "{out}"
    );

    // The chart's render, default and with every option, as `helm template | kubectl apply`.
    for extra in [&[][..], ALL_OPTIONS] {
        let text = render("gk-dry", &ns, extra).unwrap();
        let out = kubectl_with_file(&cp, &text, &["apply", "--dry-run=server"])
            .unwrap_or_else(|e| panic!("helm template {extra:?} refused: {e}"));
        assert_eq!(
            out.matches("(server dry run)").count(),
            docs(&text).len(),
            "{out}"
        );
    }

    // The examples: the custom resources through the CRDs' schemas and CEL rules.
    let examples = repo_root().join("deploy/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&examples)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 9, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f)
            .unwrap()
            .replace("namespace: storage", &format!("namespace: {ns}"))
            .replace("namespace: default", &format!("namespace: {ns}"))
            .replace(": storage/", &format!(": {ns}/"));
        let out = kubectl_with_file(&cp, &text, &["apply", "--dry-run=server"])
            .unwrap_or_else(|e| panic!("{} refused: {e}", f.display()));
        assert!(out.contains("(server dry run)"), "{out}");
    }
}

/// Fails on any request the apiserver refused as forbidden.
fn none_forbidden(who: &str, log: &CallLog) {
    let refused = gk_testenv::roles::forbidden(log);
    assert!(refused.is_empty(), "{who}'s role refused: {refused:?}");
}

/// Whether a call with `method` to a path containing `path_part` succeeded.
fn made(log: &CallLog, method: &str, path_part: &str) -> bool {
    log.lock().unwrap().iter().any(|(what, status)| {
        what.starts_with(&format!("{method} ")) && what.contains(path_part) && *status < 300
    })
}

/// Runs the operator's reconcilers and the CSI controller's resolver, unchanged, under the
/// release's service accounts: every API call they make on the way must be allowed.
async fn code_runs_under_its_roles(cp: &ControlPlane, release_ns: &str, release: &str) {
    let full = fullname(release);
    use gk_api::crd::{GlusterCluster, GlusterVolume};
    use gk_api::names::OPERATOR as MANAGER;
    use gk_operator::context::{Config, Context};
    use kube::api::{Api, ListParams, PostParams};
    use kube::runtime::events::{Recorder, Reporter};

    let admin = cp.client().await.unwrap();
    ControlPlane::install_crds(&admin, &gk_api::crd::all())
        .await
        .unwrap();
    let ns = unique("gk-deploy-rbac");
    let _cleanup = Cleanup {
        cp: cp.clone(),
        namespace: ns.clone(),
        release: None,
    };
    ControlPlane::ensure_namespace(&admin, &ns).await.unwrap();
    let clusters: Api<GlusterCluster> = Api::namespaced(admin.clone(), &ns);
    let volumes: Api<GlusterVolume> = Api::namespaced(admin.clone(), &ns);
    let gc: GlusterCluster = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
        "metadata": {"name": "gluster", "namespace": ns},
        "spec": {"nodes": [{"name": "node-x", "storage": {"directory": "/srv/x"}}]},
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &gc).await.unwrap();
    let gv: GlusterVolume = serde_json::from_value(json!({
        "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
        "metadata": {"name": "pool", "namespace": ns},
        "spec": {"cluster": "gluster", "type": "Distribute", "brickCount": 1},
    }))
    .unwrap();
    volumes.create(&PostParams::default(), &gv).await.unwrap();

    let (op, op_log) = as_service_account(cp, release_ns, &format!("{full}-operator")).await;
    let ctx = Arc::new(Context {
        recorder: Recorder::new(op.clone(), Reporter::from(MANAGER)),
        client: op.clone(),
        config: Config {
            namespace: release_ns.to_string(),
            ..Config::default()
        },
        metrics: Arc::new(gk_operator::metrics::Metrics::default()),
        heals: Default::default(),
        agents: gk_api::agents::cache::AgentCache::new(gk_api::agents::AGENT_PORT),
    });
    // No kubelet runs the brick pod, so the cluster cannot become ready; everything up to
    // asking its agent (PKI Secrets, Service, PDB, StatefulSet, status) must be allowed. An
    // operator of another release on this shared apiserver may touch the same objects
    // meanwhile (its finalizer patch makes ours fail its test), so each reconcile starts
    // from a fresh read. The first pass only adds the finalizers; the next ones do the work.
    // What the operator's own loop does at start (gk_operator::run), clusters or not.
    let csi = gk_operator::tls::gluster::ensure_csi_client(&op, release_ns).await;
    eprintln!("CSI node plugins' certificate as the operator: {csi:?}");
    // What each replica does as it starts (the chart's default crds.upgrade).
    let crds = gk_operator::crd_upgrade::upgrade(&op, &gk_api::crd::all()).await;
    eprintln!("CRD upgrade as the operator: {crds:?}");
    assert!(crds.is_ok(), "the operator may upgrade its CRDs: {crds:?}");
    for _ in 0..3 {
        let gc = clusters.get("gluster").await.unwrap();
        let r = gk_operator::cluster::reconcile(Arc::new(gc), ctx.clone()).await;
        let gv = volumes.get("pool").await.unwrap();
        let r2 = gk_operator::volume::reconcile(Arc::new(gv), ctx.clone()).await;
        eprintln!("cluster reconcile as the operator: {r:?}\nvolume reconcile: {r2:?}");
    }
    none_forbidden("the operator", &op_log);
    eprintln!("operator calls: {:?}", op_log.lock().unwrap());
    for (method, path) in [
        ("GET", "/secrets/gluster-"),
        // Gluster TLS: the CA and the CSI node plugins' certificate in the release's
        // namespace, the cluster's certificate in its own.
        ("GET", "/secrets/glusterkube-gluster-ca"),
        ("PATCH", "/secrets/glusterkube-csi-gluster-tls"),
        ("PATCH", "/secrets/gluster-gluster-tls"),
        ("PATCH", "/services/"),
        ("PATCH", "/poddisruptionbudgets/"),
        ("PATCH", "/statefulsets/"),
        ("GET", "/pods"),
        ("GET", "/glusterclusters/gluster"),
        (
            "PATCH",
            "/customresourcedefinitions/glustervolumes.glusterkube.dev",
        ),
    ] {
        assert!(
            made(&op_log, method, path),
            "the operator made no {method} {path}: {:?}",
            op_log.lock().unwrap()
        );
    }
    let gv = volumes.get("pool").await.unwrap();
    // Events through events.k8s.io, as the recorder publishes them.
    let ev = kube::runtime::events::Event {
        type_: kube::runtime::events::EventType::Normal,
        reason: "RbacCheck".into(),
        note: Some("deploy test".into()),
        action: "Check".into(),
        secondary: None,
    };
    ctx.recorder
        .publish(&ev, &kube::Resource::object_ref(&gv, &()))
        .await
        .expect("the operator may publish events");
    // The operator lists and watches PersistentVolumes (deletion guard and PV metric).
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(op.clone());
    pvs.list(&ListParams::default().limit(1))
        .await
        .expect("operator lists PVs");
    none_forbidden("the operator", &op_log);
    assert!(made(&op_log, "POST", "/apis/events.k8s.io/v1/namespaces/"));

    // The CSI controller, with its production resolver, under its own account.
    let (csi, csi_log) =
        as_service_account(cp, release_ns, &format!("{full}-csi-controller")).await;
    use gk_csi::backend::PoolResolver;
    // Nothing grows a volume here: the growth is not waited for.
    let pools = gk_csi::kube_pools::KubePools::new(csi.clone(), 24050)
        .with_wait(std::time::Duration::from_secs(1));
    pools.pools().await.expect("the CSI controller lists pools");
    let key = gk_csi::params::ObjectKey {
        namespace: ns.clone(),
        name: "pool".into(),
    };
    match pools.resolve(&key).await {
        Ok(_) => panic!("a pool with no brick agent resolved"),
        Err(s) => assert!(
            !s.message().contains("forbidden"),
            "the CSI controller's role refused it: {}",
            s.message()
        ),
    }
    // The size is patched (the role allows it); no operator grows the volume here, so the
    // call ends telling the resizer to call again.
    let grown = pools.expand_dedicated(&key, 1 << 30).await.unwrap_err();
    assert_eq!(grown.code(), tonic::Code::DeadlineExceeded, "{grown:?}");
    assert!(
        made(&csi_log, "PATCH", "glustervolumes/pool"),
        "the CSI controller patches a GlusterVolume's size"
    );
    let missing = gk_csi::params::ObjectKey {
        namespace: ns.clone(),
        name: "absent".into(),
    };
    pools
        .delete_dedicated(&missing)
        .await
        .expect("the CSI controller may delete GlusterVolumes");
    // What resolve does once a pool has mount servers (ours has none without agents): read
    // its cluster, the operator's client certificate, and the cluster's brick pods.
    let gc = Api::<GlusterCluster>::namespaced(csi.clone(), &ns)
        .list(&ListParams::default())
        .await
        .expect("the CSI controller lists GlusterClusters")
        .items
        .into_iter()
        .find(|c| kube::ResourceExt::name_any(c) == "gluster")
        .expect("the cluster is listed");
    let creds = gk_api::agents::read_credentials(&csi, &gc)
        .await
        .expect("the CSI controller reads the operator's certificate");
    let (up, down) = gk_api::agents::cache::AgentCache::new(24050)
        .discover(&csi, &gc, Some(&creds), gk_api::agents::cache::Asked::Now)
        .await
        .expect("the CSI controller lists brick pods");
    assert!(up.is_empty() && down.len() == 1, "no agent runs here");
    // External pools: their Secrets, listed in the release namespace.
    gk_csi::external::ExternalPools::new(csi.clone(), release_ns.to_string())
        .pools()
        .await
        .expect("the CSI controller lists external pools in its namespace");
    assert!(
        made(
            &csi_log,
            "GET",
            &format!("/namespaces/{release_ns}/secrets")
        ),
        "{:?}",
        csi_log.lock().unwrap()
    );
    none_forbidden("the CSI controller", &csi_log);
    eprintln!("CSI controller calls: {:?}", csi_log.lock().unwrap());
    // What they must not do (`kubectl auth can-i` prints no and exits 1), checked against
    // one thing the operator may do, so a broken check cannot pass.
    let can = |sa: &str, verb: &str, what: &str| {
        let as_sa = format!("system:serviceaccount:{release_ns}:{sa}");
        match cp.kubectl(&["auth", "can-i", verb, what, "-n", &ns, "--as", &as_sa]) {
            Ok(out) if out.trim() == "yes" => true,
            Err(e) if e.to_string().trim_end().ends_with("no") => false,
            other => panic!("kubectl auth can-i {verb} {what} as {sa}: {other:?}"),
        }
    };
    assert!(can(&format!("{full}-operator"), "get", "secrets"));
    let no = |sa: &str, verb: &str, what: &str| {
        assert!(!can(sa, verb, what), "{sa} may {verb} {what}");
    };
    for sa in ["operator", "csi-controller", "csi-node"] {
        let sa = format!("{full}-{sa}");
        no(&sa, "create", "pods/exec");
        no(&sa, "delete", "secrets");
        no(&sa, "create", "pods");
    }
    no(&format!("{full}-csi-node"), "get", "secrets");
    no(
        &format!("{full}-csi-node"),
        "list",
        "glustervolumes.glusterkube.dev",
    );
    no(&format!("{full}-csi-controller"), "list", "secrets");

    // A volume that never reached gluster (no agent ever answered) is not held by its
    // finalizer: deleting it needs no agent.
    volumes.delete("pool", &Default::default()).await.unwrap();
    for _ in 0..3 {
        let Some(gv) = volumes.get_opt("pool").await.unwrap() else {
            break;
        };
        let r = gk_operator::volume::reconcile(Arc::new(gv), ctx.clone()).await;
        eprintln!("volume reconcile after delete: {r:?}");
    }
    assert!(
        volumes.get_opt("pool").await.unwrap().is_none(),
        "a GlusterVolume that never existed in gluster is stuck deleting"
    );

    // The Cleanup guard deletes the custom resources and their finalizers.
}

/// Objects of every cluster-scoped kind that carry the release's instance label.
fn cluster_scoped_of(cp: &ControlPlane, release: &str) -> Vec<String> {
    let kinds = kubectl(
        cp,
        &[
            "api-resources",
            "--namespaced=false",
            "--verbs=list",
            "-o",
            "name",
        ],
    );
    let kinds: Vec<&str> = kinds.lines().filter(|l| !l.is_empty()).collect();
    assert!(
        kinds.contains(&"clusterroles.rbac.authorization.k8s.io"),
        "{kinds:?}"
    );
    kubectl(
        cp,
        &[
            "get",
            &kinds.join(","),
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
            "-o",
            "name",
        ],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

#[tokio::test]
async fn helm_install_upgrade_uninstall() {
    let cp = control_plane();
    let release = unique("gk");
    let full = fullname(&release);
    let ns = unique("gk-deploy-rel");
    let kubeconfig = cp.kubeconfig.to_str().unwrap().to_string();
    let chart = deploy::chart_dir();
    let chart = chart.to_str().unwrap();
    let helm = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--namespace", &ns, "--kubeconfig", &kubeconfig]);
        run_helm(&all).unwrap_or_else(|e| panic!("helm {}: {e}", args.join(" ")))
    };

    let _cleanup = Cleanup {
        cp: cp.clone(),
        namespace: ns.clone(),
        release: Some(release.clone()),
    };
    // The CSIDriver is one per cluster. When another glusterkube release on this shared
    // apiserver owns it (an end-to-end run), install without it, and check below that our
    // uninstall leaves theirs alone.
    let owner = |cp: &ControlPlane| {
        cp.kubectl(&[
            "get", "csidriver", gk_csi::DRIVER_NAME, "-o",
            "jsonpath={.metadata.annotations.meta\\.helm\\.sh/release-namespace}/{.metadata.annotations.meta\\.helm\\.sh/release-name}",
        ])
        .ok()
    };
    let foreign = owner(&cp);
    let mut values = NO_NODE.to_vec();
    if let Some(other) = &foreign {
        eprintln!("CSIDriver belongs to release {other}: installing with csiDriver.create=false");
        values.extend_from_slice(&["--set", "csiDriver.create=false"]);
    }
    let mut install = vec!["install", &release, chart, "--create-namespace"];
    install.extend_from_slice(&values);
    let out = helm(&install);
    assert!(out.contains("STATUS: deployed"), "{out}");
    assert!(
        out.contains("kubectl apply -f deploy/examples/glustercluster.yaml"),
        "NOTES: {out}"
    );
    let installed = cluster_scoped_of(&cp, &release);
    let mut wanted = vec![
        format!("clusterrole.rbac.authorization.k8s.io/{full}-operator"),
        format!("clusterrole.rbac.authorization.k8s.io/{full}-csi-controller"),
        format!("clusterrolebinding.rbac.authorization.k8s.io/{full}-operator"),
        // Named after the release, so that it never meets another release's class (the
        // demo's, say: README's `./demo.sh` then the test command).
        format!("volumesnapshotclass.snapshot.storage.k8s.io/{full}"),
    ];
    if foreign.is_none() {
        wanted.push(format!("csidriver.storage.k8s.io/{}", gk_csi::DRIVER_NAME));
        assert_eq!(owner(&cp), Some(format!("{ns}/{release}")));
    }
    for want in wanted {
        assert!(installed.contains(&want), "{want} not in {installed:?}");
    }
    let names = kubectl(
        &cp,
        &[
            "-n",
            &ns,
            "get",
            "deployments,daemonsets,serviceaccounts,services,configmaps",
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
            "-o",
            "name",
        ],
    );
    for want in [
        "deployment.apps/",
        "daemonset.apps/",
        "serviceaccount/",
        "service/",
        "configmap/",
    ] {
        assert!(names.contains(want), "{want} missing: {names}");
    }

    code_runs_under_its_roles(&cp, &ns, &release).await;

    // Upgrade to changed values: the operator's refresh interval and a StorageClass.
    let sc = format!("{release}-subdir");
    let sc_name = format!("storageClasses[0].name={sc}");
    let mut upgrade = vec![
        "upgrade",
        &release,
        chart,
        "--set",
        "operator.refreshSeconds=45",
        "--set",
        &sc_name,
        "--set",
        "storageClasses[0].parameters.pool=storage/pool",
    ];
    upgrade.extend_from_slice(&values);
    let out = helm(&upgrade);
    assert!(out.contains("REVISION: 2"), "{out}");
    let env = kubectl(&cp, &["-n", &ns, "get", "deployment", &format!("{full}-operator"), "-o", "jsonpath={.spec.template.spec.containers[0].env[?(@.name==\"GK_REFRESH_SECONDS\")].value}"]);
    assert_eq!(env, "45");
    let provisioner = kubectl(
        &cp,
        &[
            "get",
            "storageclass",
            &sc,
            "-o",
            "jsonpath={.provisioner} {.parameters.pool} {.allowVolumeExpansion}",
        ],
    );
    assert_eq!(provisioner, "gluster.glusterkube.dev storage/pool true");
    let history = helm(&["history", &release, "-o", "json"]);
    let history: Value = serde_json::from_str(&history).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 2, "{history}");

    let out = helm(&["uninstall", &release, "--wait"]);
    assert!(out.contains("uninstalled"), "{out}");
    let left = cluster_scoped_of(&cp, &release);
    assert!(
        left.is_empty(),
        "cluster-scoped objects left by uninstall: {left:?}"
    );
    assert_eq!(
        owner(&cp),
        foreign,
        "our CSIDriver is gone, and another release's is kept"
    );
    let sc_left = cp.kubectl(&["get", "storageclass", &sc]);
    assert!(sc_left.is_err(), "StorageClass {sc} survived uninstall");
    let ns_left = kubectl(
        &cp,
        &[
            "-n",
            &ns,
            "get",
            "deployments,daemonsets,services,serviceaccounts,configmaps,roles,rolebindings",
            "-l",
            &format!("app.kubernetes.io/instance={release}"),
            "-o",
            "name",
        ],
    );
    assert!(
        ns_left.trim().is_empty(),
        "namespaced objects left: {ns_left}"
    );
    // The CRDs stay, as documented.
    for crd in [
        "glusterclusters.glusterkube.dev",
        "glustervolumes.glusterkube.dev",
    ] {
        kubectl(&cp, &["get", "crd", crd]);
    }
}

#[test]
fn readme_quick_start_names_what_exists() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme
        .find("## Quick start on a cluster")
        .expect("README has a quick start section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let mut paths = BTreeSet::new();
    for word in section.split(|c: char| c.is_whitespace() || c == '`' || c == '(' || c == ')') {
        let word = word.trim_end_matches([',', '.', ':', ';']);
        if word.starts_with("deploy/") || word.starts_with("charts/") {
            paths.insert(word.to_string());
        }
    }
    for p in &paths {
        assert!(
            repo_root().join(p).exists(),
            "the quick start names {p}, which does not exist"
        );
    }
    for needed in [
        "charts/glusterkube",
        "deploy/",
        "deploy/examples/glustercluster.yaml",
        "deploy/examples/glustervolume-replicate3.yaml",
        "deploy/examples/storageclass-subdir.yaml",
        "deploy/examples/pvc.yaml",
    ] {
        assert!(
            paths.contains(needed),
            "the quick start does not use {needed}: {paths:?}"
        );
    }
    assert!(section.contains("kubectl get glustervolumes"));
    // The names the steps use are the examples' names.
    let example = |f: &str| {
        docs(&std::fs::read_to_string(repo_root().join("deploy/examples").join(f)).unwrap())
            .remove(0)
    };
    let pool = example("glustervolume-replicate3.yaml");
    assert!(section.contains(&format!(
        "-n {} wait glustervolume/{}",
        pool["metadata"]["namespace"].as_str().unwrap(),
        pool["metadata"]["name"].as_str().unwrap()
    )));
    let pvc = example("pvc.yaml");
    assert!(section.contains(&format!(
        "get pvc {}",
        pvc["metadata"]["name"].as_str().unwrap()
    )));
    let sc = example("storageclass-subdir.yaml");
    assert_eq!(pvc["spec"]["storageClassName"], sc["metadata"]["name"]);
    assert_eq!(
        sc["parameters"]["pool"].as_str().unwrap(),
        format!(
            "{}/{}",
            pool["metadata"]["namespace"].as_str().unwrap(),
            pool["metadata"]["name"].as_str().unwrap()
        )
    );
}

/// Every key in values.yaml is explained: a comment right above it, or it continues a group
/// of one-line sibling keys that a comment above explains (like nodeSelector, tolerations,
/// affinity), or it is inside a free-form Kubernetes map (resources, labels).
#[test]
fn every_value_has_a_comment() {
    let text = std::fs::read_to_string(deploy::chart_dir().join("values.yaml")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    let key_of = |l: &str| {
        let t = l.trim_start();
        (!t.starts_with('#') && !t.starts_with('-'))
            .then(|| t.split_once(':').map(|(k, _)| k.to_string()))
            .flatten()
    };
    let mut keys = 0;
    let mut missing = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if key_of(line).is_none() {
            continue;
        }
        keys += 1;
        let parent = lines[..i]
            .iter()
            .rev()
            .find(|l| key_of(l).is_some() && indent(l) < indent(line))
            .and_then(|l| key_of(l));
        if matches!(
            parent.as_deref(),
            Some("resources" | "labels" | "requests" | "limits")
        ) {
            continue;
        }
        let mut j = i;
        let documented = loop {
            let Some(prev) = j.checked_sub(1).map(|p| lines[p]) else {
                break false;
            };
            if prev.trim_start().starts_with('#') {
                break true;
            }
            // A one-line sibling: the same comment covers this key too.
            let one_line = key_of(prev).is_some()
                && indent(prev) == indent(line)
                && !prev.trim_end().ends_with(':');
            if !one_line {
                break false;
            }
            j -= 1;
        };
        if !documented {
            missing.push(format!("line {}: {}", i + 1, line.trim()));
        }
    }
    assert!(keys > 40, "{keys} keys read");
    assert!(
        missing.is_empty(),
        "values without a comment:\n{}",
        missing.join("\n")
    );
}

/// The flags and environment variables the chart hands the binaries are ones they declare
/// (read from their clap definitions), so a renamed flag fails here, not in a crash loop.
#[test]
fn chart_wires_flags_the_binaries_declare() {
    let source = |path: &str| std::fs::read_to_string(repo_root().join(path)).unwrap();
    let operator_main = source("operator/src/main.rs");
    let csi_main = source("csi/src/main.rs");
    let declares = |main: &str, arg: &str| {
        if let Some(flag) = arg.strip_prefix("--") {
            let field = flag.split('=').next().unwrap().replace('-', "_");
            main.contains(&format!(" {field}: "))
        } else {
            arg == "RUST_LOG" || main.contains(&format!("env = \"{arg}\""))
        }
    };
    let objects = docs(&render("gk", "ns", ALL_OPTIONS).unwrap());
    let mut checked = 0;
    for o in &objects {
        let Some(containers) = o
            .pointer("/spec/template/spec/containers")
            .and_then(Value::as_array)
        else {
            continue;
        };
        for c in containers {
            let main = match c["name"].as_str().unwrap() {
                "operator" => &operator_main,
                "gk-csi" => &csi_main,
                _ => continue,
            };
            let env = c["env"].as_array().cloned().unwrap_or_default();
            // A variable only other values expand, as $(POD_IP), is for the kubelet.
            let expanded = |name: &str| {
                env.iter()
                    .filter_map(|e| e["value"].as_str())
                    .any(|v| v.contains(&format!("$({name})")))
            };
            let names = env
                .iter()
                .map(|e| e["name"].as_str().unwrap().to_string())
                .filter(|n| !expanded(n))
                .collect::<Vec<_>>()
                .into_iter();
            let args = strings(&c["args"]).into_iter().map(str::to_string);
            for arg in names.chain(args) {
                assert!(
                    declares(main, &arg),
                    "{} passes {arg}, which it does not declare",
                    c["name"]
                );
                checked += 1;
            }
        }
    }
    assert!(checked >= 12, "{checked} flags and variables checked");
}
