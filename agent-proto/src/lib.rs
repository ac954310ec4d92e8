//! The brick agent's gRPC API, generated from `proto/glusterkube/agent/v1/agent.proto`: the
//! server the agent implements and the client the operator, the CSI driver, the kubectl
//! plugin and the tests use. A crate of its own, so that a client links the API, not the
//! agent.

/// Generated from proto/glusterkube/agent/v1/agent.proto.
pub mod v1 {
    tonic::include_proto!("glusterkube.agent.v1");
}

/// How a volume's subdirectory PVs are sized: a gluster volume option the operator sets
/// once, when it makes the volume (or on an empty pool), and the agents read.
pub mod pv_quota {
    /// The option. Absent means gluster's quota, as on every volume made before it.
    pub const OPTION: &str = "user.glusterkube.pv-quota";
    /// Each brick filesystem's project quota on the PV's directory.
    pub const PROJECT: &str = "project";
    /// Gluster's quota translator (`gluster volume quota ... limit-usage`).
    pub const GLUSTER: &str = "gluster";
}
