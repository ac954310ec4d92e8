//! The GlusterFS CSI driver: subdirectory volumes with a quota on a pool GlusterVolume, or a
//! dedicated GlusterVolume per PV, FUSE-mounted by the node plugin.
//!
//! - `identity`, `controller/` and `node/` are the three CSI services, one file per RPC or
//!   stage; `main` registers the ones its mode needs (see `server`).
//! - `request` validates what requests carry; `params` parses StorageClass parameters and
//!   volume IDs; `locks` serialises operations per volume; `metrics` counts every RPC.
//! - `backend` is how the controller reaches pools (`kube_pools` in production, through
//!   the API and the brick agents); `state` is what the node plugin records on disk.

pub mod backend;
pub mod controller;
pub mod external;
pub mod identity;
pub mod kube_pools;
pub mod locks;
pub mod metrics;
pub mod mount_client;
pub use gk_mount as mount;
pub mod node;
pub mod params;
pub mod request;
pub mod server;
pub mod sidecars;
pub mod state;

/// The CSI driver name (the CSIDriver object, StorageClasses' provisioner).
pub use gk_api::volume_id::DRIVER_NAME;
/// The topology key the node plugin reports (its node name).
pub const TOPOLOGY_KEY: &str = "topology.gluster.glusterkube.dev/node";
