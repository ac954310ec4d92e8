//! Custom resource definitions, in the `glusterkube.dev` API group.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResourceExt, KubeSchema};
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "glusterkube.dev";

mod cluster;
mod volume;

pub use cluster::*;
pub use volume::*;

/// A named set of gluster volume options (and, for some, FUSE mount options), each chosen
/// for a reason measured in docs/benchmarks/datapath.md; docs/profiles.md lists them.
#[derive(
    schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq,
)]
pub enum TuningProfile {
    /// For any workload, shared (ReadWriteMany) or not: never slower than a volume made by
    /// hand with gluster's defaults on the measured workloads.
    #[default]
    Tuned,
    /// Gluster's own defaults, nothing set.
    GlusterDefaults,
    /// Databases and other single writers on ReadWriteOnce volumes: small writes are
    /// gathered before they go to the bricks, and on a volume published to one node only the
    /// kernel's page cache holds writes until fsync.
    Database,
}

impl TuningProfile {
    pub const ALL: [TuningProfile; 3] = [
        TuningProfile::Tuned,
        TuningProfile::GlusterDefaults,
        TuningProfile::Database,
    ];

    /// The name as written in specs and StorageClass parameters.
    pub fn name(self) -> &'static str {
        match self {
            TuningProfile::Tuned => "Tuned",
            TuningProfile::GlusterDefaults => "GlusterDefaults",
            TuningProfile::Database => "Database",
        }
    }

    /// The profile of that name.
    pub fn parse(name: &str) -> Option<TuningProfile> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// FUSE mount options for a volume of this profile published to a single node
    /// (ReadWriteOnce, ReadWriteOncePod): there no other client can see data the kernel still
    /// holds, so the page cache may gather writes until fsync (`kernel-writeback-cache`).
    /// Volumes published to many nodes get none: another node would read stale data.
    pub fn single_node_mount_options(self) -> &'static [&'static str] {
        match self {
            TuningProfile::Database => &["kernel-writeback-cache=yes"],
            _ => &[],
        }
    }
}

/// Capacity in bytes, with human-readable totals for printer columns.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Capacity {
    /// Usable bytes.
    pub total_bytes: i64,
    /// Bytes in use.
    pub used_bytes: i64,
    /// Bytes still available.
    pub free_bytes: i64,
    /// totalBytes in binary units, for example "1.5Ti".
    pub total: String,
}

/// The annotation on each CRD naming the glusterkube version that wrote it: the operator
/// upgrades a CRD written by an older version and leaves one written by a newer one (a
/// rollback of the operator must not take fields away from objects a newer one wrote).
pub const VERSION_ANNOTATION: &str = "glusterkube.dev/crd-version";

/// The glusterkube version these CRDs belong to.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Every CRD this operator owns, in a stable order, with descriptions that read as flowing
/// sentences (`kubectl explain`) and this version in [`VERSION_ANNOTATION`].
pub fn all() -> Vec<CustomResourceDefinition> {
    [GlusterCluster::crd(), GlusterVolume::crd()]
        .into_iter()
        .map(|crd| {
            let mut v = serde_json::to_value(&crd).expect("a CRD serialises");
            flow_descriptions(&mut v);
            let mut crd: CustomResourceDefinition =
                serde_json::from_value(v).expect("a CRD with reflowed descriptions");
            crd.metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(VERSION_ANNOTATION.to_string(), VERSION.to_string());
            crd
        })
        .collect()
}

/// Joins the line breaks that doc comments carry into the schema's descriptions (they
/// wrap at 100 columns, not at sentences), keeping paragraph breaks and list items.
fn flow_descriptions(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match child {
                    serde_json::Value::String(text) if key == "description" => {
                        *text = flow(text);
                    }
                    _ => flow_descriptions(child),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(flow_descriptions),
        _ => {}
    }
}

/// `text` with each paragraph on one line; a line that starts a list item stays its own.
fn flow(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        let breaks = line.is_empty() || line.starts_with("- ") || line.starts_with("* ");
        if out.is_empty() {
            out.push_str(line);
        } else if line.is_empty() {
            if !out.ends_with("\n\n") {
                out.push_str("\n\n");
            }
        } else if breaks || out.ends_with('\n') {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(line);
        } else {
            out.push(' ');
            out.push_str(line);
        }
    }
    out.trim_end().to_string()
}

/// Where crdgen writes the CRDs, relative to the repository root: the plain manifests and
/// the Helm chart's crds/ directory carry the same file.
pub const COMMITTED_PATHS: [&str; 2] =
    ["deploy/crds/crds.yaml", "charts/glusterkube/crds/crds.yaml"];

