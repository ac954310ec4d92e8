//! A volume taken over rather than created (`spec.existingVolume`): it must exist, be managed
//! by no other GlusterVolume, and agree with the spec (`plan::adopt`), or nothing acts on it.

use gk_agent_proto::v1::Volume;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use kube::api::Api;
use kube::ResourceExt;

use crate::context::Context;
use crate::plan::SpecError;
use crate::Error;

fn refused(field: &str, reason: String) -> SpecError {
    SpecError {
        field: field.into(),
        reason,
    }
}

/// Why the adopted volume `existing` (None: gluster has no such volume) cannot be managed
/// as `gv` says on `gc`; Ok when it can. `node_addresses` are the cluster's nodes in the
/// pool.
pub async fn check(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    existing: Option<&Volume>,
    node_addresses: &[String],
) -> Result<(), Error> {
    let name = gv.gluster_name();
    let Some(vol) = existing else {
        return Err(refused(
            "spec.existingVolume",
            format!(
                "gluster volume {name} does not exist in cluster {}'s pool; an adopted volume \
                 is never created (create it by hand, or remove existingVolume to let the \
                 operator create one)",
                gv.spec.cluster
            ),
        )
        .into());
    };
    // Two GlusterVolumes on one gluster volume would fight over it.
    let api: Api<GlusterVolume> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    let others = api.list(&Default::default()).await?;
    if let Some(other) = others
        .items
        .iter()
        .find(|o| o.uid() != gv.uid() && o.gluster_name() == name)
    {
        return Err(refused(
            "spec.existingVolume",
            format!(
                "gluster volume {name} is managed by GlusterVolume {} already",
                other.name_any()
            ),
        )
        .into());
    }
    let adopted_id = gv.status.as_ref().and_then(|s| s.volume_id.as_deref());
    crate::plan::adopt::check(
        &gv.spec,
        vol,
        node_addresses,
        adopted_id,
        gc.spec.tls.enabled,
    )?;
    Ok(())
}
