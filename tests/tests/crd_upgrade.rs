//! The operator's CRD upgrade against the real apiserver: `helm upgrade` leaves a chart's
//! `crds/` as first installed, so an operator replica, as it starts, brings CRDs an older
//! version wrote to its own (gk_operator::crd_upgrade). Here the shipped CRDs are first
//! replaced, as an older release would have left them, by copies that lack a spec field and
//! carry an older version; then by a newer version's, which must be left alone.

use gk_api::crd::{VERSION, VERSION_ANNOTATION};
use gk_operator::crd_upgrade::{upgrade, CrdError, Outcome};
use gk_testenv::k8s::ControlPlane;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::api::{Api, PostParams};

/// The schema of the served version's `spec`.
fn spec_schema(crd: &mut CustomResourceDefinition) -> Option<&mut JSONSchemaProps> {
    crd.spec.versions[0]
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
}

/// `crd` as another version would have written it: `version` in its annotation and one
/// optional spec field missing (the last, alphabetically, that the spec's CEL rules do not
/// name), which is returned.
fn written_by(
    mut crd: CustomResourceDefinition,
    version: &str,
) -> (CustomResourceDefinition, String) {
    crd.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(VERSION_ANNOTATION.to_string(), version.to_string());
    let spec = spec_schema(&mut crd).expect("a spec");
    let rules: String = spec
        .x_kubernetes_validations
        .iter()
        .flatten()
        .map(|r| r.rule.clone())
        .collect();
    let required = spec.required.clone().unwrap_or_default();
    let properties = spec.properties.as_mut().expect("a spec with properties");
    let field = properties
        .keys()
        .rfind(|k| !required.contains(k) && !rules.contains(&format!("self.{k}")))
        .expect("an optional field no rule names")
        .clone();
    properties.remove(&field);
    (crd, field)
}

/// Replaces the CRD in the cluster with `crd`, whole (as `kubectl replace` or a first
/// `helm install` would leave it: server-side apply by another manager would keep our fields).
async fn replace(api: &Api<CustomResourceDefinition>, mut crd: CustomResourceDefinition) {
    let name = crd.metadata.name.clone().unwrap();
    let current = api.get(&name).await.unwrap();
    crd.metadata.resource_version = current.metadata.resource_version;
    api.replace(&name, &PostParams::default(), &crd)
        .await
        .unwrap();
}

async fn state(api: &Api<CustomResourceDefinition>, name: &str, field: &str) -> (String, bool) {
    let mut crd = api.get(name).await.unwrap();
    let version = crd.metadata.annotations.clone().unwrap_or_default()[VERSION_ANNOTATION].clone();
    let has = spec_schema(&mut crd)
        .and_then(|s| s.properties.as_ref())
        .is_some_and(|p| p.contains_key(field));
    (version, has)
}

#[tokio::test]
async fn older_crds_are_upgraded_and_newer_ones_kept() {
    let cp = ControlPlane::ensure().unwrap();
    let admin = cp.client().await.unwrap();
    let ours = gk_api::crd::all();
    ControlPlane::install_crds(&admin, &ours).await.unwrap();
    let api: Api<CustomResourceDefinition> = Api::all(admin.clone());

    // An older release's CRDs: upgraded, the missing field back, our version recorded.
    let mut fields = Vec::new();
    for crd in &ours {
        let (older, field) = written_by(crd.clone(), "0.0.1");
        replace(&api, older).await;
        fields.push((crd.metadata.name.clone().unwrap(), field));
    }
    for (name, field) in &fields {
        assert_eq!(
            state(&api, name, field).await,
            ("0.0.1".to_string(), false),
            "{name} as an older release left it"
        );
    }
    let outcomes = upgrade(&admin, &ours).await.unwrap();
    for (name, field) in &fields {
        assert!(
            outcomes.contains(&Outcome::Upgraded {
                name: name.clone(),
                from: Some("0.0.1".into())
            }),
            "{outcomes:?}"
        );
        assert_eq!(
            state(&api, name, field).await,
            (VERSION.to_string(), true),
            "{name} upgraded, with {field} again"
        );
    }

    // A newer release's CRDs (say, before this operator was rolled back): left as they are.
    for crd in &ours {
        replace(&api, written_by(crd.clone(), "999.0.0").0).await;
    }
    let outcomes = upgrade(&admin, &ours).await.unwrap();
    for (name, field) in &fields {
        assert!(
            outcomes.contains(&Outcome::KeptNewer {
                name: name.clone(),
                found: "999.0.0".into()
            }),
            "{outcomes:?}"
        );
        assert_eq!(
            state(&api, name, field).await,
            ("999.0.0".to_string(), false),
            "{name} left as the newer release wrote it"
        );
    }

    // A CRD missing from the cluster is reported by name and not created.
    let mut ghost = ours[1].clone();
    ghost.metadata.name = Some("glusterghosts.glusterkube.dev".into());
    match upgrade(&admin, &[ghost]).await {
        Err(e @ CrdError::Missing { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("glusterghosts.glusterkube.dev") && text.contains("crds.yaml"),
                "{text}"
            );
        }
        other => panic!("a missing CRD must be reported as missing: {other:?}"),
    }
    assert!(api
        .get_opt("glusterghosts.glusterkube.dev")
        .await
        .unwrap()
        .is_none());

    // Leave the shipped CRDs for the tests that follow.
    for crd in &ours {
        replace(&api, crd.clone()).await;
    }
    let outcomes = upgrade(&admin, &ours).await.unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, Outcome::Upgraded { from: Some(v), .. } if v == VERSION)),
        "{outcomes:?}"
    );
}
