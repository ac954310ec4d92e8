//! Whether a volume's data is safe to disturb: every brick online and nothing to heal, as
//! gluster says (not as a possibly stale status says). A rolling restart asks it before each
//! pod; a resize before it adds or removes bricks.

use gk_agent_proto::v1::{Volume, VolumeRequest};
use gk_api::agents::NodeAgent;
use tonic::Code;

use crate::plan::NotSafe;
use crate::Error;

/// Ok when `vol`'s bricks are all online and nothing waits for heal; Err says what is not.
/// An agent that cannot answer the status or heal query is "not yet", not a failure.
pub async fn check(anchor: &mut NodeAgent, vol: &Volume) -> Result<(), NotSafe> {
    let name = &vol.name;
    let req = || VolumeRequest { name: name.clone() };
    let st = match anchor.client.volume_status(req()).await {
        Ok(r) => r.into_inner(),
        Err(s) => {
            return Err(NotSafe::Status {
                volume: name.clone(),
                message: s.message().to_string(),
            })
        }
    };
    let offline: Vec<String> = vol
        .bricks
        .iter()
        .filter(|b| !st.bricks.iter().any(|s| &s.brick == *b && s.online))
        .cloned()
        .collect();
    if !offline.is_empty() {
        return Err(NotSafe::BricksOffline {
            volume: name.clone(),
            offline,
            total: vol.bricks.len(),
        });
    }
    if crate::plan::layout_of(vol).set_size() > 1 {
        match anchor.client.heal_info(req()).await {
            Ok(h) if h.get_ref().pending_total == 0 && h.get_ref().split_brain_total == 0 => {}
            Ok(h) => {
                let h = h.into_inner();
                return Err(NotSafe::Healing {
                    volume: name.clone(),
                    pending: h.pending_total,
                    split_brain: h.split_brain_total,
                });
            }
            Err(s) => {
                return Err(NotSafe::HealInfo {
                    volume: name.clone(),
                    message: s.message().to_string(),
                })
            }
        }
    }
    Ok(())
}

/// [`check`] for every started volume among `names` (gluster names; volumes gluster does not
/// know are skipped). The outer error is the agent failing outright.
pub async fn check_all(
    anchor: &mut NodeAgent,
    names: &[String],
) -> Result<Result<(), NotSafe>, Error> {
    for name in names {
        let info = match anchor
            .client
            .volume_info(VolumeRequest { name: name.clone() })
            .await
        {
            Ok(r) => r.into_inner().volume,
            Err(s) if s.code() == Code::NotFound => continue,
            Err(s) => return Err(Error::agent(&anchor.node, s)),
        };
        let Some(info) = info else { continue };
        if info.status != "Started" {
            continue;
        }
        if let Err(why) = check(anchor, &info).await {
            return Ok(Err(why));
        }
    }
    Ok(Ok(()))
}
