//! `kubectl gluster status`: clusters and volumes at a glance, from their status alone.

use gk_api::crd::{GlusterCluster, GlusterVolume};
use kube::ResourceExt;

use super::or_dash;
use gk_api::crd::Capacity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::cluster::Scope;
use crate::table;
use crate::PluginError;

/// A condition's status (`-` when absent), and its reason and message when the status is
/// not `healthy`, the one that needs no words.
fn said(conditions: &[Condition], kind: &str, healthy: &str) -> (String, String) {
    match conditions.iter().find(|c| c.type_ == kind) {
        None => ("-".into(), String::new()),
        Some(c) if c.status == healthy => (c.status.clone(), String::new()),
        Some(c) => (c.status.clone(), format!("{}: {}", c.reason, c.message)),
    }
}

fn used(capacity: Option<&Capacity>) -> String {
    capacity.map_or_else(|| "-".into(), |c| table::usage(c.used_bytes, c.total_bytes))
}

pub fn render(clusters: &[GlusterCluster], volumes: &[GlusterVolume]) -> String {
    let rows: Vec<Vec<String>> = clusters
        .iter()
        .map(|c| {
            let s = c.status.clone().unwrap_or_default();
            let (ready, why) = said(&s.conditions, "Ready", "True");
            vec![
                c.namespace().unwrap_or_default(),
                c.name_any(),
                or_dash(s.nodes_summary),
                or_dash(s.bricks_summary),
                used(s.capacity.as_ref()),
                ready,
                why,
            ]
        })
        .collect();
    let mut out = table::render(
        &[
            "NAMESPACE",
            "CLUSTER",
            "NODES",
            "BRICKS",
            "CAPACITY",
            "READY",
            "MESSAGE",
        ],
        &rows,
    );
    let rows: Vec<Vec<String>> = volumes
        .iter()
        .map(|v| {
            let s = v.status.clone().unwrap_or_default();
            let (ready, not_ready) = said(&s.conditions, "Ready", "True");
            let (degraded, why) = said(&s.conditions, "Degraded", "False");
            vec![
                v.namespace().unwrap_or_default(),
                v.name_any(),
                v.spec.cluster.clone(),
                format!("{:?}", v.spec.volume_type).to_lowercase(),
                or_dash(s.bricks_summary),
                or_dash(s.heal_pending),
                or_dash(s.split_brain),
                used(s.capacity.as_ref()),
                ready,
                degraded,
                if why.is_empty() { not_ready } else { why },
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&table::render(
        &[
            "NAMESPACE",
            "VOLUME",
            "CLUSTER",
            "TYPE",
            "BRICKS",
            "HEAL",
            "SPLIT-BRAIN",
            "USED",
            "READY",
            "DEGRADED",
            "MESSAGE",
        ],
        &rows,
    ));
    out
}

pub async fn run(scope: &Scope) -> Result<String, PluginError> {
    let clusters = scope.clusters().await?;
    let volumes = scope.volumes().await?;
    if clusters.is_empty() && volumes.is_empty() {
        let where_ = scope
            .namespace
            .as_deref()
            .map(|n| format!("namespace {n}"))
            .unwrap_or_else(|| "any namespace".into());
        return Err(PluginError::NotFound(format!(
            "no GlusterCluster or GlusterVolume in {where_}"
        )));
    }
    Ok(render(&clusters, &volumes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::tests::{cluster, volume};

    #[test]
    fn healthy_and_degraded_side_by_side() {
        let out = render(
            &[cluster("c1")],
            &[
                volume("pool", "3/3", 0, true, None),
                volume(
                    "logs",
                    "2/3",
                    4,
                    true,
                    Some(("BricksUnreachable", "2 of 3 bricks reachable")),
                ),
            ],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE   CLUSTER   NODES"), "{out}");
        assert!(
            lines[1].contains("c1") && lines[1].contains("3/3") && lines[1].contains("True"),
            "{out}"
        );
        let pool = lines.iter().find(|l| l.contains(" pool ")).unwrap();
        assert!(
            pool.contains("replicate")
                && pool.contains("3/3")
                && pool.contains("512.0Mi/1.0Gi (50%)"),
            "{pool}"
        );
        assert!(
            pool.trim_end().ends_with("False"),
            "a healthy volume needs no message: {pool}"
        );
        let logs = lines.iter().find(|l| l.contains(" logs ")).unwrap();
        let cells: Vec<&str> = logs.split_whitespace().collect();
        assert_eq!(cells[4], "2/3", "{logs}");
        assert_eq!(
            cells[9..12],
            ["True", "True", "BricksUnreachable:"],
            "{logs}"
        );
        assert!(
            logs.ends_with("BricksUnreachable: 2 of 3 bricks reachable"),
            "{logs}"
        );
    }
}
