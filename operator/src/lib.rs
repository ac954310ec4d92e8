//! The glusterkube operator: custom resource types and, later, their reconcilers.

pub mod crd;
pub mod pki;
pub mod plan;
