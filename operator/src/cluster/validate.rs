//! What admission cannot check of a GlusterCluster spec: the brick pods' compute resources
//! (the CRD embeds Kubernetes' own type, over whose maps the apiserver cannot bound a rule's
//! cost). Refused here as InvalidSpec naming the field, before any object is made from it.

use std::collections::BTreeMap;

use gk_api::crd::GlusterClusterSpec;
use gk_api::units::quantity_value;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::plan::SpecError;

pub fn spec(spec: &GlusterClusterSpec) -> Result<(), SpecError> {
    let Some(r) = &spec.resources else {
        return Ok(());
    };
    let values = |field: &str, map: &Option<BTreeMap<String, Quantity>>| {
        map.iter()
            .flatten()
            .map(|(k, q)| {
                let at = format!("spec.resources.{field}.{k}");
                let v = quantity_value(&at, &q.0).map_err(|e| SpecError {
                    field: at.clone(),
                    reason: format!("{:?} is not a quantity such as 500m or 1Gi", e.value),
                })?;
                if v < 0.0 {
                    return Err(SpecError {
                        field: at,
                        reason: format!("{:?} is negative", q.0),
                    });
                }
                Ok((k.clone(), v))
            })
            .collect::<Result<BTreeMap<String, f64>, SpecError>>()
    };
    let requests = values("requests", &r.requests)?;
    let limits = values("limits", &r.limits)?;
    for (k, req) in &requests {
        if let Some(lim) = limits.get(k).filter(|lim| req > *lim) {
            return Err(SpecError {
                field: format!("spec.resources.requests.{k}"),
                reason: format!("the request ({req}) is above its limit ({lim})"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(resources: serde_json::Value) -> GlusterClusterSpec {
        serde_json::from_value(serde_json::json!({
            "nodes": [{"name": "a", "storage": {"directory": "/srv/g"}}],
            "resources": resources,
        }))
        .unwrap()
    }

    #[test]
    fn resources_a_pod_would_refuse_are_refused_naming_the_field() {
        spec(&with(
            serde_json::json!({"requests": {"cpu": "500m", "memory": "1Gi"},
                                      "limits": {"memory": "2Gi"}}),
        ))
        .unwrap();
        let e = spec(&with(serde_json::json!({"requests": {"cpu": "-1"}}))).unwrap_err();
        assert_eq!(e.field, "spec.resources.requests.cpu");
        assert!(e.reason.contains("negative"), "{e}");
        let e = spec(&with(serde_json::json!({"limits": {"memory": "lots"}}))).unwrap_err();
        assert_eq!(e.field, "spec.resources.limits.memory");
        let e = spec(&with(serde_json::json!({"requests": {"memory": "2Gi"},
                                              "limits": {"memory": "1Gi"}})))
        .unwrap_err();
        assert_eq!(e.field, "spec.resources.requests.memory");
        assert!(e.reason.contains("above its limit"), "{e}");
    }
}
