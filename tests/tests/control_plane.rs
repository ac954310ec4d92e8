//! The local control plane is real: /readyz answers, our CRDs are accepted and enforced,
//! objects round-trip through kube-rs, and the controller-manager acts on StatefulSets.

use std::time::Duration;

use gk_operator::crd::{GlusterCluster, GlusterClusterSpec, NodeStorage, StorageNode};
use gk_testenv::k8s::ControlPlane;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};

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
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in gk_operator::crd::all() {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap();
        wait(
            "CRD established",
            30,
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap();
    }

    let ns = "gk-crd-test";
    ensure_namespace(&client, ns).await;
    let api: Api<GlusterCluster> = Api::namespaced(client.clone(), ns);
    let spec = GlusterClusterSpec {
        nodes: vec![
            StorageNode {
                name: "node-a".into(),
                storage: NodeStorage::Device("/dev/sdb".into()),
            },
            StorageNode {
                name: "node-b".into(),
                storage: NodeStorage::Directory("/srv/gluster".into()),
            },
        ],
        image: None,
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

    // The apiserver enforces the generated schema and names the field.
    let dynamic: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::erase::<GlusterCluster>(&()),
    );
    let cases = [
        (serde_json::json!({"nodes": []}), "spec.nodes"),
        (
            serde_json::json!({"nodes": [{"name": "n", "storage": {"device": "/dev/sdb", "directory": "/x"}}]}),
            "spec.nodes[0].storage",
        ),
        (
            serde_json::json!({"nodes": [{"name": "", "storage": {"device": "/dev/sdb"}}]}),
            "spec.nodes[0].name",
        ),
    ];
    for (spec, field) in cases {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": "bad"}, "spec": spec
        }))
        .unwrap();
        let err = dynamic
            .create(&PostParams::default(), &obj)
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{field}: {err}");
    }

    api.delete("pool", &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn controller_manager_creates_statefulset_pods_which_stay_pending_without_a_kubelet() {
    let cp = ControlPlane::ensure().unwrap();
    let client = cp.client().await.unwrap();
    let ns = "gk-sts-test";
    ensure_namespace(&client, ns).await;
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

async fn ensure_namespace(client: &kube::Client, name: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
    }))
    .unwrap();
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&ns),
    )
    .await
    .unwrap();
    // The serviceaccount controller must create "default" before pods can be admitted.
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), name);
    wait("default service account", 60, async {
        while sas.get_opt("default").await.unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}
