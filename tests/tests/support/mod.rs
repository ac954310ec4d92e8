//! Shared by the operator tests: a fresh namespace on the shared control plane with glusterd
//! nodes behind the stand-in kubelet, and polling with a deadline.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gk_testenv::gluster_net::GlusterNet;
use gk_testenv::k8s::ControlPlane;
use gk_testenv::kubelet::StandInKubelet;
use gk_testenv::roles::{CallLog, ProductRoles};

/// What an operator test runs against.
pub struct OperatorEnv {
    #[allow(dead_code)] // each test binary compiles this module; not every test runs kubectl
    pub cp: ControlPlane,
    /// The admin: for what the test itself does (and the stand-in kubelet).
    pub client: kube::Client,
    pub ns: String,
    pub net: Arc<GlusterNet>,
    pub kubelet: StandInKubelet,
    /// The chart's RBAC, for a release in this namespace.
    #[allow(dead_code)]
    pub roles: ProductRoles,
    /// Acts as the chart's operator ServiceAccount: the operator runs with it, never as admin.
    #[allow(dead_code)]
    pub operator: (kube::Client, CallLog),
    /// Acts as the chart's CSI controller ServiceAccount.
    #[allow(dead_code)]
    pub csi_controller: (kube::Client, CallLog),
}

/// The control plane with current CRDs, a namespace of its own named `<prefix>-<pid>-<time>`
/// (pids wrap quickly here, and a namespace of an earlier run may still be terminating), and
/// `nodes` glusterd nodes served as Kubernetes nodes storage-1, storage-2, ….
pub async fn operator_env(prefix: &str, nodes: usize) -> OperatorEnv {
    let ApiEnv {
        cp,
        client,
        ns,
        roles,
        operator,
    } = api_env(prefix).await;
    let net = Arc::new(GlusterNet::start(nodes).unwrap());
    let names: HashMap<String, usize> = (0..nodes)
        .map(|i| (format!("storage-{}", i + 1), i))
        .collect();
    let kubelet = StandInKubelet::start(client.clone(), &ns, net.clone(), names);
    let csi_controller = roles.csi_controller(&cp).await;
    OperatorEnv {
        cp,
        client,
        ns,
        net,
        kubelet,
        roles,
        operator,
        csi_controller,
    }
}

/// A namespace of its own with the chart's RBAC, and no storage nodes: for what needs only
/// the API.
#[allow(dead_code)] // each test binary compiles this module
pub struct ApiEnv {
    pub cp: ControlPlane,
    pub client: kube::Client,
    pub ns: String,
    pub roles: ProductRoles,
    /// Acts as the chart's operator ServiceAccount.
    pub operator: (kube::Client, CallLog),
}

/// The control plane with current CRDs, a namespace named `<prefix>-<pid>-<time>` and the
/// chart's roles in it.
pub async fn api_env(prefix: &str) -> ApiEnv {
    let cp = ControlPlane::ensure().unwrap();
    let client = cp.client().await.unwrap();
    ControlPlane::install_crds(&client, &gk_api::crd::all())
        .await
        .unwrap();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    remove_stale_namespaces(&client).await;
    // Nanoseconds: two environments of one test process get different namespaces.
    let ns = format!("{prefix}-{}-{}", std::process::id(), stamp % 1_000_000_000);
    ControlPlane::ensure_namespace(&client, &ns).await.unwrap();
    // A release of its own: the chart's ClusterRoles and bindings are per release, and two
    // environments of one process must not rebind (or delete) each other's.
    static RELEASES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RELEASES.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let release = match n {
        0 => format!("gkt-{}", std::process::id()),
        n => format!("gkt-{}-{n}", std::process::id()),
    };
    let roles = ProductRoles::install(&client, &release, &ns).await.unwrap();
    let operator = roles.operator(&cp).await;
    ApiEnv {
        cp,
        client,
        ns,
        roles,
        operator,
    }
}

/// Prefixes of the namespaces these tests (and the footprint and provisioning benches) make.
const PREFIXES: [&str; 4] = ["gk-op", "gk-d2", "gk-footprint", "gk-prov"];

