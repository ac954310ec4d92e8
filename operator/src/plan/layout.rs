//! The gluster layout a spec asks for, and the one an existing volume has.

use gk_gluster::VolumeLayout;

use super::error::{spec_error, SpecError};
use crate::crd::{GlusterVolumeSpec, VolumeType};

pub fn layout(spec: &GlusterVolumeSpec) -> Result<VolumeLayout, SpecError> {
    let layout = match spec.volume_type {
        VolumeType::Distribute => VolumeLayout::Distribute,
        VolumeType::Arbiter => VolumeLayout::Arbiter,
        VolumeType::Replicate => VolumeLayout::Replicate {
            replica: spec
                .replica
                .ok_or_else(|| spec_error("spec.replica", "is required for type Replicate"))?,
        },
        VolumeType::Disperse => {
            let d = spec
                .disperse
                .ok_or_else(|| spec_error("spec.disperse", "is required for type Disperse"))?;
            VolumeLayout::Disperse {
                data: d.data,
                redundancy: d.redundancy,
            }
        }
    };
    layout
        .validate()
        .map_err(|e| spec_error("spec", e.to_string()))?;
    Ok(layout)
}

pub use gk_api::capacity::layout_of;
