//! Deletion of a GlusterVolume: refused while PersistentVolumes use it; otherwise the gluster
//! volume is stopped and deleted, and its brick directories removed only under
//! deletionPolicy Delete. An adopted volume (`spec.existingVolume`) is only released: the
//! operator stops managing it and leaves it running with its data.

use gk_agent_proto::v1::{BrickReleaseRequest, VolumeRequest, VolumeStopRequest};
use gk_api::agents::cache::Asked;
use gk_api::crd::{DeletionPolicy, GlusterVolume};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::lookup::{cluster_of, info};
use super::record::set_status;
use super::{status, users};
use crate::context::Context;
use crate::{Error, Waiting};

pub async fn run(gv: &GlusterVolume, ctx: &Context) -> Result<Action, Error> {
    let name = gv.gluster_name();
    let pvs: Api<PersistentVolume> = Api::all(ctx.client.clone());
    let holding: Vec<String> = pvs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|pv| users::uses(pv, &ctx.config.csi_driver, &name))
        .map(|pv| pv.name_any())
        .collect();
    if !holding.is_empty() {
        let (msg, d) = status::deletion_blocked(&holding);
        set_status(ctx, gv, gv.status.clone().unwrap_or_default(), &d).await?;
        return Err(Error::DeletionBlocked(msg));
    }
    if gv.spec.existing_volume.is_some() {
        tracing::info!(volume = %name, "released an adopted volume: it keeps running, with its data");
        ctx.heals.forget(&name);
        return Ok(Action::await_change());
    }
    let Some(gc) = cluster_of(ctx, gv).await? else {
        tracing::warn!(volume = %name, "cluster is gone; nothing left to delete in gluster");
        return Ok(Action::await_change());
    };
    // Read-only: certificates are issued by the cluster reconcile alone.
    let (mut agents, _down) = ctx
        .agents
        .discover(&ctx.client, &gc, None, Asked::Recently)
        .await?;
    let Some(anchor) = agents.first_mut() else {
        // A volume is created only through an answering agent, which also puts the node in
        // the cluster's status: with neither recorded, nothing of this volume is in gluster.
        let pool_never_formed = gc.status.as_ref().is_none_or(|s| s.peers.is_empty());
        let never_created = gv.status.as_ref().is_none_or(|s| s.volume_id.is_none());
        if pool_never_formed && never_created {
            tracing::info!(volume = %name, "never created in gluster; nothing to delete");
            return Ok(Action::await_change());
        }
        return Err(Waiting::NoAgentToDelete {
            cluster: gc.name_any(),
            volume: name.to_string(),
        }
        .into());
    };
    let Some(vol) = info(anchor, &name).await? else {
        return Ok(Action::await_change());
    };
    if vol.status == "Started" {
        anchor
            .client
            .volume_stop(VolumeStopRequest {
                name: name.clone(),
                force: true,
            })
            .await
            .map_err(|s| Error::agent(&anchor.node, s))?;
    }
    anchor
        .client
        .volume_delete(VolumeRequest { name: name.clone() })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?;
    tracing::info!(volume = %name, "deleted gluster volume");
    ctx.heals.forget(&name);
    if gv.spec.deletion_policy == DeletionPolicy::Delete {
        let retired = gv
            .status
            .as_ref()
            .map(|s| s.retired_bricks.clone())
            .unwrap_or_default();
        for b in vol.bricks.iter().chain(&retired) {
            let Some((host, path)) = b.split_once(':') else {
                continue;
            };
            if let Some(a) = agents.iter_mut().find(|a| a.address == host) {
                a.client
                    .brick_release(BrickReleaseRequest {
                        path: path.to_string(),
                        only_if_empty: false,
                    })
                    .await
                    .map_err(|s| Error::agent(&a.node, s))?;
            }
        }
    }
    Ok(Action::await_change())
}
