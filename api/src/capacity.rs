//! How much a gluster volume holds, from its bricks as gluster reports them: per replica or
//! disperse set, the smallest online brick limits, and the set holds its data bricks' worth.
//! The operator reports it in status; the CSI driver bounds volume sizes by it.

use gk_agent_proto::v1::{Volume, VolumeStatusResponse};
use gk_gluster::VolumeLayout;

use crate::units::round_mib;

/// The layout of a volume as gluster reports it.
pub fn layout_of(v: &Volume) -> VolumeLayout {
    VolumeLayout::from_counts(
        v.replica_count,
        v.arbiter_count,
        v.disperse_count,
        v.redundancy_count,
    )
}

/// (total, free) bytes of `vol`, at MiB grain (so status follows real usage without being
/// rewritten for every few bytes).
pub fn of_volume(vol: &Volume, st: &VolumeStatusResponse) -> (u64, u64) {
    let layout = layout_of(vol);
    let set = (layout.set_size() as usize).max(1);
    let data = u64::from(layout.data_bricks());
    let (mut total, mut free) = (0u64, 0u64);
    for chunk in vol.bricks.chunks(set) {
        let sizes: Vec<(u64, u64)> = chunk
            .iter()
            .filter_map(|b| st.bricks.iter().find(|s| &s.brick == b && s.online))
            .map(|s| (s.size_total_bytes, s.size_free_bytes))
            .collect();
        total += round_mib(sizes.iter().map(|s| s.0).min().unwrap_or(0)) * data;
        free += round_mib(sizes.iter().map(|s| s.1).min().unwrap_or(0)) * data;
    }
    (total, free)
}
