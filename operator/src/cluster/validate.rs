//! What admission cannot check of a GlusterCluster spec: the brick pods' compute resources
//! (the CRD embeds Kubernetes' own type, over whose maps the apiserver cannot bound a rule's
//! cost) and the system directories and control characters of the storage lists (regular
//! expressions over every entry of every node cost more than the apiserver's budget). Refused
//! here as InvalidSpec naming the field, before any object is made from it.

use std::collections::BTreeMap;

use gk_api::crd::GlusterClusterSpec;
use gk_api::units::quantity_value;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::plan::SpecError;

/// Directories that hold the node's system or another program's state: a disk there would
/// mix bricks with them.
const SYSTEM_DIRECTORIES: &[&str] = &[
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/var/run",
    "/var/lib/kubelet",
    "/var/lib/glusterd",
    "/var/lib/containerd",
    "/var/lib/docker",
];
/// Directories that may hold a disk below them, but not be one.
const SYSTEM_PARENTS: &[&str] = &[
    "/var", "/var/lib", "/var/log", "/root", "/home", "/tmp", "/opt", "/srv", "/mnt", "/media",
];

fn storage_lists(spec: &GlusterClusterSpec) -> Result<(), SpecError> {
    for (i, node) in spec.nodes.iter().enumerate() {
        let s = &node.storage;
        let entries =
            s.devices
                .iter()
                .enumerate()
                .map(|(j, d)| (format!("spec.nodes[{i}].storage.devices[{j}]"), d, false))
                .chain(
                    s.directories.iter().enumerate().map(|(j, d)| {
                        (format!("spec.nodes[{i}].storage.directories[{j}]"), d, true)
                    }),
                )
                .chain(
                    s.state_directory
                        .iter()
                        .map(|d| (format!("spec.nodes[{i}].storage.stateDirectory"), d, true)),
                );
        for (field, path, directory) in entries {
            if path.chars().any(char::is_control) {
                return Err(SpecError {
                    field,
                    reason: format!("{path:?} holds a control character"),
                });
            }
            if !directory {
                continue;
            }
            let trimmed = path.trim_end_matches('/');
            let under = |root: &&str| {
                trimmed
                    .strip_prefix(root)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            };
            if SYSTEM_DIRECTORIES.iter().any(under) || SYSTEM_PARENTS.contains(&trimmed) {
                return Err(SpecError {
                    field,
                    reason: format!(
                        "{path} is a system directory or lies under one; use a directory of \
                         its own such as /var/lib/glusterkube/disk1 or a mounted XFS filesystem"
                    ),
                });
            }
        }
    }
    Ok(())
}

pub fn spec(spec: &GlusterClusterSpec) -> Result<(), SpecError> {
    storage_lists(spec)?;
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
    fn storage_lists_refuse_system_directories_and_control_characters_naming_the_entry() {
        let with = |storage: serde_json::Value| -> GlusterClusterSpec {
            serde_json::from_value(serde_json::json!({
                "nodes": [{"name": "a", "storage": {"directory": "/srv/g"}},
                          {"name": "b", "storage": storage}],
            }))
            .unwrap()
        };
        spec(&with(
            serde_json::json!({"directories": ["/data/d1", "/srv/d2", "/var/lib/glusterkube/d3"],
                                      "stateDirectory": "/var/lib/glusterkube/state"}),
        ))
        .unwrap();
        spec(&with(
            serde_json::json!({"devices": ["/dev/sdb", "/dev/disk/by-id/ata-*"]}),
        ))
        .unwrap();
        for (storage, field) in [
            (
                serde_json::json!({"directories": ["/data/d1", "/var/lib/kubelet/pods"]}),
                "spec.nodes[1].storage.directories[1]",
            ),
            (
                serde_json::json!({"directories": ["/srv/"]}),
                "spec.nodes[1].storage.directories[0]",
            ),
            (
                serde_json::json!({"directories": ["/etc"]}),
                "spec.nodes[1].storage.directories[0]",
            ),
            (
                serde_json::json!({"devices": ["/dev/sd\tb"]}),
                "spec.nodes[1].storage.devices[0]",
            ),
            (
                serde_json::json!({"devices": ["/dev/sdb"], "stateDirectory": "/proc/1"}),
                "spec.nodes[1].storage.stateDirectory",
            ),
        ] {
            let e = spec(&with(storage.clone())).unwrap_err();
            assert_eq!(e.field, field, "{storage}");
        }
        // /etcd is not /etc.
        spec(&with(serde_json::json!({"directories": ["/etcd/disk"]}))).unwrap();
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
