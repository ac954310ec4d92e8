//! `kubectl gluster bricks [VOLUME]`: every brick with its node and zone, whether it is online, its
//! process and port, and its filesystem's free space: the volume's status, joined with
//! gluster's own brick status (the agent's VolumeStatus) where an agent answers.

use std::collections::BTreeMap;

use gk_agent_proto::v1::{VolumeRequest, VolumeStatusResponse};
use gk_api::crd::GlusterVolume;
use kube::ResourceExt;

use super::gluster_name;
use crate::cluster::Scope;
use crate::{agent, table, PluginError};

/// A volume with gluster's brick status, or why there is none.
pub struct Observed {
    pub volume: GlusterVolume,
    pub gluster: Result<VolumeStatusResponse, String>,
}

pub fn render(observed: &[Observed]) -> String {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for o in observed {
        let v = &o.volume;
        let name = format!("{}/{}", v.namespace().unwrap_or_default(), v.name_any());
        if let Err(why) = &o.gluster {
            notes.push(format!("{name}: gluster's brick status is missing ({why}); ONLINE is the operator's last word"));
        }
        for b in v.status.iter().flat_map(|s| &s.bricks) {
            let brick = format!("{}:{}", b.host, b.path);
            let live = o
                .gluster
                .as_ref()
                .ok()
                .and_then(|st| st.bricks.iter().find(|s| s.brick == brick));
            let online = live.map_or(b.online, |l| l.online);
            rows.push(vec![
                name.clone(),
                b.node.clone(),
                b.zone.clone().unwrap_or_else(|| "-".into()),
                brick,
                if online { "Y" } else { "N" }.into(),
                live.filter(|l| l.online)
                    .map_or("-".into(), |l| l.pid.to_string()),
                live.filter(|l| l.online && l.port > 0)
                    .map_or("-".into(), |l| l.port.to_string()),
                live.filter(|l| l.size_total_bytes > 0)
                    .map_or("-".into(), |l| {
                        table::usage(
                            (l.size_total_bytes - l.size_free_bytes.min(l.size_total_bytes)) as i64,
                            l.size_total_bytes as i64,
                        )
                    }),
                b.heal_pending.map_or("-".into(), |h| h.to_string()),
            ]);
        }
    }
    let mut out = table::render(
        &[
            "VOLUME",
            "NODE",
            "ZONE",
            "BRICK",
            "ONLINE",
            "PID",
            "PORT",
            "FILESYSTEM USED",
            "HEAL",
        ],
        &rows,
    );
    for n in notes {
        out.push_str(&format!("\n{n}\n"));
    }
    out
}

pub async fn run(scope: &Scope, volume: Option<&str>) -> Result<String, PluginError> {
    let volumes = match volume {
        Some(v) => vec![scope.volume(v).await?],
        None => scope.volumes().await?,
    };
    // One agent per cluster, asked for each of its volumes.
    let mut agents: BTreeMap<(String, String), Result<agent::Agent, String>> = BTreeMap::new();
    let mut observed = Vec::new();
    for v in volumes {
        let key = (v.namespace().unwrap_or_default(), v.spec.cluster.clone());
        if !agents.contains_key(&key) {
            let a = match scope.cluster(&key.0, &key.1).await {
                Ok(gc) => agent::pick(scope, &gc, None)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            agents.insert(key.clone(), a);
        }
        let gluster = match agents.get_mut(&key).expect("inserted above") {
            Ok(a) => a
                .client
                .volume_status(VolumeRequest {
                    name: gluster_name(&v),
                })
                .await
                .map(|r| r.into_inner())
                .map_err(|s| format!("the agent of {} answered: {}", a.node, s.message())),
            Err(e) => Err(e.clone()),
        };
        observed.push(Observed { volume: v, gluster });
    }
    Ok(render(&observed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::tests::volume;
    use gk_agent_proto::v1::BrickStatus;

    #[test]
    fn gluster_says_what_is_online_and_the_operator_fills_in() {
        let st = VolumeStatusResponse {
            bricks: vec![BrickStatus {
                brick: "h1:/bricks/gk-pool".into(),
                online: true,
                port: 49152,
                pid: 77,
                size_total_bytes: 4 << 30,
                size_free_bytes: 3 << 30,
                ..Default::default()
            }],
            ..Default::default()
        };
        let out = render(&[
            Observed {
                volume: volume("pool", "3/3", 0, true, None),
                gluster: Ok(st),
            },
            Observed {
                volume: volume("logs", "2/3", 2, true, None),
                gluster: Err("no agent".into()),
            },
        ]);
        assert!(out.contains("gk/pool   n1     a      h1:/bricks/gk-pool   Y        77    49152   1.0Gi/4.0Gi (25%)   0"), "{out}");
        // Gluster did not list h2's brick: the operator's status says online, nothing live.
        assert!(
            out.contains("gk/pool   n2     -      h2:/bricks/gk-pool   Y        -     -       -"),
            "{out}"
        );
        assert!(
            out.contains("gk/logs   n2     -      h2:/bricks/gk-logs   N"),
            "{out}"
        );
        assert!(
            out.contains("gk/logs: gluster's brick status is missing (no agent)"),
            "{out}"
        );
    }
}
