//! What the glusterkube operator and CSI driver share: the `glusterkube.dev` custom
//! resources, the names the operator gives what it makes, sizes, and finding and reaching
//! the brick agents, how /metrics is encoded, and the CSI driver's volume IDs.

pub mod agents;
pub mod capacity;
pub mod crd;
pub mod metrics;
pub mod names;
pub mod units;
pub mod volume_id;
