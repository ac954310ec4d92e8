//! The agent's standing pass: every PV directory on this node's bricks of a volume sized by
//! project quotas keeps its project and limit, whatever brought it there (heal after a node
//! was away, replace-brick, add-brick and rebalance, a restore), and released directories
//! give their limits back. At start, then every [`EVERY`].

use std::path::PathBuf;
use std::time::Duration;

use gk_gluster::{CommandRunner, Gluster};

use super::{capable, volume};

/// How often the pass runs. A directory that reaches a brick between passes holds data
/// beyond its limit on that brick for at most this long; the set's other bricks refuse it
/// meanwhile, so replicated writes past the size still fail.
pub const EVERY: Duration = Duration::from_secs(60);

/// What one pass did, for logs and the CLI.
#[derive(Debug, Default)]
pub struct Summary {
    pub volumes: usize,
    /// Directories given a project or a new limit now.
    pub changed: Vec<(PathBuf, u32, u64)>,
    /// Directories (or bricks) that could not be enforced, and why.
    pub failed: Vec<(PathBuf, String)>,
}

/// One pass over every volume sized by project quotas that has a brick on this node (known
/// to gluster as `address`). Asks gluster nothing when no disk of `roots` has project
/// quotas, so a node without them pays nothing.
pub async fn pass<R: CommandRunner>(
    gluster: &Gluster<R>,
    address: &str,
    roots: &[PathBuf],
) -> Result<Summary, gk_gluster::GlusterError> {
    let mut summary = Summary::default();
    if !roots.iter().any(|r| capable(r).is_ok()) {
        return Ok(summary);
    }
    for v in gluster.volume_info_all().await? {
        if !volume::by_projects(&v) || volume::local_bricks(&v, address).is_empty() {
            continue;
        }
        summary.volumes += 1;
        for (brick, pass) in volume::keep(&v, address).await {
            match pass {
                Ok(p) => {
                    summary.changed.extend(
                        p.enforced
                            .into_iter()
                            .filter(|(_, e)| e.assigned || e.limited)
                            .map(|(d, e)| (d, e.id, e.limit)),
                    );
                    summary
                        .failed
                        .extend(p.failed.into_iter().map(|(d, e)| (d, e.to_string())));
                }
                Err(e) => summary.failed.push((brick, e.to_string())),
            }
        }
    }
    Ok(summary)
}

/// Runs [`pass`] at start and every [`EVERY`], forever, logging what changed or failed.
pub async fn run<R: CommandRunner>(gluster: Gluster<R>, address: String, roots: Vec<PathBuf>) {
    loop {
        match pass(&gluster, &address, &roots).await {
            Ok(s) => {
                for (dir, id, limit) in &s.changed {
                    tracing::info!(dir = %dir.display(), id, limit, "PV directory given its project limit");
                }
                for (dir, why) in &s.failed {
                    tracing::warn!(dir = %dir.display(), %why, "PV directory has no project limit on this brick");
                }
            }
            Err(e) => tracing::warn!(error = %e, "listing volumes for the project-quota pass"),
        }
        tokio::time::sleep(EVERY).await;
    }
}
