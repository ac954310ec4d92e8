//! The read-only RPCs for people (`kubectl gluster`): heal and split-brain entries with
//! their paths, and the end of gluster's logs in this pod. Nothing here changes gluster.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use gk_gluster::CommandRunner;
use tonic::{Request, Response};

use super::{Agent, Reply};
use crate::proto::*;
use crate::AgentError;

const DEFAULT_ENTRIES: u32 = 100;
const MAX_ENTRIES: u32 = 10_000;
const DEFAULT_LOG_BYTES: u32 = 64 << 10;
const MAX_LOG_BYTES: u32 = 1 << 20;

fn entry_limit(limit: u32) -> Result<usize, AgentError> {
    match limit {
        0 => Ok(DEFAULT_ENTRIES as usize),
        n if n <= MAX_ENTRIES => Ok(n as usize),
        n => Err(AgentError::invalid(
            "limit",
            format!("{n} is more than {MAX_ENTRIES} entries per brick"),
        )),
    }
}

fn log_bytes(max_bytes: u32) -> Result<u64, AgentError> {
    match max_bytes {
        0 => Ok(u64::from(DEFAULT_LOG_BYTES)),
        n if n <= MAX_LOG_BYTES => Ok(u64::from(n)),
        n => Err(AgentError::invalid(
            "max_bytes",
            format!("{n} is more than {MAX_LOG_BYTES} bytes per file"),
        )),
    }
}

/// The log files of `kind` under gluster's log directory, relative to it, sorted. Only
/// regular files count: a link could point anywhere. Rotated copies (`.1`) are left out.
/// `volume` narrows the rebalance logs to that volume's.
pub(crate) fn log_files(dir: &Path, kind: LogKind, volume: Option<&str>) -> Vec<PathBuf> {
    let regular = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file());
    let mut out = Vec::new();
    let top = |name: &str| PathBuf::from(name);
    if matches!(kind, LogKind::All | LogKind::Glusterd) {
        out.push(top("glusterd.log"));
    }
    if matches!(kind, LogKind::All | LogKind::SelfHeal) {
        out.push(top("glustershd.log"));
    }
    if matches!(kind, LogKind::All | LogKind::Rebalance) {
        let mut rebalance: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| PathBuf::from(e.file_name()))
            .filter(|n| {
                let n = n.to_string_lossy();
                match volume {
                    Some(v) => n == format!("{v}-rebalance.log"),
                    None => n.ends_with("-rebalance.log"),
                }
            })
            .collect();
        rebalance.sort();
        out.extend(rebalance);
    }
    if matches!(kind, LogKind::All | LogKind::Bricks) {
        let mut bricks: Vec<PathBuf> = std::fs::read_dir(dir.join("bricks"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().ends_with(".log"))
            .map(|n| Path::new("bricks").join(n))
            .collect();
        bricks.sort();
        out.extend(bricks);
    }
    out.retain(|p| regular(&dir.join(p)));
    out
}

/// The last `max` bytes of a file as text, beginning at a whole line when cut.
pub(crate) fn tail(path: &Path, max: u64) -> std::io::Result<(String, bool)> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let truncated = len > max;
    if truncated {
        f.seek(SeekFrom::Start(len - max))?;
    }
    let mut bytes = Vec::with_capacity(max.min(len) as usize);
    f.take(max).read_to_end(&mut bytes)?;
    let start = if truncated {
        bytes.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1)
    } else {
        0
    };
    Ok((
        String::from_utf8_lossy(&bytes[start..]).into_owned(),
        truncated,
    ))
}

