//! Names, labels and annotations of the objects the operator makes, in one place: the CSI
//! driver finds brick pods and Secrets by the same names the operator gives them.

use std::collections::BTreeMap;

/// The operator: its server-side-apply field manager, the `managed-by` label value of what
/// it makes, and the common name of its client certificate for the brick agents.
pub const OPERATOR: &str = "glusterkube-operator";

/// Label that assigns a GlusterCluster or GlusterVolume to one operator instance. An operator
/// started with an instance name reconciles only objects carrying it; one started without
/// reconciles only objects without the label. Two operators sharing an apiserver (a test next
/// to a deployed one, or a canary) then never fight over the same objects.
pub const INSTANCE_LABEL: &str = "glusterkube.dev/operator-instance";

/// The GlusterCluster a brick pod, StatefulSet, Service or Secret belongs to.
pub const LABEL_CLUSTER: &str = "glusterkube.dev/cluster";
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
/// The StatefulSet a brick pod belongs to (one per storage node).
pub const LABEL_BRICK_SET: &str = "glusterkube.dev/brick-set";
/// The storage node a brick pod serves, on the pod (and its template).
pub const ANNOTATION_NODE: &str = "glusterkube.dev/node";
pub const BRICK_POD_SELECTOR: &str = "app.kubernetes.io/name=glusterkube-brick";
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=glusterkube-operator";

/// A name that is not a DNS subdomain, which the API requires of the object it names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a {kind} name (a DNS subdomain, such as {example})")]
pub struct NameError {
    pub name: String,
    pub kind: &'static str,
    pub example: &'static str,
}

/// A Secret name given on a command line: a DNS subdomain (lower-case letters, digits, '-'
/// and '.'), as the API requires.
pub fn secret_name(s: &str) -> Result<String, NameError> {
    object_name("Secret", "regcred", s)
}

/// A Lease name given on a command line, checked as [`secret_name`] is.
pub fn lease_name(s: &str) -> Result<String, NameError> {
    object_name("Lease", "glusterkube-operator", s)
}

fn object_name(kind: &'static str, example: &'static str, s: &str) -> Result<String, NameError> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(s.to_string())
    } else {
        Err(NameError {
            name: s.to_string(),
            kind,
            example,
        })
    }
}

/// The labels of everything the operator makes for a cluster.
pub fn cluster_labels(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), "glusterkube-brick".into()),
        ("app.kubernetes.io/managed-by".into(), OPERATOR.into()),
        (LABEL_CLUSTER.into(), cluster.into()),
    ])
}

/// The headless Service (and PodDisruptionBudget) of a cluster's brick pods.
pub fn service_name(cluster: &str) -> String {
    format!("{cluster}-bricks")
}

/// The CA of a cluster's brick agents.
pub fn agent_ca_secret(cluster: &str) -> String {
    format!("{cluster}-agent-ca")
}

/// The brick agents' serving certificate.
pub fn agent_tls_secret(cluster: &str) -> String {
    format!("{cluster}-agent-tls")
}

/// The operator's client certificate for a cluster's agents (the CSI controller reads it).
pub fn operator_tls_secret(cluster: &str) -> String {
    format!("{cluster}-operator-tls")
}

/// A cluster's gluster certificate (glusterd, bricks and their internal clients).
pub fn gluster_tls_secret(cluster: &str) -> String {
    format!("{cluster}-gluster-tls")
}

/// The CSI node plugins' gluster client certificate, in the operator's namespace (the chart
/// installs the node plugin there, which mounts it, and so do its mount pods).
pub const CSI_CLIENT_SECRET: &str = "glusterkube-csi-gluster-tls";

/// FNV-1a, a stable hash for names (std's hasher may change between releases).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The StatefulSet of one node: `<cluster>-<node>`, made a DNS label ('.' becomes '-'), with
/// a hash suffix when that changed the name or it would be too long, so names never collide.
pub fn statefulset_name(cluster: &str, node: &str) -> String {
    let plain = format!("{cluster}-{node}");
    let label = plain.replace('.', "-");
    if label == plain && label.len() <= 52 {
        return label;
    }
    let keep = label.len().min(43);
    format!(
        "{}-{:08x}",
        label[..keep].trim_end_matches('-'),
        stable_hash(plain.as_bytes()) as u32
    )
}

/// The gluster volume name of a GlusterVolume: `<namespace>-<name>`, with '.' (allowed in
/// Kubernetes names, not in gluster's) turned into '_' (allowed in gluster's, not in
/// Kubernetes'), so distinct resources never share a name. Too long a name keeps a prefix and
/// gains a hash of the whole.
pub fn gluster_volume_name(namespace: &str, name: &str) -> String {
    let full = format!("{namespace}-{name}").replace('.', "_");
    if full.len() <= 64 {
        return full;
    }
    format!("{}-{:016x}", &full[..47], stable_hash(full.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_object_names_are_dns_subdomains_and_errors_name_the_kind() {
        assert_eq!(secret_name("regcred").unwrap(), "regcred");
        assert_eq!(lease_name("gk.operator-1").unwrap(), "gk.operator-1");
        for bad in ["", "Upper", "-lead", "a..b", "under_score"] {
            assert!(
                secret_name(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("not a Secret name"),
                "{bad}"
            );
            assert!(
                lease_name(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("not a Lease name"),
                "{bad}"
            );
        }
    }

    #[test]
    fn statefulset_names_are_dns_labels_and_distinct() {
        assert_eq!(statefulset_name("pool", "node-a"), "pool-node-a");
        let dotted = statefulset_name("pool", "node.b");
        assert!(
            dotted.starts_with("pool-node-b-") && !dotted.contains('.'),
            "{dotted}"
        );
        assert_ne!(dotted, statefulset_name("pool", "node-b"));
        let long = statefulset_name("pool", &"n".repeat(80));
        assert!(long.len() <= 52, "{long}");
    }

    #[test]
    fn volume_names_are_gluster_safe_and_distinct() {
        assert_eq!(gluster_volume_name("default", "pool"), "default-pool");
        assert_eq!(gluster_volume_name("a", "b.c"), "a-b_c");
        assert_ne!(
            gluster_volume_name("a-b", "c"),
            gluster_volume_name("a", "b-c.x")
        );
        let long = gluster_volume_name(&"n".repeat(63), &"v".repeat(63));
        assert_eq!(long.len(), 64);
        gk_gluster::validate_volume_name(&long).unwrap();
        assert_ne!(long, gluster_volume_name(&"n".repeat(63), &"v".repeat(62)));
    }

    #[test]
    fn the_hash_is_stable_across_releases() {
        // A changed hash would rename every long StatefulSet and gluster volume.
        assert_eq!(stable_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
