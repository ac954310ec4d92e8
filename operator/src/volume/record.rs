//! Recording a GlusterVolume's status.

use gk_api::crd::{GlusterVolume, GlusterVolumeStatus};

use crate::conditions::Desired;
use crate::context::Context;
use crate::{apply, Error};

/// Writes `status` with `desired` conditions (only when it changed), with events for the
/// conditions that changed.
pub async fn set_status(
    ctx: &Context,
    gv: &GlusterVolume,
    mut status: GlusterVolumeStatus,
    desired: &[Desired],
) -> Result<(), Error> {
    let old = gv.status.clone().unwrap_or_default();
    status.observed_generation = gv.metadata.generation;
    apply::status_if_changed(ctx, gv, &old, status, desired).await
}
