use gk_gluster::GlusterError;
use gk_mount::MountError;
use tonic::{Code, Status};

/// Why an agent call failed. Each variant picks the gRPC code the caller acts on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("{0} does not exist")]
    NotFound(String),
    /// What exists conflicts with what was asked for.
    #[error("{0}")]
    Conflict(String),
    /// A precondition of the call does not hold (for example, a brick still in use).
    #[error("{0}")]
    Precondition(String),
    /// Not served by this agent (one started for a pool made by hand serves only some
    /// volumes and RPCs).
    #[error("{0}")]
    Denied(String),
    #[error(transparent)]
    Gluster(#[from] GlusterError),
    #[error(transparent)]
    Mount(#[from] MountError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
}

impl AgentError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

impl From<AgentError> for Status {
    fn from(e: AgentError) -> Self {
        let code = match &e {
            AgentError::Invalid { .. } => Code::InvalidArgument,
            AgentError::NotFound(_) => Code::NotFound,
            AgentError::Conflict(_) => Code::AlreadyExists,
            AgentError::Precondition(_) => Code::FailedPrecondition,
            AgentError::Denied(_) => Code::PermissionDenied,
            AgentError::Gluster(g) => match g {
                GlusterError::Invalid { .. } => Code::InvalidArgument,
                GlusterError::Timeout { .. } | GlusterError::Spawn { .. } => Code::Unavailable,
                GlusterError::Command { message, .. }
                    if message.contains("Connection failed")
                        || message.contains("not connected") =>
                {
                    Code::Unavailable
                }
                GlusterError::Command { .. } => Code::FailedPrecondition,
                _ => Code::Internal,
            },
            AgentError::Mount(MountError::Invalid { .. }) => Code::InvalidArgument,
            AgentError::Mount(_) => Code::Unavailable,
            AgentError::Io { .. } => Code::Internal,
        };
        Status::new(code, e.to_string())
    }
}
