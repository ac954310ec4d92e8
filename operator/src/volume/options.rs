//! A volume's options: its profile, then its own options over them, then the access control
//! the operator sets from the GlusterCluster (see `tls::access`), which a volume's own options
//! may not name. Refusals are reported, not dropped.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use gk_agent_proto::v1::{RejectedOption, VolumeSetRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume, ResizeStatus};
use kube::ResourceExt;

use super::record::set_status;
use super::status;
use crate::context::Context;
use crate::plan::{self, SpecError};
use crate::tls::access;
use crate::{Error, Waiting};

/// The volume's own options as gluster's CLI takes them: what admission cannot decide (a
/// value starting with `--`, which gluster would read as a flag, say) is refused here, naming
/// the option; so are the options the operator decides (how PVs are sized) and one that would
/// hang writers (trickling writes off).
pub fn validate_own(gv: &GlusterVolume) -> Result<(), SpecError> {
    for (k, v) in &gv.spec.options {
        let checked =
            gk_gluster::validate_option_key(k).and_then(|()| gk_gluster::validate_option_value(v));
        if let Err(e) = checked {
            return Err(SpecError {
                field: format!("spec.options.{k}"),
                reason: e.to_string(),
            });
        }
    }
    if gv
        .spec
        .options
        .contains_key(gk_agent_proto::pv_quota::OPTION)
    {
        return Err(SpecError {
            field: format!("spec.options.{}", gk_agent_proto::pv_quota::OPTION),
            reason: "how PVs are sized (the bricks' project quotas or gluster's quota) is \
                     decided by the operator from the bricks' disks and shown in \
                     status.pvQuota; remove this option"
                .into(),
        });
    }
    let trickling = gv.spec.options.get(plan::profiles::TRICKLING_WRITES);
    if trickling.is_some_and(|v| gk_gluster::parse_bool(v) == Some(false)) {
        return Err(SpecError {
            field: format!("spec.options.{}", plan::profiles::TRICKLING_WRITES),
            reason: "with trickling writes off, gluster 10.3's write-behind holds a write for \
                     ever once the bricks refused an earlier one (a full PV), and the writer \
                     cannot be killed; remove this option (the Database profile's write-back \
                     cache gathers small writes instead)"
                .into(),
        });
    }
    Ok(())
}

/// The access-control options of `gv`'s volume on cluster `gc`.
pub fn access(gv: &GlusterVolume, gc: &GlusterCluster) -> Result<Vec<(String, String)>, SpecError> {
    validate_own(gv)?;
    if let Some(k) = gv.spec.options.keys().find(|k| access::is_access_option(k)) {
        return Err(SpecError {
            field: format!("spec.options.{k}"),
            reason: "access control (TLS, auth.allow, auth.ssl-allow) is set by the operator \
                     from the GlusterCluster's tls and clientNetworks; remove this option"
                .into(),
        });
    }
    let allowed = access::cluster_access(
        gc.spec.tls.enabled,
        &gc.uid().unwrap_or_default(),
        &gc.spec.client_networks,
    );
    access::volume_options(&allowed).map_err(|e| SpecError {
        field: format!("GlusterCluster {}: spec.{}", gc.name_any(), e.field),
        reason: e.reason,
    })
}

/// What `cluster.lookup-optimize` is to be set to on `gv`'s volume, whose latest resize is
/// `resize` (see [`plan::settle`]).
pub fn lookups(gv: &GlusterVolume, resize: Option<&ResizeStatus>) -> String {
    let own = gv.spec.options.get(plan::LOOKUP_OPTIMIZE);
    plan::lookup_optimize(resize, own.map(String::as_str))
}

/// Every option `gv`'s volume is to have, decided in one place: its profile's, its own over
/// them, `cluster.lookup-optimize` as the latest resize allows (`lookups`), how its PVs are
/// sized when that was decided now (`pv_quota`), and last the access control from the cluster
/// (`access`), which its own options may not name (see [`access`]).
pub fn desired(
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    access: Vec<(String, String)>,
    lookups: String,
    pv_quota: Option<&str>,
) -> Result<BTreeMap<String, String>, SpecError> {
    let profile = plan::profile_of(&gv.spec, &gc.spec);
    let mut options = plan::options(profile, plan::layout(&gv.spec)?, &gv.spec.options);
    options.insert(plan::LOOKUP_OPTIMIZE.into(), lookups);
    if let Some(mode) = pv_quota {
        options.insert(gk_agent_proto::pv_quota::OPTION.into(), mode.into());
    }
    options.extend(access);
    Ok(options)
}

