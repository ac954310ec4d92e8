//! The product's own permissions in tests: the chart's ServiceAccounts and RBAC, rendered
//! for a release in a test's namespace and applied, and clients that act as those accounts
//! (impersonation by the admin user), so the apiserver authorises every call the operator or
//! the CSI controller makes in a test against the role the chart gives it.

use std::sync::Arc;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::discovery::ApiResource;

use crate::k8s::ControlPlane;
use crate::EnvError;

/// Every API request a client made: "METHOD /path" and the response status.
pub type CallLog = Arc<std::sync::Mutex<Vec<(String, u16)>>>;

/// Wraps a client's HTTP stack to log each request with its response status.
pub struct Logged<S> {
    inner: S,
    log: CallLog,
}

impl<S, B> tower::Service<tonic::codegen::http::Request<kube::client::Body>> for Logged<S>
where
    S: tower::Service<
        tonic::codegen::http::Request<kube::client::Body>,
        Response = tonic::codegen::http::Response<B>,
    >,
    S::Future: Send + 'static,
    S::Error: 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: tonic::codegen::http::Request<kube::client::Body>) -> Self::Future {
        let what = format!("{} {}", req.method(), req.uri().path());
        let log = self.log.clone();
        let response = self.inner.call(req);
        Box::pin(async move {
            let r = response.await;
            if let Ok(resp) = &r {
                log.lock()
                    .expect("call log")
                    .push((what, resp.status().as_u16()));
            }
            r
        })
    }
}

/// A client that acts as a service account (impersonation by the admin user), so the
/// apiserver authorises each call against that account's RBAC; every call is logged.
pub async fn as_service_account(cp: &ControlPlane, ns: &str, sa: &str) -> (kube::Client, CallLog) {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let kc = Kubeconfig::read_from(&cp.kubeconfig).expect("the admin kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("a client configuration from the admin kubeconfig");
    config.auth_info.impersonate = Some(format!("system:serviceaccount:{ns}:{sa}"));
    config.auth_info.impersonate_groups = Some(vec![
        "system:serviceaccounts".into(),
        format!("system:serviceaccounts:{ns}"),
        "system:authenticated".into(),
    ]);
    let log = CallLog::default();
    let l = log.clone();
    let client = kube::client::ClientBuilder::try_from(config)
        .expect("a client for the service account")
        .with_layer(&tower::layer::layer_fn(move |inner| Logged {
            inner,
            log: l.clone(),
        }))
        .build();
    (client, log)
}

/// The chart's RBAC for one release, applied in a test's namespace; its cluster-scoped
/// objects (ClusterRoles and their bindings) are deleted on drop, the rest go with the
/// namespace.
pub struct ProductRoles {
    admin: kube::Client,
    cluster_scoped: Vec<(ApiResource, String)>,
    /// The chart's name prefix for this release (`<release>-glusterkube`).
    pub fullname: String,
    pub namespace: String,
}

/// The kinds of the chart's objects that carry its permissions.
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

impl ProductRoles {
    /// Renders the chart as `release` in `namespace` and applies its ServiceAccounts, roles
    /// and bindings (nothing else of the chart).
    pub async fn install(
        admin: &kube::Client,
        release: &str,
        namespace: &str,
    ) -> Result<Self, EnvError> {
        let rendered = crate::deploy::render(release, namespace, &[])?;
        let mut cluster_scoped = Vec::new();
        for doc in rendered.split("\n---") {
            let Ok(value) = serde_yaml::from_str::<serde_json::Value>(doc) else {
                continue;
            };
            let kind = value["kind"].as_str().unwrap_or("");
            if !RBAC_KINDS.contains(&kind) {
                continue;
            }
            let obj: DynamicObject = serde_json::from_value(value.clone())
                .map_err(|e| EnvError::Setup(format!("chart {kind}: {e}")))?;
            let (group, version) = match value["apiVersion"].as_str().unwrap_or("").split_once('/')
            {
                Some((g, v)) => (g.to_string(), v.to_string()),
                None => (
                    String::new(),
                    value["apiVersion"].as_str().unwrap_or("").to_string(),
                ),
            };
            let plural = match kind {
                "ServiceAccount" => "serviceaccounts",
                "ClusterRole" => "clusterroles",
                "ClusterRoleBinding" => "clusterrolebindings",
                "Role" => "roles",
                _ => "rolebindings",
            };
            let ar = ApiResource {
                group: group.clone(),
                version: version.clone(),
                api_version: value["apiVersion"].as_str().unwrap_or("").to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
            };
            let name = obj.metadata.name.clone().unwrap_or_default();
            let api: Api<DynamicObject> = if kind.starts_with("Cluster") {
                cluster_scoped.push((ar.clone(), name.clone()));
                Api::all_with(admin.clone(), &ar)
            } else {
                Api::namespaced_with(admin.clone(), namespace, &ar)
            };
            api.patch(
                &name,
                &PatchParams::apply("gk-testenv").force(),
                &Patch::Apply(&obj),
            )
            .await
            .map_err(|e| EnvError::Setup(format!("applying the chart's {kind} {name}: {e}")))?;
        }
        if cluster_scoped.is_empty() {
            return Err(EnvError::Setup(
                "the chart rendered no ClusterRole: is charts/glusterkube intact?".into(),
            ));
        }
        Ok(Self {
            admin: admin.clone(),
            cluster_scoped,
            fullname: format!("{release}-glusterkube"),
            namespace: namespace.to_string(),
        })
    }

    /// A client that acts as the operator's ServiceAccount.
    pub async fn operator(&self, cp: &ControlPlane) -> (kube::Client, CallLog) {
        as_service_account(cp, &self.namespace, &format!("{}-operator", self.fullname)).await
    }

    /// A client that acts as the CSI controller's ServiceAccount.
    pub async fn csi_controller(&self, cp: &ControlPlane) -> (kube::Client, CallLog) {
        as_service_account(
            cp,
            &self.namespace,
            &format!("{}-csi-controller", self.fullname),
        )
        .await
    }
}

impl Drop for ProductRoles {
    fn drop(&mut self) {
        let admin = self.admin.clone();
        let objects = std::mem::take(&mut self.cluster_scoped);
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Dropped from async code: delete on a thread of its own and wait for it.
        let _ = std::thread::spawn(move || {
            handle.block_on(async move {
                for (ar, name) in objects {
                    let api: Api<DynamicObject> = Api::all_with(admin.clone(), &ar);
                    let _ = api.delete(&name, &DeleteParams::default()).await;
                }
            })
        })
        .join();
    }
}

/// The requests the apiserver refused as forbidden, from a call log.
pub fn forbidden(log: &CallLog) -> Vec<(String, u16)> {
    log.lock()
        .expect("call log")
        .iter()
        .filter(|(_, status)| *status == 403)
        .cloned()
        .collect()
}