/// Removes what runs that failed left behind: namespaces named `<prefix>-<pid>-<n>` whose
/// process is gone. Their GlusterVolumes' agents no longer answer, and cluster-wide calls
/// (the CSI driver's ListVolumes) would trip over them; their finalizers could never finish.
async fn remove_stale_namespaces(client: &kube::Client) {
    use gk_api::crd::{GlusterCluster, GlusterVolume};
    use k8s_openapi::api::core::v1::{Namespace, PersistentVolume};
    use kube::api::{Api, DeleteParams, Patch, PatchParams};
    use kube::ResourceExt;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let Ok(list) = namespaces.list(&Default::default()).await else {
        return;
    };
    for ns in list.items {
        let name = ns.name_any();
        let pid = PREFIXES
            .iter()
            .find_map(|p| name.strip_prefix(&format!("{p}-")))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        let Some(pid) = pid else { continue };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        eprintln!("removing namespace {name}, left by a failed run");
        drop_finalizers(Api::<GlusterVolume>::namespaced(client.clone(), &name)).await;
        drop_finalizers(Api::<GlusterCluster>::namespaced(client.clone(), &name)).await;
        let pvs: Api<PersistentVolume> = Api::all(client.clone());
        let pv = format!("{name}-pv");
        let _ = pvs
            .patch(&pv, &PatchParams::default(), &Patch::Merge(unfinalized()))
            .await;
        let _ = pvs.delete(&pv, &DeleteParams::default()).await;
        let _ = namespaces.delete(&name, &DeleteParams::default()).await;
    }
}

fn unfinalized() -> serde_json::Value {
    serde_json::json!({"metadata": {"finalizers": null}})
}

/// Removes the finalizers of every object `api` lists: objects whose operator (and glusterd
/// nodes) ended with a run that failed.
#[allow(dead_code)] // each test binary compiles this module; not every one uses this
pub async fn drop_finalizers<K>(api: kube::Api<K>)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    use kube::ResourceExt;
    let Ok(list) = api.list_metadata(&Default::default()).await else {
        return;
    };
    let patch = kube::api::Patch::Merge(unfinalized());
    for o in list.items {
        let _ = api.patch(&o.name_any(), &Default::default(), &patch).await;
    }
}

/// Polls `probe` until it returns a value; fails the test after `secs`. A probe that hangs
/// (an API call, a FUSE lookup) counts as a miss rather than blocking for ever.
pub async fn wait_until<T>(what: &str, secs: u64, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    wait_for(what, secs, async || probe().await.ok_or_else(String::new)).await
}

/// [`wait_until`] for a probe that says why it is not there yet: the failure names the
/// last such answer, so a timeout in CI shows the state it was stuck in.
#[allow(dead_code)] // each test binary compiles this module; not every one uses this
pub async fn wait_for<T>(
    what: &str,
    secs: u64,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match tokio::time::timeout(Duration::from_secs(30), probe()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(why)) => why,
            Err(_) => "the last probe hung for 30 s".into(),
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}{}{last}",
            if last.is_empty() { "" } else { "; last seen: " }
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A PersistentVolume of the CSI driver on gluster volume `gluster_volume`, as a dedicated PV
/// records it: what keeps a GlusterVolume's deletion waiting.
#[allow(dead_code)] // each test binary compiles this module; not every one uses this
pub fn pv_using(name: &str, gluster_volume: &str) -> k8s_openapi::api::core::v1::PersistentVolume {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                 "csi": {"driver": "gluster.glusterkube.dev", "volumeHandle": "h",
                         "volumeAttributes": {"glusterVolume": gluster_volume}}}
    }))
    .unwrap()
}

/// Why `mounter` could not use `source` at `dir`: the mount was refused, or writing through
/// it failed (gluster can mount before every brick has refused the client). Empty when it
/// mounted and wrote. `secure` starts the client with management TLS, as the CSI node plugin
/// does for TLS clusters.
#[allow(dead_code)] // each test binary compiles this module; not every one uses this
pub async fn refusal(
    mounter: &gk_mount::Mounter,
    source: &gk_mount::MountSource,
    dir: &std::path::Path,
    log: &std::path::Path,
    secure: bool,
) -> String {
    let mounted = if secure {
        mounter.mount_secure(source, dir, log, &[]).await
    } else {
        mounter.mount(source, dir, log, &[]).await
    };
    match mounted {
        Err(e) => e.to_string(),
        Ok(()) => {
            let written = std::fs::write(dir.join("probe"), b"x");
            let _ = gk_mount::unmount(dir);
            written.err().map(|e| e.to_string()).unwrap_or_default()
        }
    }
}

/// Fails when the apiserver refused any call of `who` as forbidden: the chart's role lacks
/// what the code needs.
#[allow(dead_code)]
pub fn none_forbidden(who: &str, calls: &CallLog) {
    let refused = gk_testenv::roles::forbidden(calls);
    assert!(refused.is_empty(), "{who}'s role refused: {refused:?}");
}
