//! The glusterkube operator: the GlusterCluster and GlusterVolume controllers.
//!
//! - `run` wires both controllers; `context` is what their reconciles share.
//! - `cluster/` and `volume/` hold one file per stage of each reconcile, and a pure `status`
//!   module each that decides what status says.
//! - `plan/` decides (placement, sizes, rollouts, migrations, profiles) without side effects.
//! - `tls/` holds the certificates and the access options built on them.
//! - `leader` lets one of several replicas reconcile (a Lease).
//! - `apply`, `events`, `finalizer` and `conditions` are the plumbing every reconcile uses;
//!   `safety` is the one check that a volume's data may be disturbed.
//!
//! The CRD types, object names and agent discovery live in `gk-api`, shared with the CSI
//! driver.

pub mod apply;
pub mod cluster;
pub mod conditions;
pub mod context;
mod error;
pub mod events;
pub mod failure;
pub mod finalizer;
pub mod leader;
pub mod metrics;
pub mod plan;
pub mod run;
pub mod safety;
pub mod tls;
pub mod volume;

pub use error::Error;
pub use gk_api::crd;
pub use run::run;
