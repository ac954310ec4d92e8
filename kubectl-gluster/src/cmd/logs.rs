//! `kubectl gluster logs NODE`: the brick pod's own log (glusterd, which the brick image
//! runs with `--log-file=-`, the agent and the entrypoint, from the apiserver) and the end
//! of gluster's log files there (the bricks', the self-heal daemon's, and glusterd's where
//! it writes one, from the agent's LogTail), one after the other as `tail` prints several
//! files.

use gk_agent_proto::v1::{LogKind, LogTailRequest, LogTailResponse};
use kube::ResourceExt;

use crate::cluster::Scope;
use crate::{agent, PluginError};

/// Which logs to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    All,
    /// The brick pod's container log: glusterd, the agent and the entrypoint.
    Pod,
    Bricks,
    SelfHeal,
    /// The rebalance process's, which also moves data off bricks being removed.
    Rebalance,
}

impl Which {
    fn gluster(self) -> Option<LogKind> {
        match self {
            Which::All => Some(LogKind::All),
            Which::Pod => None,
            Which::Bricks => Some(LogKind::Bricks),
            Which::SelfHeal => Some(LogKind::SelfHeal),
            Which::Rebalance => Some(LogKind::Rebalance),
        }
    }
}

pub fn render(pod: &str, container_log: Option<&str>, gluster: Option<&LogTailResponse>) -> String {
    let mut out = String::new();
    let mut file = |name: String, text: &str, cut: bool| {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "==> {name}{} <==\n",
            if cut { " (end)" } else { "" }
        ));
        out.push_str(text);
        if !text.is_empty() && !text.ends_with('\n') {
            out.push('\n');
        }
    };
    if let Some(log) = container_log {
        file(format!("pod {pod}"), log, false);
    }
    for f in gluster.iter().flat_map(|g| &g.files) {
        file(
            format!("/var/log/glusterfs/{}", f.path),
            &f.text,
            f.truncated,
        );
    }
    out
}

pub async fn run(
    scope: &Scope,
    node: &str,
    cluster: Option<&str>,
    which: Which,
    lines: i64,
    max_bytes: u32,
) -> Result<String, PluginError> {
    let gc = scope.pick_cluster(cluster).await?;
    let pods = scope.brick_pods(&gc).await?;
    let (_, pod) = pods.iter().find(|(n, _)| n == node).ok_or_else(|| {
        PluginError::NotFound(format!(
            "GlusterCluster {} has no brick pod on node {node} (its nodes: {})",
            gc.name_any(),
            gc.spec
                .nodes
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let container = match which {
        Which::All | Which::Pod => Some(scope.pod_log(pod, lines).await?),
        _ => None,
    };
    let gluster = match which.gluster() {
        Some(kind) => {
            let mut a = agent::pick(scope, &gc, Some(node)).await?;
            Some(
                a.client
                    .log_tail(LogTailRequest {
                        kind: kind as i32,
                        max_bytes,
                        volume: String::new(),
                    })
                    .await
                    .map_err(PluginError::agent(&a.node, "LogTail"))?
                    .into_inner(),
            )
        }
        None => None,
    };
    Ok(render(
        &pod.name_any(),
        container.as_deref(),
        gluster.as_ref(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_agent_proto::v1::LogFile;

    #[test]
    fn each_log_under_its_own_header() {
        let g = LogTailResponse {
            files: vec![
                LogFile {
                    path: "glusterd.log".into(),
                    text: "[x] I glusterd\n".into(),
                    truncated: true,
                },
                LogFile {
                    path: "bricks/bricks-v.log".into(),
                    text: "[y] I brick".into(),
                    truncated: false,
                },
            ],
        };
        assert_eq!(
            render("brick-0", Some("agent line\n"), Some(&g)),
            "==> pod brick-0 <==\nagent line\n\n\
             ==> /var/log/glusterfs/glusterd.log (end) <==\n[x] I glusterd\n\n\
             ==> /var/log/glusterfs/bricks/bricks-v.log <==\n[y] I brick\n"
        );
        assert_eq!(render("p", None, None), "");
    }
}
