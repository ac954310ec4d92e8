//! A volume's life: VolumeCreate, VolumeStart, VolumeStop, VolumeDelete, VolumeInfo,
//! VolumeList, VolumeStatus.

use super::*;

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn volume_create_rpc(
        &self,
        req: Request<VolumeCreateRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let want = DesiredVolume::from_spec(req.spec.as_ref())?;
        log_rpc("VolumeCreate", &want.name);
        // On a task of its own: a caller that goes away (an operator restarting) would
        // otherwise cut the create between its steps, leaving a volume without its access
        // options or not started.
        let agent = self.clone();
        let v = tokio::spawn(async move {
            let _guard = agent.locks.lock(&want.name).await;
            agent.create(&want, req.start).await
        })
        .await
        .map_err(|e| Status::internal(format!("the volume create task failed: {e}")))??;
        Ok(Response::new(VolumeResponse {
            volume: Some(convert::volume(&v)),
        }))
    }

    pub(super) async fn volume_start_rpc(
        &self,
        req: Request<VolumeStartRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let (name, _guard) = self.begin("VolumeStart", &req.name).await?;
        let v = self.info(&name).await?;
        if req.force {
            self.kill_hung_bricks(&name).await;
            self.gluster
                .volume_start_force(&name)
                .await
                .map_err(AgentError::from)?;
        } else if !v.is_started() {
            self.gluster
                .volume_start(&name)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    pub(super) async fn volume_stop_rpc(
        &self,
        req: Request<VolumeStopRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        let (name, _guard) = self.begin("VolumeStop", &req.name).await?;
        self.forget_quota_ready(&name);
        if self.info(&name).await?.is_started() {
            self.gluster
                .volume_stop(&name, req.force)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }

    pub(super) async fn volume_delete_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<VolumeDeleteResponse> {
        let (name, _guard) = self.begin("VolumeDelete", &req.into_inner().name).await?;
        self.forget_quota_ready(&name);
        let Some(v) = self
            .gluster
            .volume_info(&name)
            .await
            .map_err(AgentError::from)?
        else {
            return Ok(Response::new(VolumeDeleteResponse { deleted: false }));
        };
        if v.is_started() {
            return Err(AgentError::Precondition(format!(
                "volume {name} is started; stop it before deleting"
            ))
            .into());
        }
        let mount = self.config.mount_root.join(&name);
        mount::unmount(&mount).map_err(AgentError::from)?;
        self.gluster
            .volume_delete(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(VolumeDeleteResponse { deleted: true }))
    }

    pub(super) async fn volume_info_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<VolumeResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.volume_reply(&name).await
    }

    pub(super) async fn volume_list_rpc(
        &self,
        _: Request<VolumeListRequest>,
    ) -> Reply<VolumeListResponse> {
        let names = self.gluster.volume_list().await.map_err(AgentError::from)?;
        Ok(Response::new(VolumeListResponse { names }))
    }

    pub(super) async fn volume_status_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<VolumeStatusResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        let status = self
            .gluster
            .volume_status(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::volume_status(&status)))
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    pub(super) async fn create(
        &self,
        want: &DesiredVolume,
        start: bool,
    ) -> Result<Volume, AgentError> {
        if let Some(existing) = self.gluster.volume_info(&want.name).await? {
            want.matches(&existing)
                .map_err(|m| AgentError::Conflict(m.to_string()))?;
            tracing::info!(volume = %want.name, "volume exists as requested");
            self.converge(want, &existing, start).await?;
            return self.info(&want.name).await;
        }
        if let Err(e) = self
            .gluster
            .volume_create(&want.name, want.layout, &want.bricks, want.force)
            .await
        {
            // glusterd can mark this node's new brick directories with the volume's id and
            // then fail on a peer (say, one not connected for a moment); every retry would
            // then fail with "already part of a volume". Marks of a volume that does not
            // exist, on directories holding nothing, are cleared.
            if matches!(self.gluster.volume_info(&want.name).await, Ok(None)) {
                for b in &want.bricks {
                    if b.host == self.config.advertise_address {
                        self.clear_failed_brick(Path::new(&b.path)).await;
                    }
                }
            }
            return Err(e.into());
        }
        let created = self.info(&want.name).await?;
        if let Err(e) = self.converge(want, &created, start).await {
            tracing::warn!(volume = %want.name, error = %e, "create failed half way; rolling back");
            self.roll_back(&created).await;
            return Err(e);
        }
        self.info(&want.name).await
    }

    /// Options set, then started if asked: the steps after `volume create`.
    pub(super) async fn converge(
        &self,
        want: &DesiredVolume,
        have: &Volume,
        start: bool,
    ) -> Result<(), AgentError> {
        for (k, v) in &want.options {
            if have.options.get(k) != Some(v) {
                self.gluster.volume_set(&want.name, k, v).await?;
            }
        }
        if start && !have.is_started() {
            self.gluster.volume_start(&want.name).await?;
        }
        Ok(())
    }

    /// Removes a volume this call created and frees its bricks on this node, so that a
    /// retry starts clean. Bricks on other nodes are freed through their own agents.
    pub(super) async fn roll_back(&self, v: &Volume) {
        if v.is_started()
            || self
                .gluster
                .volume_info(&v.name)
                .await
                .ok()
                .flatten()
                .is_some_and(|v| v.is_started())
        {
            if let Err(e) = self.gluster.volume_stop(&v.name, true).await {
                tracing::warn!(volume = %v.name, error = %e, "rollback: stop failed");
            }
        }
        if let Err(e) = self.gluster.volume_delete(&v.name).await {
            tracing::warn!(volume = %v.name, error = %e, "rollback: delete failed");
            return;
        }
        for path in self.local_brick_paths(v).await {
            if let Err(e) = self.release(&path).await {
                tracing::warn!(brick = %path.display(), error = %e, "rollback: brick not released");
            }
        }
    }

    /// Removes `path` if a failed create left it behind: it carries the volume id of no
    /// existing volume and holds nothing but gluster's empty `.glusterfs` directory.
    pub(super) async fn clear_failed_brick(&self, path: &Path) {
        if !failed_create_leftover(path) {
            return;
        }
        match self.release(path).await {
            Ok(_) => {
                tracing::info!(brick = %path.display(), "cleared a brick directory a failed create left")
            }
            Err(e) => {
                tracing::warn!(brick = %path.display(), error = %e, "brick directory of a failed create not cleared")
            }
        }
    }
}
