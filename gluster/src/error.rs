use std::time::Duration;

/// What went wrong talking to gluster. Gluster's own message is kept word for word.
#[derive(Debug, thiserror::Error)]
pub enum GlusterError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },

    #[error("could not run {program}: {source}; is glusterfs-server installed?")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },

    #[error("`gluster {command}` did not answer within {timeout:?}; check that glusterd is running and reachable")]
    Timeout { command: String, timeout: Duration },

    /// Gluster ran and refused. `message` is gluster's text, unchanged.
    #[error("`gluster {command}` failed (ret {ret}, errno {errno}): {message}")]
    Command {
        command: String,
        ret: i32,
        errno: i32,
        message: String,
    },

    #[error("could not parse gluster's answer to `{command}`: {reason}")]
    Parse { command: String, reason: String },
}

impl GlusterError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }
}
