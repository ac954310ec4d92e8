//! The gluster command layer: every operation the seed documents did by hand, as a typed call.
//!
//! Gluster stays the source of truth. This crate keeps no state of its own: each call runs
//! `gluster --mode=script --xml`, checks gluster's verdict and parses its answer.

mod cli;
mod error;
mod heal;
mod layout;
mod logs;
mod ops;
mod options;
mod profile;
mod quota;
mod rebalance;
mod status;
mod xml;

pub use cli::{
    is_busy, mentions_lock_contention, CommandOutput, CommandRunner, Gluster, ProcessRunner,
};
pub use error::GlusterError;
pub use heal::{
    all_healed, nothing_to_heal, parse_heal_count, parse_heal_entries, parse_heal_info_summary,
    BrickHeal, BrickHealCount, BrickHealEntries, HealEntry,
};
pub use layout::{validate_volume_name, Brick, VolumeLayout};
pub use logs::{cap_logs_forever, rotate_logs, LogDir};
pub use options::{
    parse_bool, parse_volume_get, validate_option_key, validate_option_value, OptionValue,
};
pub use profile::{parse_profile_info, BrickProfile, FopStat};
pub use quota::{parse_quota_list, validate_quota_path, QuotaEntry};
pub use rebalance::{
    parse_rebalance_status, parse_remove_brick_status, RebalanceNode, RebalanceProgress,
    RebalanceStatus,
};
pub use status::{parse_volume_status, BrickStatus, DaemonStatus, VolumeStatus};
pub use xml::{parse_peer_status, parse_volume_info, parse_volume_list, Peer, Volume, VolumeBrick};
