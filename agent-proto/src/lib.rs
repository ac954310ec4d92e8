//! The brick agent's gRPC API, generated from `proto/glusterkube/agent/v1/agent.proto`: the
//! server the agent implements and the client the operator, the CSI driver, the kubectl
//! plugin and the tests use. A crate of its own, so that a client links the API, not the
//! agent.

/// Generated from proto/glusterkube/agent/v1/agent.proto.
pub mod v1 {
    tonic::include_proto!("glusterkube.agent.v1");
}
