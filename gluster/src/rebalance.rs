//! Data migration progress: `volume rebalance NAME status` and
//! `volume remove-brick NAME BRICK... status`, which gluster reports in the same shape.

use std::time::Duration;

use serde::Deserialize;

use crate::xml::{number, parse};
use crate::GlusterError;

/// Progress of a rebalance or of a remove-brick migration.
#[derive(Debug, Clone, PartialEq)]
pub struct RebalanceStatus {
    pub task_id: Option<String>,
    /// One entry per peer taking part; gluster names the answering peer `localhost`.
    pub nodes: Vec<RebalanceNode>,
    /// Gluster's sum over all peers, with the overall status.
    pub aggregate: RebalanceProgress,
}

impl RebalanceStatus {
    /// Gluster's overall status is `completed` (not `fix-layout completed`).
    pub fn is_completed(&self) -> bool {
        self.aggregate.status == "completed"
    }

    /// The overall status or any peer's status says `failed`.
    pub fn has_failed(&self) -> bool {
        std::iter::once(&self.aggregate)
            .chain(self.nodes.iter().map(|n| &n.progress))
            .any(|p| p.status.contains("failed"))
    }
}

/// One peer's share of the migration.
#[derive(Debug, Clone, PartialEq)]
pub struct RebalanceNode {
    pub host: String,
    pub peer_id: String,
    pub progress: RebalanceProgress,
}

