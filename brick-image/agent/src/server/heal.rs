//! Self-heal: HealInfo, HealCount, HealStart (HealEntries and LogTail are in `inspect`).

use super::*;

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn heal_info_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        self.info(&name).await?;
        self.heal_summary(&name).await
    }

    pub(super) async fn heal_count_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        let bricks: Vec<gk_gluster::Brick> = self
            .info(&name)
            .await?
            .bricks
            .into_iter()
            .map(|b| b.brick)
            .collect();
        // The count is a glusterd transaction on the volume: glusterd would refuse this
        // agent's own changes to it meanwhile instead of queueing them. The summary below
        // is a client of the bricks (glfsheal), not a transaction, and may take minutes: it
        // runs without the lock, so an add-brick or an option change does not wait for it.
        let asked = {
            let _guard = self.locks.lock(&name).await;
            tokio::time::timeout(HEAL_COUNT_WAIT, self.gluster.heal_count(&name)).await
        }
        // The summary would wait on the same unreachable node: none is run.
        .map_err(|_| {
            AgentError::from(GlusterError::Timeout {
                command: format!("volume heal {name} statistics heal-count"),
                timeout: HEAL_COUNT_WAIT,
            })
        })?;
        match asked {
            Ok(counts) if gk_gluster::nothing_to_heal(&counts, &bricks) => {
                return Ok(Response::new(convert::nothing_to_heal(&bricks)));
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(volume = %name, error = %e, "heal count failed; running the summary")
            }
        }
        self.heal_summary(&name).await
    }

    pub(super) async fn heal_start_rpc(
        &self,
        req: Request<VolumeRequest>,
    ) -> Reply<HealInfoResponse> {
        let name = self.volume_arg("name", &req.into_inner().name)?;
        log_rpc("HealStart", &name);
        self.info(&name).await?;
        self.gluster
            .heal_start(&name)
            .await
            .map_err(AgentError::from)?;
        let heal = self
            .gluster
            .heal_info_summary(&name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::heal(&heal)))
    }
}

impl<R: CommandRunner + 'static> Agent<R> {
    /// `volume heal NAME info summary` (through glfsheal) as the RPCs answer it.
    pub(super) async fn heal_summary(&self, name: &str) -> Reply<HealInfoResponse> {
        let heal = self
            .gluster
            .heal_info_summary(name)
            .await
            .map_err(AgentError::from)?;
        Ok(Response::new(convert::heal(&heal)))
    }
}
