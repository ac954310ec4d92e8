//! The zone of each storage node: the value of the cluster's zone label on its Node. Read
//! on every reconcile (one metadata get per node), so a relabelled node shows in status and
//! in the next placement.

use std::collections::BTreeMap;

use gk_api::crd::GlusterCluster;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;

use crate::context::Context;
use crate::Error;

/// Storage node name to zone, for the nodes whose Node carries the label. A node without a
/// Node object (not joined yet, or removed) has no zone.
pub async fn read(ctx: &Context, gc: &GlusterCluster) -> Result<BTreeMap<String, String>, Error> {
    let api: Api<Node> = Api::all(ctx.client.clone());
    let label = gc.spec.zone_label();
    let mut zones = BTreeMap::new();
    for n in &gc.spec.nodes {
        let meta = api
            .get_metadata_opt(&n.name)
            .await
            .map_err(|source| Error::Zone {
                node: n.name.clone(),
                source,
            })?;
        if let Some(zone) = meta.and_then(|m| m.metadata.labels?.remove(label)) {
            if !zone.is_empty() {
                zones.insert(n.name.clone(), zone);
            }
        }
    }
    Ok(zones)
}
