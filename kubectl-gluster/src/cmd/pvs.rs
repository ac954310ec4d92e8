//! `kubectl gluster pvs POOL`: the subdirectory PVs of a pool volume with their limit and
//! usage (read by the agent from the directories themselves), and the directories with a
//! limit that no PV names any more (left by a Retain PV whose object was deleted, say).

use std::collections::BTreeMap;

use gk_agent_proto::v1::{QuotaEntry, VolumeRequest};
use gk_api::volume_id::{PoolKey, VolumeId};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::ResourceExt;

use super::gluster_name;
use crate::cluster::Scope;
use crate::{agent, table, PluginError};

/// A PV of this pool: its name, claim, phase and directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolPv {
    pub name: String,
    pub claim: String,
    pub phase: String,
    pub dir: String,
}

/// The PVs whose volume ID is a subdirectory of the pool `namespace/pool`.
pub fn pool_pvs(pvs: &[PersistentVolume], namespace: &str, pool: &str) -> Vec<PoolPv> {
    let mut out: Vec<PoolPv> = pvs
        .iter()
        .filter_map(|pv| {
            let handle = &pv.spec.as_ref()?.csi.as_ref()?.volume_handle;
            match VolumeId::parse(handle).ok()? {
                VolumeId::Subdir {
                    pool: PoolKey::Volume(p),
                    dir,
                } if p.namespace == namespace && p.name == pool => Some(PoolPv {
                    name: pv.name_any(),
                    claim: pv
                        .spec
                        .as_ref()
                        .and_then(|s| s.claim_ref.as_ref())
                        .map(|c| {
                            format!(
                                "{}/{}",
                                c.namespace.clone().unwrap_or_default(),
                                c.name.clone().unwrap_or_default()
                            )
                        })
                        .unwrap_or_else(|| "-".into()),
                    phase: pv
                        .status
                        .as_ref()
                        .and_then(|s| s.phase.clone())
                        .unwrap_or_else(|| "-".into()),
                    dir,
                }),
                _ => None,
            }
        })
        .collect();
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    out
}

/// One row per PV (MISSING when its directory is gone), then the orphaned directories.
pub fn render(pvs: &[PoolPv], dirs: &[QuotaEntry]) -> String {
    let by_dir: BTreeMap<&str, &QuotaEntry> = dirs
        .iter()
        .map(|d| (d.path.trim_start_matches('/'), d))
        .collect();
    let usage = |d: &QuotaEntry| {
        (
            table::bytes(d.hard_limit_bytes as i64),
            table::usage(d.used_bytes as i64, d.hard_limit_bytes as i64),
        )
    };
    let mut rows = Vec::new();
    for pv in pvs {
        let (limit, used, state) = match by_dir.get(pv.dir.as_str()) {
            Some(d) => {
                let (l, u) = usage(d);
                let state = if d.hard_limit_exceeded {
                    "Full"
                } else if d.soft_limit_exceeded {
                    "NearlyFull"
                } else {
                    "OK"
                };
                (l, u, state)
            }
            None => ("-".into(), "-".into(), "Missing"),
        };
        rows.push(vec![
            pv.dir.clone(),
            pv.name.clone(),
            pv.claim.clone(),
            pv.phase.clone(),
            limit,
            used,
            state.into(),
        ]);
    }
    let named: Vec<&str> = pvs.iter().map(|p| p.dir.as_str()).collect();
    let mut orphans = 0;
    for (dir, d) in &by_dir {
        if named.contains(dir) {
            continue;
        }
        orphans += 1;
        let (l, u) = usage(d);
        rows.push(vec![
            dir.to_string(),
            "-".into(),
            "-".into(),
            "-".into(),
            l,
            u,
            "Orphaned".into(),
        ]);
    }
    let mut out = table::render(
        &[
            "DIRECTORY",
            "PV",
            "CLAIM",
            "PV STATUS",
            "LIMIT",
            "USED",
            "STATE",
        ],
        &rows,
    );
    if orphans > 0 {
        let (n, verb) = if orphans == 1 {
            ("directory", "is")
        } else {
            ("directories", "are")
        };
        out.push_str(&format!(
            "\n{orphans} {n} with a limit {verb} named by no PV: the data stays until removed \
             (see docs/troubleshooting.md, Directories no PV names)\n"
        ));
    }
    if rows.iter().any(|r| r[6] == "Missing") {
        out.push_str(
            "\nMissing: the PV names a directory the pool does not have (or that lost its limit)\n",
        );
    }
    out
}