impl<R: CommandRunner + 'static> Agent<R> {
    pub(super) async fn heal_entries_rpc(
        &self,
        req: Request<HealEntriesRequest>,
    ) -> Reply<HealEntriesResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let limit = entry_limit(req.limit)?;
        let vol = self.info(&name).await?;
        if vol.replica_count <= 1 && vol.disperse_count == 0 {
            return Err(AgentError::Precondition(format!(
                "volume {name} is {}: it keeps one copy of each file, so nothing heals",
                vol.type_name
            ))
            .into());
        }
        let pending = self
            .gluster
            .heal_entries(&name)
            .await
            .map_err(AgentError::from)?;
        // Gluster lists split-brain for replicated volumes only; dispersed ones have none.
        let split = if vol.replica_count > 1 {
            self.gluster
                .split_brain_entries(&name)
                .await
                .map_err(AgentError::from)?
        } else {
            Vec::new()
        };
        Ok(Response::new(crate::convert::heal_entries(
            &pending, &split, limit,
        )))
    }

    pub(super) async fn log_tail_rpc(
        &self,
        req: Request<LogTailRequest>,
    ) -> Reply<LogTailResponse> {
        let req = req.into_inner();
        let kind = LogKind::try_from(req.kind)
            .map_err(|_| AgentError::invalid("kind", format!("{} is no log kind", req.kind)))?;
        let max = log_bytes(req.max_bytes)?;
        let volume = match req.volume.as_str() {
            "" => None,
            v if kind == LogKind::Rebalance => Some(self.volume_arg("volume", v)?),
            _ => {
                return Err(AgentError::invalid(
                    "volume",
                    "only with kind LOG_KIND_REBALANCE: the other logs are not per volume",
                )
                .into())
            }
        };
        let dir = self.config.gluster_log_dir.clone();
        let files = tokio::task::spawn_blocking(move || {
            log_files(&dir, kind, volume.as_deref())
                .into_iter()
                .map(|rel| {
                    let (text, truncated) = tail(&dir.join(&rel), max).map_err(AgentError::io(
                        format!("reading {}", dir.join(&rel).display()),
                    ))?;
                    Ok(LogFile {
                        path: rel.to_string_lossy().into_owned(),
                        text,
                        truncated,
                    })
                })
                .collect::<Result<Vec<_>, AgentError>>()
        })
        .await
        .map_err(|e| AgentError::Io {
            what: "reading gluster's logs".into(),
            source: std::io::Error::other(e),
        })??;
        Ok(Response::new(LogTailResponse { files }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked_and_named() {
        assert_eq!(entry_limit(0).unwrap(), 100);
        assert_eq!(entry_limit(10_000).unwrap(), 10_000);
        assert!(entry_limit(10_001)
            .unwrap_err()
            .to_string()
            .contains("limit"));
        assert_eq!(log_bytes(0).unwrap(), 65536);
        assert!(log_bytes(2 << 20)
            .unwrap_err()
            .to_string()
            .contains("max_bytes"));
    }

    #[test]
    fn log_files_by_kind_and_only_regular_files() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("bricks")).unwrap();
        for f in [
            "glusterd.log",
            "glusterd.log.1",
            "cli.log",
            "bricks/b-z.log",
            "bricks/b-a.log",
            "v1-rebalance.log",
            "v1-rebalance.log.1",
            "v2-rebalance.log",
        ] {
            std::fs::write(d.path().join(f), "x\n").unwrap();
        }
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("glustershd.log")).unwrap();
        let names = |k| {
            log_files(d.path(), k, None)
                .into_iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(LogKind::Glusterd), ["glusterd.log"]);
        assert_eq!(names(LogKind::Bricks), ["bricks/b-a.log", "bricks/b-z.log"]);
        // The link to a file outside the directory is not read.
        assert!(names(LogKind::SelfHeal).is_empty());
        assert_eq!(
            names(LogKind::Rebalance),
            ["v1-rebalance.log", "v2-rebalance.log"]
        );
        assert_eq!(
            log_files(d.path(), LogKind::Rebalance, Some("v2")),
            [PathBuf::from("v2-rebalance.log")]
        );
        assert_eq!(names(LogKind::All).len(), 5);
    }

    #[test]
    fn a_tail_begins_at_a_whole_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("l");
        std::fs::write(&f, "first line\nsecond\nthird\n").unwrap();
        assert_eq!(
            tail(&f, 100).unwrap(),
            ("first line\nsecond\nthird\n".to_string(), false)
        );
        // The cut lands inside "second": it starts at "third".
        assert_eq!(tail(&f, 10).unwrap(), ("third\n".to_string(), true));
    }
}
