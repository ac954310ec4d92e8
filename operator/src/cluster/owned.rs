//! What a GlusterCluster owns and hosts, listed once per reconcile.

use gk_api::crd::{GlusterCluster, GlusterVolume};
use gk_api::names::LABEL_CLUSTER;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use kube::ResourceExt;

use crate::context::Context;
use crate::Error;

/// The GlusterVolumes in the cluster's namespace that live on it.
pub async fn volumes_on(ctx: &Context, gc: &GlusterCluster) -> Result<Vec<GlusterVolume>, Error> {
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gc.namespace().unwrap_or_default());
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|v| v.spec.cluster == gc.name_any())
        .collect())
}

/// The cluster's StatefulSets and brick pods, listed once per reconcile.
pub struct Owned {
    pub sets: Vec<StatefulSet>,
    pub pods: Vec<Pod>,
}

impl Owned {
    pub async fn list(ctx: &Context, gc: &GlusterCluster) -> Result<Self, Error> {
        let ns = gc.namespace().unwrap_or_default();
        let by_cluster =
            ListParams::default().labels(&format!("{LABEL_CLUSTER}={}", gc.name_any()));
        Ok(Self {
            sets: Api::<StatefulSet>::namespaced(ctx.client.clone(), &ns)
                .list(&by_cluster)
                .await?
                .items,
            pods: Api::<Pod>::namespaced(ctx.client.clone(), &ns)
                .list(&by_cluster)
                .await?
                .items,
        })
    }
}
