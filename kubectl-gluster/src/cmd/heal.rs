//! `kubectl gluster heal VOLUME`: per brick, what self-heal still has to do and what is in
//! split-brain, with the entries' paths, from gluster itself (the agent's HealEntries).

use gk_agent_proto::v1::{HealEntriesRequest, HealEntriesResponse};
use gk_api::crd::GlusterVolume;
use kube::ResourceExt;

use super::gluster_name;
use crate::cluster::Scope;
use crate::{agent, table, PluginError};

/// The brick table, then each brick's entries. `nodes` names the node of each brick host.
pub fn render(volume: &str, r: &HealEntriesResponse, nodes: &dyn Fn(&str) -> String) -> String {
    let rows: Vec<Vec<String>> = r
        .bricks
        .iter()
        .map(|b| {
            let (pending, split) = if b.connected {
                (b.pending_count.to_string(), b.split_brain_count.to_string())
            } else {
                ("-".into(), "-".into())
            };
            let host = b.brick.split_once(':').map_or("", |(h, _)| h);
            vec![
                b.brick.clone(),
                nodes(host),
                b.status.clone(),
                pending,
                split,
            ]
        })
        .collect();
    let mut out = table::render(
        &["BRICK", "NODE", "STATUS", "PENDING", "SPLIT-BRAIN"],
        &rows,
    );
    let section = |out: &mut String, what: &str, brick: &str, count: u64, entries: &[String]| {
        if count == 0 && entries.is_empty() {
            return;
        }
        let listed = if (entries.len() as u64) < count {
            format!(", {} listed", entries.len())
        } else {
            String::new()
        };
        out.push_str(&format!("\n{what} on {brick} ({count}{listed}):\n"));
        for e in entries {
            out.push_str(&format!("  {e}\n"));
        }
    };
    for b in &r.bricks {
        section(
            &mut out,
            "Pending heal",
            &b.brick,
            b.pending_count,
            &b.pending,
        );
    }
    let mut split = false;
    for b in &r.bricks {
        split |= b.split_brain_count > 0;
        section(
            &mut out,
            "Split-brain",
            &b.brick,
            b.split_brain_count,
            &b.split_brain,
        );
    }
    if split {
        out.push_str(&format!(
            "\nSplit-brain entries need a choice of copy: see `gluster volume heal {volume} \
             split-brain` (docs/troubleshooting.md, Split-brain)\n"
        ));
    }
    if r.bricks.iter().any(|b| !b.connected) {
        out.push_str("\nBricks gluster could not examine are not counted; `kubectl gluster bricks` shows which are offline\n");
    }
    out
}

pub async fn run(scope: &Scope, volume: &str, limit: u32) -> Result<String, PluginError> {
    let gv = scope.volume(volume).await?;
    let gc = scope
        .cluster(&gv.namespace().unwrap_or_default(), &gv.spec.cluster)
        .await?;
    let mut a = agent::pick(scope, &gc, None).await?;
    let name = gluster_name(&gv);
    let r = a
        .client
        .heal_entries(HealEntriesRequest {
            name: name.clone(),
            limit,
        })
        .await
        .map_err(PluginError::agent(&a.node, "HealEntries"))?
        .into_inner();
    Ok(render(&name, &r, &|host| node_of(&gv, host)))
}

/// The storage node of a brick host, from the volume's status.
pub(crate) fn node_of(gv: &GlusterVolume, host: &str) -> String {
    gv.status
        .iter()
        .flat_map(|s| &s.bricks)
        .find(|b| b.host == host)
        .map(|b| b.node.clone())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_agent_proto::v1::BrickHealEntries;

    #[test]
    fn entries_under_their_brick_and_a_hint_for_split_brain() {
        let r = HealEntriesResponse {
            bricks: vec![
                BrickHealEntries {
                    brick: "h1:/b/v".into(),
                    status: "Connected".into(),
                    connected: true,
                    pending_count: 3,
                    pending: vec!["/d1/a".into(), "/d1/b".into()],
                    split_brain_count: 1,
                    split_brain: vec!["/d1/sb".into()],
                },
                BrickHealEntries {
                    brick: "h2:/b/v".into(),
                    status: "Transport endpoint is not connected".into(),
                    ..Default::default()
                },
            ],
        };
        let out = render("gk-pool", &r, &|h| {
            if h == "h1" {
                "n1".into()
            } else {
                "-".into()
            }
        });
        assert!(out.starts_with("BRICK     NODE   STATUS"), "{out}");
        assert!(
            out.contains("h1:/b/v   n1     Connected                             3         1"),
            "{out}"
        );
        assert!(
            out.contains("h2:/b/v   -      Transport endpoint is not connected   -         -"),
            "{out}"
        );
        assert!(
            out.contains("Pending heal on h1:/b/v (3, 2 listed):\n  /d1/a\n  /d1/b\n"),
            "{out}"
        );
        assert!(
            out.contains("Split-brain on h1:/b/v (1):\n  /d1/sb\n"),
            "{out}"
        );
        assert!(
            out.contains("gluster volume heal gk-pool split-brain"),
            "{out}"
        );
        assert!(out.contains("could not examine"), "{out}");
    }

    #[test]
    fn nothing_to_heal_is_only_the_table() {
        let r = HealEntriesResponse {
            bricks: vec![BrickHealEntries {
                brick: "h1:/b/v".into(),
                status: "Connected".into(),
                connected: true,
                ..Default::default()
            }],
        };
        assert_eq!(render("v", &r, &|_| "n1".into()).lines().count(), 2);
    }
}