/// The CRDs as one multi-document YAML stream, as crdgen writes it.
pub fn yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::from("# Generated by `cargo run -p gk-api --bin crdgen`. Do not edit.\n");
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_crds_are_current() {
        let want = yaml().unwrap();
        for path in COMMITTED_PATHS {
            let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(path);
            let committed = std::fs::read_to_string(&file).unwrap_or_default();
            assert!(
                committed == want,
                "{path} is stale or missing: run `cargo run -p gk-api --bin crdgen`"
            );
        }
    }

    /// Reads YAML the way the apiserver hands objects to us: as JSON. (serde_yaml alone
    /// would expect YAML tags for enums, which no user writes.)
    fn from_yaml<T: serde::de::DeserializeOwned>(yaml: &str) -> Result<T, serde_json::Error> {
        let value: serde_json::Value = serde_yaml::from_str(yaml).expect("valid YAML");
        serde_json::from_value(value)
    }

    #[test]
    fn descriptions_flow_as_sentences() {
        assert_eq!(
            flow("Usable capacity wanted, for\nexample 100Gi.\n\nSecond\nparagraph:\n- one\n- two"),
            "Usable capacity wanted, for example 100Gi.\n\nSecond paragraph:\n- one\n- two"
        );
        let text = serde_json::to_string(&all()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let size = &v[1]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["size"]["description"];
        let size = size.as_str().unwrap();
        assert!(size.starts_with("Usable capacity wanted"), "{size}");
        assert!(!size.contains('\n'), "{size}");
    }

    #[test]
    fn spec_reads_from_yaml() {
        let spec: GlusterClusterSpec = from_yaml(
            "nodes:\n- name: n1\n  storage: {device: /dev/sdb}\n- name: n2\n  storage: {directory: /srv/gluster}\n",
        )
        .unwrap();
        assert_eq!(spec.nodes[0].storage.device.as_deref(), Some("/dev/sdb"));
        assert_eq!(
            spec.nodes[1].storage.directory.as_deref(),
            Some("/srv/gluster")
        );
        assert_eq!(spec.default_profile, TuningProfile::Tuned);
        let vol: GlusterVolumeSpec = from_yaml(
            "cluster: c\ntype: Disperse\ndisperse: {data: 2, redundancy: 1}\nbrickCount: 3\n",
        )
        .unwrap();
        assert_eq!(vol.volume_type, VolumeType::Disperse);
        assert_eq!(vol.deletion_policy, DeletionPolicy::Retain);
        let err = from_yaml::<GlusterVolumeSpec>("cluster: c\ntype: Stripe\nbrickCount: 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `Stripe`"), "{err}");
    }

    /// The apiserver only accepts structural schemas: every node states its type, and no
    /// anyOf/oneOf brings in properties or types of its own.
    fn assert_structural(path: &str, node: &serde_json::Value) {
        let obj = node
            .as_object()
            .unwrap_or_else(|| panic!("{path}: not an object"));
        let typed = obj.contains_key("type")
            || obj.get("x-kubernetes-int-or-string") == Some(&serde_json::Value::Bool(true))
            || obj.get("x-kubernetes-preserve-unknown-fields")
                == Some(&serde_json::Value::Bool(true));
        assert!(typed, "{path} has no type: {node}");
        for key in ["anyOf", "oneOf", "allOf"] {
            for branch in obj
                .get(key)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                for forbidden in ["type", "properties", "items", "default"] {
                    assert!(
                        branch.get(forbidden).is_none(),
                        "{path}.{key} sets {forbidden}"
                    );
                }
            }
        }
        for (name, child) in obj
            .get("properties")
            .and_then(|p| p.as_object())
            .into_iter()
            .flatten()
        {
            assert_structural(&format!("{path}.{name}"), child);
        }
        if let Some(items) = obj.get("items") {
            assert_structural(&format!("{path}[]"), items);
        }
        if let Some(extra) = obj.get("additionalProperties").filter(|v| v.is_object()) {
            assert_structural(&format!("{path}{{}}"), extra);
        }
    }

    #[test]
    fn schemas_are_structural() {
        for crd in all() {
            let crd = serde_json::to_value(crd).unwrap();
            for version in crd["spec"]["versions"].as_array().unwrap() {
                assert_structural(
                    version["name"].as_str().unwrap(),
                    &version["schema"]["openAPIV3Schema"],
                );
            }
        }
    }
}
