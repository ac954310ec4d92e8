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
    /// Sizing a PV directory by the brick filesystem's project quota failed.
    #[error("project quota: {0}")]
    Projects(#[from] crate::projects::ProjectError),
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
                // Not a refusal: glusterd could not be reached, or another transaction held
                // the volume's lock past the CLI's retries. The same call may pass shortly.
                GlusterError::Command { message, .. }
                    if message.contains("Connection failed")
                        || message.contains("not connected")
                        || gk_gluster::is_busy(message) =>
                {
                    Code::Unavailable
                }
                GlusterError::Command { .. } => Code::FailedPrecondition,
                _ => Code::Internal,
            },
            AgentError::Mount(MountError::Invalid { .. }) => Code::InvalidArgument,
            AgentError::Mount(_) => Code::Unavailable,
            AgentError::Projects(crate::projects::ProjectError::Unsupported { .. })
            | AgentError::Projects(crate::projects::ProjectError::NotServed(_))
            | AgentError::Projects(crate::projects::ProjectError::Exhausted(_)) => {
                Code::FailedPrecondition
            }
            AgentError::Projects(_) | AgentError::Io { .. } => Code::Internal,
        };
        Status::new(code, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(message: &str) -> AgentError {
        AgentError::Gluster(GlusterError::Command {
            command: "volume add-brick v".into(),
            ret: -1,
            errno: 0,
            message: message.into(),
        })
    }

    #[test]
    fn a_busy_glusterd_is_unavailable_and_a_refusal_a_failed_precondition() {
        let code = |m: &str| Status::from(refusal(m)).code();
        assert_eq!(
            code("Another transaction is in progress for v. Please try again after some time."),
            Code::Unavailable
        );
        assert_eq!(
            code("Locking failed on 10.0.0.2. Please check log file for details."),
            Code::Unavailable
        );
        assert_eq!(
            code("Brick: 10.0.0.2:/b/1 not available. Brick may be containing or be contained by an existing brick."),
            Code::FailedPrecondition
        );
    }
}
