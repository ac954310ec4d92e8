//! Keeps the cluster's CRDs at this operator's version. `helm upgrade` never touches a chart's
//! `crds/` folder, so without this an upgraded operator would write status fields its old
//! CRDs prune away. Each replica, as it starts, server-side applies the CRDs it was built with
//! over those written by an older version, and leaves alone those a newer version wrote (a
//! rolled-back operator must not take fields away from objects a newer one wrote). It only
//! reads and patches the CRDs by name: one missing is reported, not created.

use gk_api::crd::VERSION_ANNOTATION;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// The field manager of the operator's CRD writes.
pub const FIELD_MANAGER: &str = "glusterkube-operator-crds";

/// What to do with one CRD found in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Written by an older version, by none we can read, or by this one: apply ours.
    Apply { found: Option<String> },
    /// Written by a newer version: keep it.
    KeepNewer { found: String },
}

/// What became of one CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Applied at this version; `from` is the version it carried before, if any.
    Upgraded { name: String, from: Option<String> },
    /// Left at the newer version it carries.
    KeptNewer { name: String, found: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error(
        "CustomResourceDefinition {name} does not exist; the operator only upgrades its CRDs: \
         apply deploy/crds/crds.yaml or reinstall the chart, which creates them"
    )]
    Missing { name: String },
    #[error(
        "could not {action} CustomResourceDefinition {name}: {source}; the operator needs get \
         and patch on it (the chart grants them while crds.maintain is true)"
    )]
    Api {
        action: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("this operator's version {0:?} is not a semantic version")]
    OwnVersion(String),
}

/// Whether the CRD `found` (its version annotation, if any) should be replaced by ours at
/// `ours`. An annotation that is no version counts as older: ours is the one we can vouch for.
pub fn decide(found: Option<&str>, ours: &semver::Version) -> Decision {
    match found.map(|f| (f, semver::Version::parse(f))) {
        Some((f, Ok(v))) if v > *ours => Decision::KeepNewer {
            found: f.to_string(),
        },
        other => Decision::Apply {
            found: other.map(|(f, _)| f.to_string()),
        },
    }
}

/// Upgrades each CRD of `crds` (each carrying its version in [`VERSION_ANNOTATION`]) found
/// in the cluster at an older version. Stops at the first that cannot be read or written.
pub async fn upgrade(
    client: &kube::Client,
    crds: &[CustomResourceDefinition],
) -> Result<Vec<Outcome>, CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut outcomes = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let ours = version_of(crd).unwrap_or_default();
        let ours = semver::Version::parse(&ours).map_err(|_| CrdError::OwnVersion(ours))?;
        let current = api
            .get_opt(&name)
            .await
            .map_err(|source| CrdError::Api {
                action: "read",
                name: name.clone(),
                source,
            })?
            .ok_or_else(|| CrdError::Missing { name: name.clone() })?;
        match decide(version_of(&current).as_deref(), &ours) {
            Decision::KeepNewer { found } => outcomes.push(Outcome::KeptNewer { name, found }),
            Decision::Apply { found } => {
                api.patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(crd),
                )
                .await
                .map_err(|source| CrdError::Api {
                    action: "patch",
                    name: name.clone(),
                    source,
                })?;
                outcomes.push(Outcome::Upgraded { name, from: found });
            }
        }
    }
    Ok(outcomes)
}

fn version_of(crd: &CustomResourceDefinition) -> Option<String> {
    crd.metadata
        .annotations
        .as_ref()?
        .get(VERSION_ANNOTATION)
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> semver::Version {
        semver::Version::parse(s).unwrap()
    }

    #[test]
    fn older_unknown_and_equal_versions_are_replaced() {
        let ours = v("0.2.0");
        for found in [
            None,
            Some("0.1.0"),
            Some("0.2.0"),
            Some("0.2.0-rc.1"),
            Some("junk"),
        ] {
            assert_eq!(
                decide(found, &ours),
                Decision::Apply {
                    found: found.map(str::to_string)
                },
                "{found:?}"
            );
        }
    }

    #[test]
    fn a_newer_version_is_kept() {
        for found in ["0.2.1", "1.0.0", "0.3.0-rc.1"] {
            assert_eq!(
                decide(Some(found), &v("0.2.0")),
                Decision::KeepNewer {
                    found: found.to_string()
                }
            );
        }
    }

    #[test]
    fn every_crd_we_ship_names_this_version() {
        for crd in gk_api::crd::all() {
            assert_eq!(
                version_of(&crd).as_deref(),
                Some(gk_api::crd::VERSION),
                "{:?}",
                crd.metadata.name
            );
        }
    }
}
