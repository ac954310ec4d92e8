//! Reading glusterkube's objects from the apiserver: clusters, volumes, brick pods and the
//! driver's PVs. The edge every subcommand starts from.

use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_api::names;
use k8s_openapi::api::core::v1::{PersistentVolume, Pod};
use kube::api::{ListParams, LogParams};
use kube::{Api, Client, ResourceExt};

use crate::PluginError;

/// A namespaced kind kube-rs can read.
trait Namespaced:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
{
}

/// Where a command looks: one namespace, or all of them.
#[derive(Clone)]
pub struct Scope {
    pub client: Client,
    /// None: every namespace (`-A`).
    pub namespace: Option<String>,
}

impl Scope {
    fn api<K: Namespaced>(&self) -> Api<K> {
        match &self.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// The namespace a named object is looked up in.
    fn one_namespace(&self, what: &str) -> Result<&str, PluginError> {
        self.namespace
            .as_deref()
            .ok_or_else(|| PluginError::Invalid {
                field: "--all-namespaces".into(),
                reason: format!("{what} names one object; pass -n NAMESPACE instead"),
            })
    }

    /// Every object of a kind in the scope, by namespace and name.
    async fn list<K: Namespaced>(&self, what: &str) -> Result<Vec<K>, PluginError> {
        let mut l = self
            .api::<K>()
            .list(&ListParams::default())
            .await
            .map_err(PluginError::kube(format!("listing {what}")))?
            .items;
        l.sort_by_key(|o| (o.namespace(), o.name_any()));
        Ok(l)
    }

    pub async fn clusters(&self) -> Result<Vec<GlusterCluster>, PluginError> {
        self.list("GlusterClusters").await
    }

    pub async fn volumes(&self) -> Result<Vec<GlusterVolume>, PluginError> {
        self.list("GlusterVolumes").await
    }

    /// One namespaced object, or None when it does not exist.
    async fn get<K: Namespaced>(
        &self,
        kind: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<K>, PluginError> {
        Api::<K>::namespaced(self.client.clone(), ns)
            .get_opt(name)
            .await
            .map_err(PluginError::kube(format!("reading {kind} {ns}/{name}")))
    }

    pub async fn volume(&self, name: &str) -> Result<GlusterVolume, PluginError> {
        let ns = self.one_namespace("VOLUME")?;
        self.get("GlusterVolume", ns, name).await?.ok_or_else(|| {
            PluginError::NotFound(format!(
                "GlusterVolume {ns}/{name} does not exist; `kubectl gluster status -n {ns}` \
                 lists the volumes"
            ))
        })
    }

    pub async fn cluster(&self, ns: &str, name: &str) -> Result<GlusterCluster, PluginError> {
        self.get("GlusterCluster", ns, name).await?.ok_or_else(|| {
            PluginError::NotFound(format!("GlusterCluster {ns}/{name} does not exist"))
        })
    }

    /// The cluster named by `--cluster`, or the only one in the namespace.
    pub async fn pick_cluster(&self, name: Option<&str>) -> Result<GlusterCluster, PluginError> {
        let ns = self.one_namespace("--cluster")?;
        if let Some(name) = name {
            return self.cluster(ns, name).await;
        }
        let mut all = self.clusters().await?;
        match all.len() {
            1 => Ok(all.remove(0)),
            0 => Err(PluginError::NotFound(format!(
                "no GlusterCluster in namespace {ns}"
            ))),
            _ => Err(PluginError::Invalid {
                field: "--cluster".into(),
                reason: format!(
                    "namespace {ns} has {} GlusterClusters ({}); name one",
                    all.len(),
                    all.iter()
                        .map(|c| c.name_any())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    /// The cluster's brick pods, by node, in spec order; nodes without a pod are left out.
    pub async fn brick_pods(&self, gc: &GlusterCluster) -> Result<Vec<(String, Pod)>, PluginError> {
        let ns = gc.namespace().unwrap_or_default();
        let pods = Api::<Pod>::namespaced(self.client.clone(), &ns)
            .list(&ListParams::default().labels(&format!(
                "{}={}",
                names::LABEL_CLUSTER,
                gc.name_any()
            )))
            .await
            .map_err(PluginError::kube(format!("listing the brick pods in {ns}")))?
            .items;
        Ok(gc
            .spec
            .nodes
            .iter()
            .filter_map(|n| {
                pods.iter()
                    .find(|p| p.annotations().get(names::ANNOTATION_NODE) == Some(&n.name))
                    .map(|p| (n.name.clone(), p.clone()))
            })
            .collect())
    }

    /// The end of a pod's container log, from the apiserver.
    pub async fn pod_log(&self, pod: &Pod, lines: i64) -> Result<String, PluginError> {
        let ns = pod.namespace().unwrap_or_default();
        Api::<Pod>::namespaced(self.client.clone(), &ns)
            .logs(
                &pod.name_any(),
                &LogParams {
                    tail_lines: Some(lines),
                    ..LogParams::default()
                },
            )
            .await
            .map_err(PluginError::kube(format!(
                "reading the log of pod {ns}/{}",
                pod.name_any()
            )))
    }

    /// Every PV of the glusterkube CSI driver.
    pub async fn driver_pvs(&self) -> Result<Vec<PersistentVolume>, PluginError> {
        let l = Api::<PersistentVolume>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(PluginError::kube("listing PersistentVolumes"))?
            .items;
        Ok(l.into_iter()
            .filter(|pv| {
                pv.spec
                    .as_ref()
                    .and_then(|s| s.csi.as_ref())
                    .is_some_and(|c| c.driver == gk_api::volume_id::DRIVER_NAME)
            })
            .collect())
    }
}
