//! Certificates and who may connect.
//!
//! - `pki`: a CA and the certificates it issues (rcgen), and when to renew them.
//! - `agent`: each GlusterCluster's agent CA, the agents' serving certificate and the
//!   operator's client certificate for the agents' gRPC API.
//! - `gluster`: gluster's own TLS: one CA per operator, a certificate per cluster and one for
//!   the CSI node plugins.
//! - `access`: the volume options that admit only those certificates (or, without TLS, only
//!   the cluster's client networks).

pub mod access;
pub mod agent;
pub mod gluster;
