//! One file per subcommand. Each has a pure `render` (tested here) and a `run` that
//! gathers what it renders.

pub mod bricks;
pub mod heal;
pub mod logs;
pub mod pvs;
pub mod status;

use gk_api::crd::GlusterVolume;

/// The gluster volume a GlusterVolume made.
pub fn gluster_name(gv: &GlusterVolume) -> String {
    gv.status
        .as_ref()
        .and_then(|s| s.mount.as_ref())
        .map(|m| m.volume.clone())
        .unwrap_or_else(|| gv.gluster_name())
}

/// `-` for a missing value, as kubectl prints `<none>` sparingly.
pub(crate) fn or_dash(v: Option<impl ToString>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
pub(crate) mod tests {
    use gk_api::crd::{GlusterCluster, GlusterVolume};
    use serde_json::json;

    pub fn cluster(name: &str) -> GlusterCluster {
        serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": name, "namespace": "gk"},
            "spec": {"nodes": [
                {"name": "n1", "storage": {"directory": "/d"}},
                {"name": "n2", "storage": {"directory": "/d"}},
                {"name": "n3", "storage": {"directory": "/d"}}
            ]},
            "status": {
                "nodesSummary": "3/3", "bricksSummary": "3/3",
                "capacity": {"totalBytes": 3i64 << 30, "usedBytes": 1i64 << 30, "freeBytes": 2i64 << 30, "total": "3.0Gi"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "PoolFormed", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            }
        }))
        .expect("a GlusterCluster")
    }

    pub fn volume(
        name: &str,
        bricks: &str,
        heal: i64,
        ready: bool,
        degraded: Option<(&str, &str)>,
    ) -> GlusterVolume {
        let cond = |t: &str, s: bool, r: &str, m: &str| {
            json!({"type": t, "status": if s { "True" } else { "False" }, "reason": r, "message": m,
                   "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        let (d, dr, dm) = match degraded {
            Some((r, m)) => (true, r, m),
            None => (false, "Healthy", ""),
        };
        serde_json::from_value(json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": name, "namespace": "gk"},
            "spec": {"cluster": "c1", "type": "Replicate", "replica": 3},
            "status": {
                "bricksSummary": bricks, "healPending": heal, "splitBrain": 0,
                "capacity": {"totalBytes": 1i64 << 30, "usedBytes": 1i64 << 29, "freeBytes": 1i64 << 29, "total": "1.0Gi"},
                "mount": {"volume": format!("gk-{name}"), "volfileServer": "h1", "backupVolfileServers": [], "tls": true},
                "bricks": [
                    {"node": "n1", "zone": "a", "host": "h1", "path": format!("/bricks/gk-{name}"), "online": true, "healPending": heal},
                    {"node": "n2", "host": "h2", "path": format!("/bricks/gk-{name}"), "online": bricks == "3/3", "healPending": 0}
                ],
                "conditions": [cond("Ready", ready, "Serving", ""), cond("Degraded", d, dr, dm)]
            }
        }))
        .expect("a GlusterVolume")
    }
}
