//! Moving a pool's PVs from gluster's quota to the bricks' project quotas, one step per
//! reconcile while the volume's option says project and gluster's quota is still on (both
//! enforce meanwhile, so no PV is ever without its limit): every node's agent records the
//! PVs' gluster limits as their sizes and enforces them on its bricks; once every brick of
//! every node does ([`plan::pv_quota::move_verdict`]), gluster's quota is turned off.

use std::time::Duration;

use gk_agent_proto::v1::PvQuotaMoveRequest;
use gk_api::agents::{NodeAgent, NodeDown};
use gk_api::crd::{PvQuotaEnforcement, PvQuotaStatus};

use crate::plan;

/// How long one node's step may take (a listing of the pool's top level and one pass over
/// its bricks).
const STEP_WAIT: Duration = Duration::from_secs(60);

/// Takes one step of the move of volume `name` and says where it stands.
pub async fn step(agents: &mut [NodeAgent], down: &[NodeDown], name: &str) -> PvQuotaStatus {
    let mut answers = Vec::new();
    for a in agents.iter_mut() {
        let asked = a.client.pv_quota_move(PvQuotaMoveRequest {
            volume: name.to_string(),
            finish: false,
        });
        let answer = match tokio::time::timeout(STEP_WAIT, asked).await {
            Ok(Ok(r)) => Ok(r.into_inner()),
            Ok(Err(s)) => Err(s.message().to_string()),
            Err(_) => Err(format!("no answer within {}s", STEP_WAIT.as_secs())),
        };
        answers.push((a.node.clone(), answer));
    }
    let down: Vec<String> = down.iter().map(|d| d.node.clone()).collect();
    let borrowed: Vec<plan::pv_quota::MoveAnswer> = answers
        .iter()
        .map(|(n, a)| (n.as_str(), a.clone()))
        .collect();
    let moving = |why: &dyn std::fmt::Display| PvQuotaStatus {
        enforcement: PvQuotaEnforcement::Gluster,
        reason: format!("{}; now {why}", plan::pv_quota::MOVING),
    };
    if let Err(why) = plan::pv_quota::move_verdict(&borrowed, &down) {
        return moving(&why);
    }
    let pvs = borrowed
        .iter()
        .filter_map(|(_, a)| a.as_ref().ok().map(|a| a.pvs))
        .max()
        .unwrap_or(0);
    let finished = agents[0]
        .client
        .pv_quota_move(PvQuotaMoveRequest {
            volume: name.to_string(),
            finish: true,
        })
        .await;
    match finished {
        Ok(r) if !r.get_ref().gluster_quota_on => {
            tracing::info!(volume = %name, pvs, "moved to the bricks' project quotas; gluster's quota is off");
            PvQuotaStatus {
                enforcement: PvQuotaEnforcement::Project,
                reason: format!(
                    "moved from gluster's quota: every brick enforces all {pvs} PVs by project \
                     quota, and gluster's quota is off"
                ),
            }
        }
        Ok(_) => moving(&"gluster's quota is still on after the last step; tried again"),
        Err(s) => moving(&format!(
            "turning gluster's quota off failed: {}",
            s.message()
        )),
    }
}
