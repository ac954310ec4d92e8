//! The glusterkube operator: custom resource types and their reconcilers.

pub mod agents;
pub mod cluster;
pub mod conditions;
pub mod controller;
pub mod crd;
mod error;
pub mod gluster_tls;
pub mod metrics;
pub mod pki;
pub mod plan;
pub mod resize;
pub mod security;
pub mod volume;

pub use error::Error;
