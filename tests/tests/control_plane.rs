//! The local control plane is real: /readyz answers, our CRDs are accepted and enforced,
//! objects round-trip through kube-rs, and the controller-manager acts on StatefulSets.

use std::time::Duration;

use gk_api::crd::{GlusterCluster, GlusterClusterSpec, NodeStorage, StorageNode};
use gk_testenv::k8s::ControlPlane;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};

const MANAGER: &str = "gk-testenv";

async fn wait<F: std::future::Future>(what: &str, secs: u64, fut: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .unwrap_or_else(|_| panic!("timed out after {secs}s waiting for {what}"))
}

#[test]
fn readyz_answers_ok() {
    let cp = ControlPlane::ensure().unwrap();
    assert_eq!(cp.kubectl(&["get", "--raw=/readyz"]).unwrap().trim(), "ok");
}

#[tokio::test]
async fn crd_is_applied_and_an_object_reads_back_through_kube_rs() {
    let cp = ControlPlane::ensure().unwrap();
    let client = cp.client().await.unwrap();
    ControlPlane::install_crds(&client, &gk_api::crd::all())
        .await
        .unwrap();

    let ns = "gk-crd-test";
    ControlPlane::ensure_namespace(&client, ns).await.unwrap();
    let api: Api<GlusterCluster> = Api::namespaced(client.clone(), ns);
    let spec = GlusterClusterSpec {
        nodes: vec![
            StorageNode {
                name: "node-a".into(),
                storage: NodeStorage {
                    device: Some("/dev/sdb".into()),
                    ..Default::default()
                },
            },
            StorageNode {
                name: "node-b".into(),
                storage: NodeStorage {
                    directory: Some("/srv/gluster".into()),
                    ..Default::default()
                },
            },
        ],
        image: None,
        resources: None,
        tolerations: vec![],
        default_profile: Default::default(),
        replacements: vec![],
        tls: Default::default(),
        client_networks: vec![],
        zone_label: None,
    };
    let _ = api.delete("pool", &DeleteParams::default()).await;
    wait("old object gone", 30, async {
        while api.get_opt("pool").await.unwrap().is_some() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
    api.create(
        &PostParams::default(),
        &GlusterCluster::new("pool", spec.clone()),
    )
    .await
    .unwrap();
    let back = api.get("pool").await.unwrap();
    assert_eq!(back.spec, spec);
    assert!(back.metadata.uid.is_some());

    api.delete("pool", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn controller_manager_creates_statefulset_pods_which_stay_pending_without_a_kubelet() {
    let cp = ControlPlane::ensure().unwrap();
    let client = cp.client().await.unwrap();
    let ns = "gk-sts-test";
    ControlPlane::ensure_namespace(&client, ns).await.unwrap();
    let sts: StatefulSet = serde_yaml::from_str(
        r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: brick}
spec:
  replicas: 1
  serviceName: brick
  selector: {matchLabels: {app: brick}}
  template:
    metadata: {labels: {app: brick}}
    spec:
      containers: [{name: c, image: "example.invalid/never-pulled:1"}]
"#,
    )
    .unwrap();
    let api: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    api.patch(
        "brick",
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&sts),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod = wait(
        "pod brick-0 created by the controller-manager",
        120,
        async {
            loop {
                if let Some(p) = pods.get_opt("brick-0").await.unwrap() {
                    break p;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        },
    )
    .await;
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("StatefulSet", "brick")
    );
    // The scheduler sees the pod but has no node to put it on.
    let scheduled = wait("scheduler verdict", 60, async {
        loop {
            let p = pods.get("brick-0").await.unwrap();
            let cond = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled").cloned());
            if let Some(c) = cond {
                break (p.status.unwrap().phase, c);
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    })
    .await;
    assert_eq!(scheduled.0.as_deref(), Some("Pending"));
    assert_eq!(scheduled.1.status, "False");
    assert_eq!(scheduled.1.reason.as_deref(), Some("Unschedulable"));
    api.delete("brick", &DeleteParams::default()).await.unwrap();
}
