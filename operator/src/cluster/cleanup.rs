//! Deletion of a GlusterCluster: held while any GlusterVolume lives on it, since tearing down
//! the brick pods would strand their data and leave the volumes without agents to delete
//! them. Once none is left, the owned StatefulSets, Service, PDB and Secrets go by garbage
//! collection; node-local storage is left as it is.

use gk_api::crd::GlusterCluster;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use crate::context::Context;
use crate::{apply, Error};

pub async fn run(gc: &GlusterCluster, ctx: &Context) -> Result<Action, Error> {
    let users: Vec<String> = super::owned::volumes_on(ctx, gc)
        .await?
        .iter()
        .map(|v| v.name_any())
        .collect();
    if users.is_empty() {
        return Ok(Action::await_change());
    }
    let (msg, desired) = super::status::deletion_blocked(&users);
    let old = gc.status.clone().unwrap_or_default();
    apply::status_if_changed(ctx, gc, &old, old.clone(), &desired).await?;
    Err(Error::DeletionBlocked(msg))
}
