//! A volume's options: its profile, then its own options over them, then the access control
//! the operator sets from the GlusterCluster (see `tls::access`), which a volume's own options
//! may not name. Refusals are reported, not dropped.

use gk_agent::proto::{RejectedOption, VolumeSetRequest};
use gk_api::agents::NodeAgent;
use gk_api::crd::{GlusterCluster, GlusterVolume};
use kube::ResourceExt;

use super::record::set_status;
use super::status;
use crate::context::Context;
use crate::plan::{self, SpecError};
use crate::tls::access;
use crate::Error;

/// The volume's own options as gluster's CLI takes them: what admission cannot decide (a
/// value starting with `--`, which gluster would read as a flag, say) is refused here, naming
/// the option.
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

/// What setting a volume's options left: the options gluster refused, and the volume as
/// gluster describes it afterwards.
pub struct Applied {
    pub rejected: Vec<RejectedOption>,
    pub volume: gk_agent::proto::Volume,
}

/// Sets every option of the volume; returns those gluster refused and the volume as gluster
/// describes it afterwards (status reads it from there, not with another CLI run). A
/// refused access option keeps the volume from being Ready (it might admit clients it
/// should refuse).
pub async fn apply(
    ctx: &Context,
    gv: &GlusterVolume,
    gc: &GlusterCluster,
    name: &str,
    anchor: &mut NodeAgent,
    access: Vec<(String, String)>,
) -> Result<Applied, Error> {
    let profile = plan::profile_of(&gv.spec, &gc.spec);
    let mut options = plan::options(profile, plan::layout(&gv.spec)?, &gv.spec.options);
    options.extend(access);
    let set = anchor
        .client
        .volume_set(VolumeSetRequest {
            name: name.to_string(),
            options: options.into_iter().collect(),
        })
        .await
        .map_err(|s| Error::agent(&anchor.node, s))?
        .into_inner();
    if let Some(r) = set
        .rejected
        .iter()
        .find(|r| access::is_access_option(&r.key))
    {
        let msg = format!(
            "gluster refused the access option {}={}: {}; until it is set the volume may be \
             mountable by clients it should refuse. Check the GlusterCluster's tls and \
             clientNetworks",
            r.key, r.value, r.reason
        );
        let keep = gv.status.clone().unwrap_or_default();
        set_status(ctx, gv, keep, &status::access_not_enforced(msg.clone())).await?;
        return Err(Error::NotReady(msg));
    }
    let volume = set
        .volume
        .ok_or_else(|| Error::NotReady(format!("volume {name} vanished")))?;
    Ok(Applied {
        rejected: set.rejected,
        volume,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
