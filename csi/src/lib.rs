//! The GlusterFS CSI driver: subdirectory volumes with a quota on a pool GlusterVolume,
//! FUSE-mounted by the node plugin.

pub mod backend;
pub mod driver;
pub use gk_mount as mount;
pub mod kube_pools;
pub mod params;
pub mod server;
pub mod sidecars;
pub mod state;