pub async fn run(scope: &Scope, pool: &str) -> Result<String, PluginError> {
    let gv = scope.volume(pool).await?;
    let ns = gv.namespace().unwrap_or_default();
    let gc = scope.cluster(&ns, &gv.spec.cluster).await?;
    let pvs = pool_pvs(&scope.driver_pvs().await?, &ns, &gv.name_any());
    let mut a = agent::pick(scope, &gc, None).await?;
    let dirs = a
        .client
        .subdir_list(VolumeRequest {
            name: gluster_name(&gv),
        })
        .await
        .map_err(PluginError::agent(&a.node, "SubdirList"))?
        .into_inner()
        .entries;
    Ok(render(&pvs, &dirs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pv(name: &str, handle: &str, driver: &str) -> PersistentVolume {
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"csi": {"driver": driver, "volumeHandle": handle},
                     "claimRef": {"namespace": "app", "name": format!("claim-{name}")}},
            "status": {"phase": "Bound"}
        }))
        .unwrap()
    }

    fn dir(path: &str, limit: u64, used: u64) -> QuotaEntry {
        QuotaEntry {
            path: path.into(),
            hard_limit_bytes: limit,
            used_bytes: used,
            ..Default::default()
        }
    }

    #[test]
    fn only_this_pools_subdirectories_count() {
        let d = gk_api::volume_id::DRIVER_NAME;
        let pvs = [
            pv("pv-b", "subdir/gk/pool/b", d),
            pv("pv-a", "subdir/gk/pool/a", d),
            pv("other-pool", "subdir/gk/logs/a", d),
            pv("other-ns", "subdir/x/pool/a", d),
            pv("dedicated", "dedicated/gk/pool", d),
            pv("garbage", "not-an-id", d),
        ];
        let got = pool_pvs(&pvs, "gk", "pool");
        assert_eq!(
            got.iter()
                .map(|p| (p.name.as_str(), p.dir.as_str()))
                .collect::<Vec<_>>(),
            [("pv-a", "a"), ("pv-b", "b")]
        );
        assert_eq!(got[0].claim, "app/claim-pv-a");
        assert_eq!(got[0].phase, "Bound");
    }

    #[test]
    fn usage_missing_and_orphaned() {
        let pvs = [
            PoolPv {
                name: "pv-a".into(),
                claim: "app/a".into(),
                phase: "Bound".into(),
                dir: "a".into(),
            },
            PoolPv {
                name: "pv-gone".into(),
                claim: "app/g".into(),
                phase: "Released".into(),
                dir: "gone".into(),
            },
        ];
        let mut full = dir("/full", 1 << 20, 1 << 20);
        full.hard_limit_exceeded = true;
        let out = render(&pvs, &[dir("/a", 1 << 30, 1 << 28), full]);
        assert!(
            out.contains(
                "a           pv-a      app/a   Bound       1.0Gi   256.0Mi/1.0Gi (25%)   OK"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "gone        pv-gone   app/g   Released    -       -                     Missing"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "full        -         -       -           1.0Mi   1.0Mi/1.0Mi (100%)    Orphaned"
            ),
            "{out}"
        );
        assert!(
            out.contains("1 directory with a limit is named by no PV"),
            "{out}"
        );
    }
}
