use gk_api::agents::AgentsError;

use crate::plan::SpecError;

/// Why a reconcile did not finish. Spec errors wait for the user; the rest are retried.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid spec: {0}")]
    Spec(#[from] SpecError),
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("brick agent {node}: {code:?}: {message}")]
    Agent {
        node: String,
        code: tonic::Code,
        message: String,
    },
    #[error("agent PKI: {0}")]
    Pki(#[from] crate::pki::PkiError),
    #[error("{0}")]
    Agents(#[from] AgentsError),
    #[error("waiting: {0}")]
    NotReady(#[from] Waiting),
    #[error("deletion blocked: {0}")]
    DeletionBlocked(String),
    #[error("finalizer: {0}")]
    Finalizer(String),
    #[error(
        "reading Node {node} for its zone label: {source}; the operator needs get on nodes \
         (the chart's operator ClusterRole grants it)"
    )]
    Zone { node: String, source: kube::Error },
}

/// What a reconcile waits for; it is retried soon. Each says what it waits for and, where
/// the wait is the user's to end, what to check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Waiting {
    #[error("GlusterCluster {cluster} does not exist in namespace {namespace}")]
    ClusterNotFound { cluster: String, namespace: String },
    #[error("no brick agent of cluster {cluster} answers yet")]
    NoAgent { cluster: String },
    #[error("no brick agent of cluster {cluster} answers; cannot delete {volume}")]
    NoAgentToDelete { cluster: String, volume: String },
    #[error("no other brick agent answers")]
    NoOtherAgent,
    #[error("waiting for every storage node to place bricks: {down}")]
    NodesDown { down: String },
    #[error("volume {volume} vanished")]
    VolumeVanished { volume: String },
    #[error(
        "gluster refused the access option {key}={value}: {reason}; until it is set the \
         volume may be mountable by clients it should refuse. Check the GlusterCluster's tls \
         and clientNetworks"
    )]
    AccessRefused {
        key: String,
        value: String,
        reason: String,
    },
    #[error(
        "gluster refused {key}=off on volume {volume} ({reason}); no files are moved until \
         lookups search every set"
    )]
    LookupsNotWide {
        key: String,
        volume: String,
        reason: String,
    },
}

impl Error {
    pub fn agent(node: &str, status: tonic::Status) -> Self {
        Self::Agent {
            node: node.to_string(),
            code: status.code(),
            message: status.message().to_string(),
        }
    }

    /// A short label for the error metric.
    pub fn label(&self) -> &'static str {
        match self {
            Error::Spec(_) => "spec",
            Error::Kube(_) | Error::Agents(AgentsError::Kube(_)) | Error::Zone { .. } => "kube",
            Error::Agent { .. } => "agent",
            Error::Pki(_) => "pki",
            Error::Agents(AgentsError::Address { .. }) => "dial",
            Error::NotReady(_) | Error::Agents(AgentsError::Credentials { .. }) => "not_ready",
            Error::DeletionBlocked(_) => "deletion_blocked",
            Error::Finalizer(_) => "finalizer",
        }
    }

    /// Whether this is a wait for something expected to come soon (requeued quickly and
    /// quietly) rather than a failure.
    pub fn is_wait(&self) -> bool {
        matches!(
            self,
            Error::NotReady(_)
                | Error::DeletionBlocked(_)
                | Error::Agents(AgentsError::Credentials { .. })
        )
    }
}
