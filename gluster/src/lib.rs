//! The gluster command layer: every operation the seed documents did by hand, as a typed call.
//!
//! Gluster stays the source of truth. This crate keeps no state of its own: each call runs
//! `gluster --mode=script --xml`, checks gluster's verdict and parses its answer.

mod cli;
mod error;
mod layout;
mod xml;

pub use cli::{CommandOutput, CommandRunner, Gluster, ProcessRunner};
pub use error::GlusterError;
pub use layout::{validate_volume_name, Brick, VolumeLayout};
pub use xml::{parse_peer_status, parse_volume_info, Peer, Volume, VolumeBrick};