/// Counters of a migration, per peer or summed.
#[derive(Debug, Clone, PartialEq)]
pub struct RebalanceProgress {
    /// Files moved.
    pub files: u64,
    /// Bytes moved.
    pub size_bytes: u64,
    /// Files looked at.
    pub lookups: u64,
    pub failures: u64,
    pub skipped: u64,
    /// Gluster's words: `not started`, `in progress`, `completed`, `stopped`, `failed`, or the
    /// same with `fix-layout` in front.
    pub status: String,
    pub run_time: Duration,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Body {
    vol_rebalance: Option<TaskXml>,
    vol_remove_brick: Option<TaskXml>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskXml {
    #[serde(rename = "task-id")]
    task_id: Option<String>,
    #[serde(default)]
    node: Vec<ProgressXml>,
    aggregate: Option<ProgressXml>,
}

/// A `<node>` or the `<aggregate>`; only nodes have a name and id. (`serde(flatten)` does
/// not work with quick-xml, so both share this one shape.)
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProgressXml {
    node_name: Option<String>,
    #[serde(default)]
    id: String,
    files: String,
    size: String,
    lookups: String,
    failures: String,
    skipped: String,
    status_str: String,
    runtime: String,
}

impl ProgressXml {
    fn read(self, command: &str) -> Result<RebalanceProgress, GlusterError> {
        let secs: f64 = number(command, "runtime", &self.runtime)?;
        let run_time = Duration::try_from_secs_f64(secs).map_err(|e| GlusterError::Parse {
            command: command.to_string(),
            reason: format!("runtime {:?}: {e}", self.runtime),
        })?;
        Ok(RebalanceProgress {
            files: number(command, "files", &self.files)?,
            size_bytes: number(command, "size", &self.size)?,
            lookups: number(command, "lookups", &self.lookups)?,
            failures: number(command, "failures", &self.failures)?,
            skipped: number(command, "skipped", &self.skipped)?,
            status: self.status_str.trim().to_string(),
            run_time,
        })
    }
}

fn parse_task(
    command: &str,
    xml: &str,
    remove_brick: bool,
) -> Result<RebalanceStatus, GlusterError> {
    let body: Body = parse(command, xml)?;
    let task = if remove_brick {
        body.vol_remove_brick
    } else {
        body.vol_rebalance
    }
    .ok_or_else(|| GlusterError::Parse {
        command: command.to_string(),
        reason: "the answer has no status".into(),
    })?;
    let aggregate = task.aggregate.ok_or_else(|| GlusterError::Parse {
        command: command.to_string(),
        reason: "the answer has no aggregate".into(),
    })?;
    Ok(RebalanceStatus {
        task_id: task.task_id.filter(|t| !t.trim().is_empty()),
        nodes: task
            .node
            .into_iter()
            .map(|mut n| {
                let host = n.node_name.take().ok_or_else(|| GlusterError::Parse {
                    command: command.to_string(),
                    reason: "a node has no nodeName".into(),
                })?;
                Ok(RebalanceNode {
                    host,
                    peer_id: std::mem::take(&mut n.id),
                    progress: n.read(command)?,
                })
            })
            .collect::<Result<_, GlusterError>>()?,
        aggregate: aggregate.read(command)?,
    })
}

/// Parses `gluster --xml volume rebalance NAME status`.
pub fn parse_rebalance_status(xml: &str) -> Result<RebalanceStatus, GlusterError> {
    parse_task("volume rebalance status", xml, false)
}

/// Parses `gluster --xml volume remove-brick NAME BRICK... status`.
pub fn parse_remove_brick_status(xml: &str) -> Result<RebalanceStatus, GlusterError> {
    parse_task("volume remove-brick status", xml, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebalance_completed() {
        let s = parse_rebalance_status(include_str!("../testdata/rebalance-status-completed.xml"))
            .unwrap();
        assert_eq!(
            s.task_id.as_deref(),
            Some("74fc3436-d0a0-4c6c-b905-a13f6e25c5ab")
        );
        assert!(s.is_completed());
        assert!(!s.has_failed());
        assert_eq!(s.nodes.len(), 3);
        let n = &s.nodes[0];
        assert_eq!(n.host, "10.213.0.2");
        assert_eq!(n.peer_id, "6619b609-3bc4-44a4-82cd-a87e87202a80");
        assert_eq!(
            n.progress,
            RebalanceProgress {
                files: 18,
                size_bytes: 11_534_372,
                lookups: 69,
                failures: 0,
                skipped: 0,
                status: "completed".into(),
                run_time: Duration::from_secs(4),
            }
        );
        assert_eq!(s.nodes[2].host, "localhost");
        assert_eq!(s.aggregate.files, 38);
        assert_eq!(s.aggregate.size_bytes, 12_058_712);
        assert_eq!(s.aggregate.lookups, 175);
    }

    #[test]
    fn rebalance_running() {
        let s = parse_rebalance_status(include_str!("../testdata/rebalance-status-running.xml"))
            .unwrap();
        assert!(!s.is_completed());
        assert_eq!(s.aggregate.status, "in progress");
        assert_eq!(s.aggregate.lookups, 56);
        assert_eq!(s.aggregate.run_time, Duration::ZERO);
    }

    #[test]
    fn remove_brick_shares_the_shape() {
        let s =
            parse_remove_brick_status(include_str!("../testdata/remove-brick-status-running.xml"))
                .unwrap();
        assert_eq!(
            s.task_id.as_deref(),
            Some("f861a768-e21f-401e-a220-8b54b6c44301")
        );
        assert_eq!(s.aggregate.status, "in progress");
        assert_eq!(s.aggregate.run_time, Duration::from_secs(1));
        let s = parse_remove_brick_status(include_str!(
            "../testdata/remove-brick-status-completed.xml"
        ))
        .unwrap();
        assert!(s.is_completed());
        assert_eq!(s.aggregate.files, 23);
        assert_eq!(s.nodes.iter().map(|n| n.progress.files).sum::<u64>(), 23);
        // The other command's answer is not taken for this one.
        assert!(matches!(
            parse_rebalance_status(include_str!(
                "../testdata/remove-brick-status-completed.xml"
            )),
            Err(GlusterError::Parse { .. })
        ));
    }

    #[test]
    fn not_started_keeps_gluster_text() {
        match parse_rebalance_status(include_str!("../testdata/rebalance-status-none.xml")) {
            Err(GlusterError::Command { message, .. }) => {
                assert_eq!(message, "Rebalance not started for volume d21.")
            }
            other => panic!("unexpected {other:?}"),
        }
        match parse_remove_brick_status(include_str!("../testdata/remove-brick-status-none.xml")) {
            Err(GlusterError::Command { message, .. }) => {
                assert_eq!(message, "remove-brick not started for volume r3.")
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn bad_numbers_are_parse_errors() {
        let xml = include_str!("../testdata/rebalance-status-completed.xml");
        for (from, to) in [
            ("<files>18<", "<files>x<"),
            ("<runtime>4.00<", "<runtime>-1.00<"),
            ("<runtime>4.00<", "<runtime>NaN<"),
        ] {
            assert!(
                matches!(
                    parse_rebalance_status(&xml.replacen(from, to, 1)),
                    Err(GlusterError::Parse { .. })
                ),
                "{to}"
            );
        }
    }
}
