//! A volume's options: VolumeSet (gluster's refusals reported per option), VolumeReset.

use super::*;

impl<R: CommandRunner + Clone + 'static> Agent<R> {
    pub(super) async fn volume_set_rpc(
        &self,
        req: Request<VolumeSetRequest>,
    ) -> Reply<VolumeSetResponse> {
        let req = req.into_inner();
        let options: BTreeMap<String, String> = req.options.into_iter().collect();
        spec::options("options", &options)?;
        let (name, _guard) = self.begin("VolumeSet", &req.name).await?;
        let have = self.info(&name).await?;
        let mut rejected = Vec::new();
        let mut asked = false;
        // Once glusterd is busy past the retries each command gets, the other options are
        // not tried (each would wait out the same retries) and are reported as not set.
        let mut busy: Option<String> = None;
        for (k, v) in &options {
            if have.options.get(k) == Some(v) {
                continue;
            }
            let reason = if let Some(b) = &busy {
                format!("not tried: glusterd was busy ({b}); set at the next refresh")
            } else {
                asked = true;
                match self.gluster.volume_set(&name, k, v).await {
                    Ok(()) => continue,
                    Err(GlusterError::Command { message, .. }) => {
                        if gk_gluster::is_busy(&message) {
                            busy = Some(message.clone());
                        }
                        message
                    }
                    Err(e) => return Err(AgentError::from(e).into()),
                }
            };
            rejected.push(RejectedOption {
                key: k.clone(),
                value: v.clone(),
                reason,
            });
        }
        for r in &rejected {
            tracing::warn!(volume = %name, key = %r.key, reason = %r.reason, "option refused by gluster");
        }
        // Every refresh asks with the options already set: read again only after a change.
        let v = if asked { self.info(&name).await? } else { have };
        Ok(Response::new(VolumeSetResponse {
            volume: Some(convert::volume(&v)),
            rejected,
        }))
    }

    pub(super) async fn volume_reset_rpc(
        &self,
        req: Request<VolumeResetRequest>,
    ) -> Reply<VolumeResponse> {
        let req = req.into_inner();
        spec::options("key", &BTreeMap::from([(req.key.clone(), "x".to_string())]))?;
        let (name, _guard) = self.begin("VolumeReset", &req.name).await?;
        if self.info(&name).await?.options.contains_key(&req.key) {
            self.gluster
                .volume_reset(&name, &req.key)
                .await
                .map_err(AgentError::from)?;
        }
        self.volume_reply(&name).await
    }
}
