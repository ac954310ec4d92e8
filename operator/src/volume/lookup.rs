//! Reading what a GlusterVolume stands on: its GlusterCluster, and its volume in gluster.

use std::collections::BTreeMap;

use gk_agent_proto::v1::VolumeRequest;
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use kube::api::Api;
use kube::ResourceExt;
use tonic::Code;

use crate::context::Context;
use crate::Error;

pub async fn cluster_of(
    ctx: &Context,
    gv: &GlusterVolume,
) -> Result<Option<GlusterCluster>, Error> {
    let api: Api<GlusterCluster> =
        Api::namespaced(ctx.client.clone(), &gv.namespace().unwrap_or_default());
    Ok(api.get_opt(&gv.spec.cluster).await?)
}

/// The zone of each storage node that has one, as the cluster's status last recorded it.
pub fn zones_of(gc: &GlusterCluster) -> BTreeMap<String, String> {
    gc.status
        .iter()
        .flat_map(|s| &s.peers)
        .filter_map(|p| Some((p.node.clone(), p.zone.clone()?)))
        .collect()
}

/// The volume as gluster knows it, or None.
pub async fn info(
    agent: &mut NodeAgent,
    name: &str,
) -> Result<Option<gk_agent_proto::v1::Volume>, Error> {
    match agent
        .client
        .volume_info(VolumeRequest { name: name.into() })
        .await
    {
        Ok(r) => Ok(r.into_inner().volume),
        Err(s) if s.code() == Code::NotFound => Ok(None),
        Err(s) => Err(Error::agent(&agent.node, s)),
    }
}
