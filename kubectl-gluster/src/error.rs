use tonic::Status;

/// Why a subcommand could not answer, with what to check.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Agents(#[from] gk_api::agents::AgentsError),
    #[error("{0}")]
    NotFound(String),
    #[error("port-forward to pod {pod} port {port}: {reason}; you need create on pods/portforward in its namespace")]
    PortForward {
        pod: String,
        port: u16,
        reason: String,
    },
    #[error("the brick agent of node {node} answered {call} with {}: {}", .status.code(), .status.message())]
    Agent {
        node: String,
        call: &'static str,
        status: Status,
    },
    #[error("no brick agent of GlusterCluster {cluster} answers: {why}")]
    NoAgent { cluster: String, why: String },
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
}

impl PluginError {
    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Kube { what, source }
    }

    pub fn agent(node: &str, call: &'static str) -> impl FnOnce(Status) -> Self {
        let node = node.to_string();
        move |status| Self::Agent { node, call, status }
    }
}
