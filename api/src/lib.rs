//! What the glusterkube operator and CSI driver share: the `glusterkube.dev` custom
//! resources, the names the operator gives what it makes, sizes, and finding and reaching
//! the brick agents.

pub mod agents;
pub mod capacity;
pub mod crd;
pub mod names;
pub mod units;