/// What setting a volume's options left: the options gluster refused, and the volume as
/// gluster describes it afterwards.
pub struct Applied {
    pub rejected: Vec<RejectedOption>,
    pub volume: gk_agent_proto::v1::Volume,
}

/// How long setting options may take before status is written without them. The agent
/// sets them behind any other gluster operation on the volume, and one waiting on a node
/// that dropped off the network can take minutes: status must say Degraded meanwhile.
const SET_WAIT: Duration = Duration::from_secs(15);

/// The options of `want` that `have` does not carry yet, each with why: setting them did
/// not finish within [`SET_WAIT`] on `node`'s agent.
fn not_set_in_time(
    want: &BTreeMap<String, String>,
    have: &HashMap<String, String>,
    node: &str,
) -> Vec<RejectedOption> {
    want.iter()
        .filter(|(k, v)| have.get(*k) != Some(*v))
        .map(|(k, v)| RejectedOption {
            key: k.clone(),
            value: v.clone(),
            reason: format!(
                "not set yet: the brick agent on {node} did not finish setting options within \
                 {}s (another gluster operation on the volume, or a node that dropped off the \
                 network, holds it); tried again at the next refresh",
                SET_WAIT.as_secs()
            ),
        })
        .collect()
}

/// Sets every option of the volume; returns those gluster refused and the volume as gluster
/// describes it afterwards (status reads it from there, not with another CLI run). A
/// refused access option keeps the volume from being Ready (it might admit clients it
/// should refuse). Options not set within [`SET_WAIT`] are reported as not set, and the
/// volume is read without them. `lookups` is what `cluster.lookup-optimize` is set to (see
/// [`lookups`]). `pv_quota` is the enforcement to record, when it was decided now
/// ([`plan::pv_quota`]).
#[allow(clippy::too_many_arguments)]
pub async fn apply(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    name: &str,
    anchor: &mut NodeAgent,
    access: Vec<(String, String)>,
    lookups: String,
    pv_quota: Option<&'static str>,
) -> Result<Applied, Error> {
    let options = desired(gv, gc, access, lookups, pv_quota)?;
    let asked = anchor.client.volume_set(VolumeSetRequest {
        name: name.to_string(),
        options: options.clone().into_iter().collect(),
    });
    let set = match tokio::time::timeout(SET_WAIT, asked).await {
        Ok(answer) => answer
            .map_err(|s| Error::agent(&anchor.node, s))?
            .into_inner(),
        Err(_) => {
            tracing::warn!(volume = %name, node = %anchor.node, "setting options did not finish in time; status is written without them");
            let volume = super::lookup::info(anchor, name).await?.ok_or_else(|| {
                Waiting::VolumeVanished {
                    volume: name.to_string(),
                }
            })?;
            gk_agent_proto::v1::VolumeSetResponse {
                rejected: not_set_in_time(&options, &volume.options, &anchor.node),
                volume: Some(volume),
            }
        }
    };
    if let Some(r) = set
        .rejected
        .iter()
        .find(|r| access::is_access_option(&r.key))
    {
        let wait = Waiting::AccessRefused {
            key: r.key.clone(),
            value: r.value.clone(),
            reason: r.reason.clone(),
        };
        let keep = gv.status.clone().unwrap_or_default();
        set_status(
            ctx,
            gv,
            keep,
            &status::access_not_enforced(wait.to_string()),
        )
        .await?;
        return Err(wait.into());
    }
    let volume = set.volume.ok_or_else(|| Waiting::VolumeVanished {
        volume: name.to_string(),
    })?;
    Ok(Applied {
        rejected: set.rejected,
        volume,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_not_set_in_time_are_named_with_the_node() {
        let want = BTreeMap::from([
            ("server.ssl".to_string(), "on".to_string()),
            ("network.ping-timeout".to_string(), "5".to_string()),
            ("client.keepalive-time".to_string(), "1".to_string()),
        ]);
        let have = HashMap::from([
            ("server.ssl".to_string(), "on".to_string()),
            ("network.ping-timeout".to_string(), "42".to_string()),
        ]);
        let pending = not_set_in_time(&want, &have, "gk-node-1");
        let keys: Vec<_> = pending
            .iter()
            .map(|r| (r.key.as_str(), r.value.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("client.keepalive-time", "1"),
                ("network.ping-timeout", "5")
            ]
        );
        assert!(
            pending[0].reason.contains("gk-node-1") && !pending[0].reason.contains("  "),
            "{}",
            pending[0].reason
        );
        assert!(not_set_in_time(&want, &want.clone().into_iter().collect(), "n").is_empty());
    }

    #[test]
    fn the_full_option_set_layers_profile_own_lookups_pv_quota_and_access() {
        let gc: GlusterCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": "c1", "namespace": "storage", "uid": "u-1"},
            "spec": {"nodes": [{"name": "a", "storage": {"directory": "/srv/g"}}]},
        }))
        .unwrap();
        let gv: GlusterVolume = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
            "metadata": {"name": "v", "namespace": "storage"},
            "spec": {"cluster": "c1", "type": "Replicate", "replica": 3,
                     "options": {"network.ping-timeout": "7"}},
        }))
        .unwrap();
        let access = access(&gv, &gc).unwrap();
        let all = desired(&gv, &gc, access.clone(), "off".into(), Some("project")).unwrap();
        // The profile's options are there, the volume's own over them.
        let profile_only = desired(&gv, &gc, vec![], "off".into(), None).unwrap();
        assert!(profile_only.len() > 3, "{profile_only:?}");
        assert_eq!(all["network.ping-timeout"], "7");
        assert_eq!(all[plan::LOOKUP_OPTIMIZE], "off");
        assert_eq!(all[gk_agent_proto::pv_quota::OPTION], "project");
        assert!(!profile_only.contains_key(gk_agent_proto::pv_quota::OPTION));
        for (k, v) in &access {
            assert_eq!(&all[k], v, "{k}");
        }
        assert_eq!(all["server.ssl"], "on");
        // A volume of an unknown layout is refused, naming the field.
        let mut bad = gv.clone();
        bad.spec.replica = None;
        let e = desired(&bad, &gc, vec![], "off".into(), None).unwrap_err();
        assert_eq!(e.field, "spec.replica");
    }

    #[test]
    fn access_options_come_from_the_cluster_and_cannot_be_overridden() {
        let gc: GlusterCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterCluster",
            "metadata": {"name": "c1", "namespace": "storage", "uid": "u-1"},
            "spec": {"nodes": [{"name": "a", "storage": {"directory": "/srv/g"}}]},
        }))
        .unwrap();
        let gv = |options: serde_json::Value| -> GlusterVolume {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "glusterkube.dev/v1alpha1", "kind": "GlusterVolume",
                "metadata": {"name": "v", "namespace": "storage"},
                "spec": {"cluster": "c1", "type": "Distribute", "options": options},
            }))
            .unwrap()
        };
        let tls = access(&gv(serde_json::json!({})), &gc).unwrap();
        assert!(tls.contains(&("auth.ssl-allow".into(), "gk-csi-node,gk-node-u-1".into())));
        assert!(tls.contains(&("server.ssl".into(), "on".into())));

        let e = access(&gv(serde_json::json!({"auth.allow": "*"})), &gc).unwrap_err();
        assert_eq!(e.field, "spec.options.auth.allow");
        let e = access(
            &gv(serde_json::json!({"performance.cache-size": "--64MB"})),
            &gc,
        )
        .unwrap_err();
        assert_eq!(e.field, "spec.options.performance.cache-size");
        assert!(e.reason.contains("flag"), "{}", e.reason);
        // Trickling writes off would hold a writer for ever once its PV is full.
        for v in ["off", "Disable", "0"] {
            let e = access(
                &gv(serde_json::json!({"performance.write-behind-trickling-writes": v})),
                &gc,
            )
            .unwrap_err();
            assert_eq!(
                e.field,
                "spec.options.performance.write-behind-trickling-writes"
            );
            assert!(e.reason.contains("remove this option"), "{}", e.reason);
        }
        let on = gv(serde_json::json!({"performance.write-behind-trickling-writes": "on"}));
        assert!(access(&on, &gc).is_ok());
        let e = access(
            &gv(serde_json::json!({"user.glusterkube.pv-quota": "gluster"})),
            &gc,
        )
        .unwrap_err();
        assert!(!e.reason.contains("  "), "{}", e.reason);

        let mut plain = gc.clone();
        plain.spec.tls.enabled = false;
        let e = access(&gv(serde_json::json!({})), &plain).unwrap_err();
        assert_eq!(e.field, "GlusterCluster c1: spec.clientNetworks");
        plain.spec.client_networks = vec!["10.244.0.0/16".into()];
        assert_eq!(
            access(&gv(serde_json::json!({})), &plain).unwrap(),
            [("auth.allow".to_string(), "10.244.*.*".to_string())]
        );
    }
}
