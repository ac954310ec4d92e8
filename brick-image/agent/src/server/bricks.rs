//! Changing a volume's bricks: AddBrick, RemoveBrick*, ReplaceBrick, Rebalance*,
//! BrickRelease.

use super::*;

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn add_brick_rpc(
        &self,
        req: Request<AddBrickRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let bricks = spec::bricks("bricks", &req.bricks)?;
        let (name, _guard) = self.begin("AddBrick", &req.name).await?;
        let v = self.info(&name).await?;
        let present: Vec<&Brick> = v.bricks.iter().map(|b| &b.brick).collect();
        let new: Vec<Brick> = bricks
            .into_iter()
            .filter(|b| !present.contains(&b))
            .collect();
        if !new.is_empty() {
            let layout = convert::layout_of(&v);
            self.gluster
                .add_brick(&name, layout, &new, req.force)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    pub(super) async fn remove_brick_start_rpc(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let req = req.into_inner();
        let bricks = spec::bricks("bricks", &req.bricks)?;
        let (name, _guard) = self.begin("RemoveBrickStart", &req.name).await?;
        self.info(&name).await?;
        self.gluster
            .remove_brick_start(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        let st = self.gluster.remove_brick_status(&name, &bricks).await;
        Ok(Response::new(just_started(&name, st)))
    }

    pub(super) async fn remove_brick_status_rpc(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let req = req.into_inner();
        let name = self.volume_arg("name", &req.name)?;
        let bricks = spec::bricks("bricks", &req.bricks)?;
        self.info(&name).await?;
        let st = self
            .gluster
            .remove_brick_status(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::rebalance(&st)))
    }

    pub(super) async fn remove_brick_commit_rpc(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let bricks = spec::bricks("bricks", &req.bricks)?;
        let (name, _guard) = self.begin("RemoveBrickCommit", &req.name).await?;
        let v = self.info(&name).await?;
        if !bricks
            .iter()
            .any(|b| v.bricks.iter().any(|have| &have.brick == b))
        {
            return self.volume_reply(&name).await;
        }
        // Commit only once data has left the bricks: a commit before that loses files.
        let st = self
            .gluster
            .remove_brick_status(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        let done = convert::rebalance(&st);
        if done.status != "completed" {
            return Err(AgentError::Precondition(format!(
                "data migration off the removed bricks is {}, not completed; commit would lose data",
                done.status
            ))
            .into());
        }
        self.gluster
            .remove_brick_commit(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    pub(super) async fn remove_brick_stop_rpc(
        &self,
        req: Request<RemoveBrickRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let bricks = spec::bricks("bricks", &req.bricks)?;
        let (name, _guard) = self.begin("RemoveBrickStop", &req.name).await?;
        self.info(&name).await?;
        self.gluster
            .remove_brick_stop(&name, &bricks)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    pub(super) async fn rebalance_stop_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<VolumeResponse> {
        let (name, _guard) = self.begin("RebalanceStop", &req.into_inner().name).await?;
        self.info(&name).await?;
        self.gluster
            .rebalance_stop(&name)
            .await
            .map_err(AgentError::from)?;
        self.volume_reply(&name).await
    }

    pub(super) async fn replace_brick_rpc(
        &self,
        req: Request<ReplaceBrickRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let old = Brick::parse(&req.old_brick)
            .map_err(|e| AgentError::invalid("old_brick", e.to_string()))?;
        let new = Brick::parse(&req.new_brick)
            .map_err(|e| AgentError::invalid("new_brick", e.to_string()))?;
        let (name, _guard) = self.begin("ReplaceBrick", &req.name).await?;
        let v = self.info(&name).await?;
        let has = |b: &Brick| v.bricks.iter().any(|have| &have.brick == b);
        match (has(&old), has(&new)) {
            (false, true) => {}
            (true, false) => {
                self.gluster
                    .replace_brick_commit_force(&name, &old, &new)
                    .await
                    .map_err(AgentError::from)?;
            }
            (true, true) => {
                return Err(AgentError::invalid(
                    "new_brick",
                    format!("{new} is already a brick of {name}"),
                )
                .into())
            }
            (false, false) => {
                return Err(AgentError::invalid(
                    "old_brick",
                    format!("{old} is not a brick of {name}"),
                )
                .into())
            }
        }
        self.volume_reply(&name).await
    }

    pub(super) async fn rebalance_start_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let (name, _guard) = self.begin("RebalanceStart", &req.into_inner().name).await?;
        self.info(&name).await?;
        let running = self
            .gluster
            .rebalance_status(&name)
            .await
            .map(|s| convert::rebalance(&s).status == "in progress")
            .unwrap_or(false);
        if !running {
            self.gluster
                .rebalance_start(&name)
                .await
                .map_err(AgentError::from)?;
        }
        let st = self.gluster.rebalance_status(&name).await;
        Ok(Response::new(just_started(&name, st)))
    }

    pub(super) async fn rebalance_status_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<RebalanceStatusResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        let st = self
            .gluster
            .rebalance_status(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::rebalance(&st)))
    }

    pub(super) async fn brick_release_rpc(
        &self,
        req: Request<BrickReleaseRequest>,
    ) -> Reply<BrickReleaseResponse> {
        let req = req.into_inner();
        let path = PathBuf::from(&req.path);
        log_rpc("BrickRelease", "");
        if req.only_if_empty && !failed_create_leftover(&path) {
            return Ok(Response::new(BrickReleaseResponse { released: false }));
        }
        tracing::info!(path = %path.display(), "releasing brick directory");
        let released = self.release(&path).await?;
        Ok(Response::new(BrickReleaseResponse { released }))
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    /// Bricks of `v` on this node: those whose host UUID is not one of our peers'.
    pub(super) async fn local_brick_paths(&self, v: &Volume) -> Vec<PathBuf> {
        let Ok(peers) = self.gluster.peer_status().await else {
            return Vec::new();
        };
        v.bricks
            .iter()
            .filter(|b| !peers.iter().any(|p| p.uuid == b.host_uuid))
            .map(|b| PathBuf::from(&b.brick.path))
            .collect()
    }

    /// Kills this node's brick processes of `name` that glusterd has reported offline for
    /// long after they started (see `hung`), so that a forced start runs fresh ones.
    pub(super) async fn kill_hung_bricks(&self, name: &str) {
        let Ok(status) = self.gluster.volume_status(name).await else {
            return;
        };
        let offline: Vec<&str> = status
            .bricks
            .iter()
            .filter(|b| !b.online && b.brick.host == self.config.advertise_address)
            .map(|b| b.brick.path.as_str())
            .collect();
        if offline.is_empty() {
            return;
        }
        let procs = crate::hung::brick_processes();
        let hung = crate::hung::hung(&procs, name, &offline, self.config.brick_hung_after);
        crate::hung::kill(name, &hung).await;
    }

    pub(super) async fn release(&self, path: &Path) -> Result<bool, AgentError> {
        let inside_root = self
            .config
            .brick_roots
            .iter()
            .any(|root| path.starts_with(root) && path != root);
        if !path.is_absolute() || !inside_root || path.components().any(|c| c.as_os_str() == "..") {
            return Err(AgentError::invalid(
                "path",
                format!(
                    "{} is not a directory below a brick root {:?}",
                    path.display(),
                    self.config.brick_roots
                ),
            ));
        }
        if !path.exists() {
            return Ok(false);
        }
        if let Some(id) = brick_volume_id(path)? {
            for v in self.gluster.volume_info_all().await? {
                if v.id == id {
                    return Err(AgentError::Precondition(format!(
                        "{} is a brick of volume {}; delete the volume first",
                        path.display(),
                        v.name
                    )));
                }
            }
        }
        std::fs::remove_dir_all(path)
            .map_err(AgentError::io(format!("removing {}", path.display())))?;
        Ok(true)
    }
}
