//! The copies on the bricks (BrickCopy: probe, clone, finish, discard) and gluster's
//! barrier that quiesces a live source while its bricks clone it (VolumeBarrier).

use std::path::{Path, PathBuf};

use gk_gluster::CommandRunner;
use tonic::{Request, Response};

use super::{log_rpc, subdir_path, Agent, Reply};
use crate::proto::*;
use crate::snapshot::{self, on_bricks, Layout};
use crate::AgentError;

/// The longest gluster's barrier holds the bricks' answers when nobody lifts it (an agent
/// killed while copying): long enough for a reflink copy of a large PV, short enough that
/// an application's fsync waits no longer.
pub const BARRIER_TIMEOUT_SECONDS: u32 = 30;
const BARRIER_TIMEOUT_KEY: &str = "features.barrier-timeout";

/// One end of a copy on the bricks: a subdirectory (`/pvc-0f3c`) or a snapshot's data
/// (`snapshot:NAME`), as a path relative to a brick's root.
fn copy_end(field: &str, end: &str) -> Result<PathBuf, AgentError> {
    match end.strip_prefix("snapshot:") {
        Some(name) => {
            let name = snapshot::snapshot_name(field, name)?;
            Ok(Layout::new(Path::new(""), &name).data())
        }
        None => Ok(PathBuf::from(&subdir_path(field, end)?[1..])),
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    pub(super) async fn brick_copy_rpc(
        &self,
        req: Request<BrickCopyRequest>,
    ) -> Reply<BrickCopyResponse> {
        let req = req.into_inner();
        let volume = self.volume_arg("volume", &req.volume)?;
        let source = copy_end("source", &req.source)?;
        let target = copy_end("target", &req.target)?;
        if source == target {
            return Err(AgentError::invalid("target", "cannot be the source").into());
        }
        log_rpc("BrickCopy", &volume);
        let v = self.info(&volume).await?;
        let mine: Vec<&gk_gluster::Brick> = v
            .bricks
            .iter()
            .map(|b| &b.brick)
            .filter(|b| b.host == self.config.advertise_address)
            .collect();
        let mut reply = BrickCopyResponse {
            volume_bricks: v.bricks.iter().map(|b| b.brick.to_string()).collect(),
            bricks: mine.iter().map(|b| b.to_string()).collect(),
            reflink: true,
            project_quota: crate::projects::volume::by_projects(&v),
            ..Default::default()
        };
        for b in &mine {
            reply.reflink &= on_bricks::reflinks(Path::new(&b.path))?;
        }
        if req.probe {
            return Ok(Response::new(reply));
        }
        if !reply.reflink {
            return Err(AgentError::Precondition(format!(
                "a brick of {volume} on {} cannot clone files (its filesystem has no reflink)",
                self.config.advertise_address
            ))
            .into());
        }
        let _guard = self
            .locks
            .lock(&format!("brick-copy:{volume}:{}", req.target))
            .await;
        let copy_id = format!("{}<-{}", req.target, req.source);
        let phase = BrickCopyPhase::try_from(req.phase)
            .map_err(|_| AgentError::invalid("phase", "is not a known phase"))?;
        let started = std::time::Instant::now();
        for b in &mine {
            let root = Path::new(&b.path);
            let (src, dst) = (root.join(&source), root.join(&target));
            let copied = match phase {
                BrickCopyPhase::Clone if src.is_dir() => {
                    on_bricks::clone(root, &src, &dst, &copy_id).await?;
                    true
                }
                BrickCopyPhase::Finish if on_bricks::staged(root, &copy_id) => {
                    reply.entries += on_bricks::finish(root, &dst, &copy_id).await?.entries;
                    true
                }
                BrickCopyPhase::Discard if on_bricks::staged(root, &copy_id) => {
                    on_bricks::abandon(root, &copy_id).await?;
                    true
                }
                BrickCopyPhase::All if src.is_dir() => {
                    on_bricks::clone(root, &src, &dst, &copy_id).await?;
                    reply.entries += on_bricks::finish(root, &dst, &copy_id).await?.entries;
                    true
                }
                _ => false,
            };
            if copied {
                reply.copied.push(b.to_string());
            }
        }
        tracing::info!(%volume, source = %req.source, target = %req.target, phase = phase.as_str_name(), bricks = reply.copied.len(), entries = reply.entries, seconds = started.elapsed().as_secs_f64(), "copied on the bricks");
        Ok(Response::new(reply))
    }

    pub(super) async fn volume_barrier_rpc(
        &self,
        req: Request<VolumeBarrierRequest>,
    ) -> Reply<VolumeBarrierResponse> {
        let req = req.into_inner();
        let (volume, _guard) = self.begin("VolumeBarrier", &req.volume).await?;
        if req.enable {
            let v = self.info(&volume).await?;
            let want = BARRIER_TIMEOUT_SECONDS.to_string();
            if v.options.get(BARRIER_TIMEOUT_KEY) != Some(&want) {
                self.gluster
                    .volume_set(&volume, BARRIER_TIMEOUT_KEY, &want)
                    .await
                    .map_err(AgentError::from)?;
            }
        }
        self.gluster
            .volume_barrier(&volume, req.enable)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(VolumeBarrierResponse {}))
    }
}
