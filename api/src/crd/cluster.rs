use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::TuningProfile;

/// A GlusterFS trusted pool: the storage nodes, the node-local storage of their bricks, and
/// how the brick pods run.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[kube(
    group = "glusterkube.dev",
    version = "v1alpha1",
    kind = "GlusterCluster",
    doc = "A GlusterFS trusted pool: storage nodes and the node-local storage of their bricks.",
    namespaced,
    status = "GlusterClusterStatus",
    shortname = "gcl",
    category = "gluster",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Nodes","type":"string","jsonPath":".status.nodesSummary","description":"Pool members connected / storage nodes"}"#,
    printcolumn = r#"{"name":"Bricks","type":"string","jsonPath":".status.bricksSummary","description":"Bricks online / total"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".status.capacity.total"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("!has(self.replacements) || self.replacements.all(r, self.nodes.exists(n, n.name == r.replacement))").message("every replacements[].replacement must be one of spec.nodes[].name").field_path(".replacements"))]
#[x_kube(validation = Rule::new("!has(self.replacements) || self.replacements.all(r, !self.replacements.exists(o, o.node == r.replacement))").message("a replacement node cannot itself be replaced; replace the original node directly").field_path(".replacements"))]
#[x_kube(validation = Rule::new("!has(self.tls) || self.tls.enabled || (has(self.clientNetworks) && size(self.clientNetworks) > 0)").message("with tls.enabled false, clientNetworks must list the IPv4 ranges allowed to mount (the nodes' and the pods' ranges): volumes are never open to every address").field_path(".clientNetworks"))]
pub struct GlusterClusterSpec {
    /// The Kubernetes nodes that hold bricks, each with its node-local storage. Each node runs
    /// one brick pod (glusterd and the brick agent), pinned to it.
    #[schemars(length(min = 1, max = 128))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub nodes: Vec<StorageNode>,

    /// The brick image (Debian's glusterfs-server plus the brick agent). Defaults to the image
    /// released with this operator. Changing it rolls the brick pods one at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub image: Option<String>,

    /// Compute resources of the glusterd container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,

    /// Tolerations of the brick pods, so they can run on tainted storage nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(t, !has(t.effect) || t.effect in ['', 'NoSchedule', 'PreferNoSchedule', 'NoExecute'])").message("a toleration's effect must be NoSchedule, PreferNoSchedule or NoExecute"))]
    #[x_kube(validation = Rule::new("self.all(t, !has(t.operator) || t.operator in ['', 'Exists', 'Equal'])").message("a toleration's operator must be Exists or Equal"))]
    #[x_kube(validation = Rule::new("self.all(t, !has(t.operator) || t.operator != 'Exists' || !has(t.value) || t.value == '')").message("a toleration with operator Exists takes no value"))]
    #[x_kube(validation = Rule::new("self.all(t, (has(t.key) && t.key != '') || (has(t.operator) && t.operator == 'Exists'))").message("a toleration without a key must use operator Exists"))]
    #[x_kube(validation = Rule::new("self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))").message("tolerationSeconds goes only with effect NoExecute"))]
    pub tolerations: Vec<Toleration>,

    /// The tuning profile of this cluster's volumes unless a GlusterVolume names its own.
    #[serde(default)]
    pub default_profile: TuningProfile,

    /// Brick replacements. Every brick on `node` (for example a node whose disk died, or a
    /// node being retired) is replaced by a new, empty brick on `replacement`, which
    /// self-heal fills from the other bricks of its set. The operator never deletes the old
    /// bricks' data. Keep an entry until every volume reports heal pending 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["node"]))]
    pub replacements: Vec<NodeReplacement>,

    /// Gluster's own TLS, on the management path (glusterd, volfile fetches) and on I/O
    /// (clients to bricks), with certificates the operator issues and renews. On by default.
    #[serde(default)]
    pub tls: GlusterTls,

    /// IPv4 ranges (CIDRs) allowed to mount this cluster's volumes when TLS is off: the
    /// nodes' range (CSI node plugins use the host network) and the pods' range (brick pods
    /// reach each other's bricks). Required when tls.enabled is false; with TLS, only the
    /// certificates the operator issued may mount, from any address.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 9, max = 18)))]
    #[x_kube(validation = Rule::new("self.all(c, isCIDR(c) && cidr(c).ip().family() == 4)").message("every entry must be an IPv4 CIDR such as 10.0.0.0/16"))]
    #[x_kube(validation = Rule::new("self.all(c, !isCIDR(c) || cidr(c).prefixLength() >= 8)").message("a client network must have a prefix of at least /8: volumes are never open to every address"))]
    pub client_networks: Vec<String>,

    /// The Node label that names a storage node's failure domain. Bricks of one replica or
    /// disperse set go to nodes with distinct values of it; nodes without it count as
    /// domains of their own. Defaults to topology.kubernetes.io/zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 317))]
    #[x_kube(validation = Rule::new("self.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$')").message("must be a Kubernetes label key such as topology.kubernetes.io/zone"))]
    pub zone_label: Option<String>,
}

/// The zone label used when a GlusterCluster names none.
pub const DEFAULT_ZONE_LABEL: &str = "topology.kubernetes.io/zone";

impl GlusterClusterSpec {
    /// The Node label whose value is a storage node's zone.
    pub fn zone_label(&self) -> &str {
        self.zone_label.as_deref().unwrap_or(DEFAULT_ZONE_LABEL)
    }
}

/// Gluster TLS of one cluster.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.enabled == oldSelf.enabled").message("tls.enabled cannot change on an existing cluster (every brick and client would have to switch at once); create a new GlusterCluster").field_path(".enabled"))]
pub struct GlusterTls {
    /// TLS on management and I/O. Cannot change once the cluster exists.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

fn enabled() -> bool {
    true
}

impl Default for GlusterTls {
    fn default() -> Self {
        Self { enabled: true }
    }
}

/// Moves every brick of one storage node to another.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.node != self.replacement").message("replacement must differ from node").field_path(".replacement"))]
pub struct NodeReplacement {
    /// The storage node whose bricks are replaced. It may be gone from spec.nodes already.
    #[schemars(length(min = 1, max = 253))]
    pub node: String,
    /// The storage node (one of spec.nodes) that receives the new bricks. It must not hold
    /// another brick of the same replica or disperse set.
    #[schemars(length(min = 1, max = 253))]
    pub replacement: String,
}

/// One storage node and where its bricks live.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StorageNode {
    /// The Kubernetes node name (metadata.name of the Node).
    #[schemars(length(min = 1, max = 253))]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')").message("must be a Kubernetes node name: lowercase letters, digits, '-' and '.'"))]
    pub name: String,
    /// Node-local storage for this node's bricks and glusterd state. Disks may be added to
    /// devices or directories; nothing else changes: moving a node's bricks is a brick
    /// replacement.
    #[x_kube(validation = Rule::new(concat!(
        "(has(self.device) ? self.device : '') == (has(oldSelf.device) ? oldSelf.device : '') && ",
        "(has(self.directory) ? self.directory : '') == (has(oldSelf.directory) ? oldSelf.directory : '') && ",
        "(has(self.stateDirectory) ? self.stateDirectory : '') == (has(oldSelf.stateDirectory) ? oldSelf.stateDirectory : '') && ",
        "(!has(oldSelf.devices) || (has(self.devices) && oldSelf.devices.all(d, d in self.devices))) && ",
        "(!has(oldSelf.directories) || (has(self.directories) && oldSelf.directories.all(d, d in self.directories)))"
    )).message("storage only takes more devices or directories: no entry can change or go, since bricks live there; replace the node's bricks instead"))]
    pub storage: NodeStorage,
}

/// The CEL check of a directory path held in `$v`: absolute, no `.` or `..` component, not a
/// system directory nor under one.
macro_rules! directory_rule {
    ($v:literal) => {
        concat!(
            $v, ".startsWith('/') && ", $v, " != '/' && !", $v, ".contains('/../') && !", $v,
            ".endsWith('/..') && !", $v, ".contains('/./') && !", $v, ".endsWith('/.') && !", $v,
            ".contains('//') && !", $v, ".matches('[[:cntrl:]]') && !(", $v, ".endsWith('/') ? ", $v,
            ".substring(0, size(", $v, ") - 1) : ", $v,
            ").matches('^/(etc|usr|bin|sbin|lib|lib32|lib64|libx32|boot|dev|proc|sys|run|var|var/lib|var/run|var/log|var/lib/kubelet|var/lib/glusterd|var/lib/containerd|var/lib/docker|root|home|tmp|opt|srv|mnt|media)$') && !",
            $v, ".matches('^/(etc|usr|bin|sbin|lib|lib32|lib64|libx32|boot|dev|proc|sys|run|var/run|var/lib/kubelet|var/lib/glusterd|var/lib/containerd|var/lib/docker)/')"
        )
    };
}

/// What a directory rule's message says.
macro_rules! directory_message {
    () => {
        "must be an absolute directory path other than /, without . or .. components or control characters, that is not a system directory nor lies under one (/etc, /usr, /dev, /proc, /sys, /run, /boot, the kubelet's or glusterd's state, ...); use a directory of its own such as /var/lib/glusterkube or a mounted XFS filesystem"
    };
}

/// Node-local storage: exactly one of a block device to format as XFS, an existing
/// directory, several devices (paths or patterns), or several directories, one disk each.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("(has(self.device) ? 1 : 0) + (has(self.directory) ? 1 : 0) + (has(self.devices) && size(self.devices) > 0 ? 1 : 0) + (has(self.directories) && size(self.directories) > 0 ? 1 : 0) == 1").message("set exactly one of device, directory, devices or directories"))]
#[x_kube(validation = Rule::new("!has(self.stateDirectory) || (has(self.devices) && size(self.devices) > 0) || (has(self.directories) && size(self.directories) > 0)").message("stateDirectory goes only with devices or directories (a single device or directory holds glusterd's state itself)").field_path(".stateDirectory"))]
pub struct NodeStorage {
    /// A whole block device, for example /dev/sdb or /dev/disk/by-id/…. If it holds no
    /// filesystem it is formatted as XFS with 512-byte inodes (room for gluster's extended
    /// attributes). A device holding any other filesystem is refused, never formatted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 6, max = 512))]
    #[x_kube(validation = Rule::new("self.startsWith('/dev/') && !self.contains('/../') && !self.endsWith('/..') && !self.contains('/./') && !self.endsWith('/.') && !self.contains('//')").message("must be a device path under /dev/ without . or .. components"))]
    #[x_kube(validation = Rule::new("!self.matches('[[:cntrl:]]')").message("must not contain control characters"))]
    pub device: Option<String>,
    /// An existing directory on the node, for example /var/lib/glusterkube. Prefer a
    /// dedicated XFS filesystem: gluster refuses bricks on the root filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 512))]
    #[x_kube(validation = Rule::new(directory_rule!("self")).message(directory_message!()))]
    pub directory: Option<String>,
    /// Several block devices, one disk each: paths such as /dev/sdb, or patterns whose last
    /// component holds `*`, `?` or `[...]`, such as /dev/disk/by-id/nvme-Vendor_*, which the
    /// brick pod matches on the node. A device named by path is used as `device` is (an
    /// empty one formatted as XFS, an XFS one used, anything else refused). A device a
    /// pattern matches is used only when it is empty or an XFS this cluster formatted; one
    /// holding any other filesystem or a partition table is left alone and logged. Bricks
    /// are spread over the disks; entries may be added later, never removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 6, max = 256)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[x_kube(validation = Rule::new("self.all(d, d.startsWith('/dev/') && !d.contains('/../') && !d.endsWith('/..') && !d.contains('/./') && !d.endsWith('/.') && !d.contains('//') && !d.contains(','))").message("every entry must be a device path or pattern under /dev/ without . or .. components or commas"))]
    #[x_kube(validation = Rule::new("self.all(d, !d.substring(0, d.lastIndexOf('/')).contains('*') && !d.substring(0, d.lastIndexOf('/')).contains('?') && !d.substring(0, d.lastIndexOf('/')).contains('['))").message("a pattern may hold *, ? or [...] in its last path component only, such as /dev/disk/by-id/ata-*"))]
    pub devices: Vec<String>,
    /// Several existing directories, one disk each (for example mounted XFS filesystems
    /// such as /data/disk1 and /data/disk2). Bricks are spread over them; entries may be
    /// added later, never removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16), inner(length(min = 2, max = 256)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    #[x_kube(validation = Rule::new("self.all(d, d.startsWith('/') && d != '/' && !d.contains('/../') && !d.endsWith('/..') && !d.contains('/./') && !d.endsWith('/.') && !d.contains('//') && !d.contains(','))").message("every entry must be an absolute directory path other than /, without . or .. components or commas (system directories are refused by the operator)"))]
    pub directories: Vec<String>,
    /// With devices or directories: the node directory that holds glusterd's state (the
    /// pool's membership and volume definitions; a few MiB). Defaults to
    /// /var/lib/glusterkube/<namespace>.<cluster>.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 512))]
    #[x_kube(validation = Rule::new(directory_rule!("self")).message(directory_message!()))]
    pub state_directory: Option<String>,
}

impl NodeStorage {
    /// Whether this storage is several disks (devices or directories), each a brick root of
    /// its own, with glusterd's state apart from them.
    pub fn is_multi_disk(&self) -> bool {
        !self.devices.is_empty() || !self.directories.is_empty()
    }
}

/// What the operator last observed of the cluster.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GlusterClusterStatus {
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Progressing and Degraded, with reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Each storage node's membership of the trusted pool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerStatus>,
    /// Bricks online across all volumes of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bricks_online: Option<i32>,
    /// Bricks across all volumes of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bricks_total: Option<i32>,
    /// "online/total", for the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bricks_summary: Option<String>,
    /// "connected/nodes", for the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes_summary: Option<String>,
    /// Raw capacity of the node-local storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<super::Capacity>,
    /// The rolling restart of brick pods after their template (for example the image)
    /// changed: one pod at a time, each only once every brick is online and nothing is
    /// left to heal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
}

/// Progress of a rolling restart of the brick pods.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// Brick pods running the current template.
    pub updated: i32,
    /// Brick pods of the cluster.
    pub total: i32,
    /// The pod restarted last, while the rollout waits for it to be healthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_pod: Option<String>,
    /// When that pod was restarted; the rollout stops with a Degraded condition when it is
    /// not healthy within the operator's rollout timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// What the rollout waits for, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
}

/// A storage node's membership of the trusted pool.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PeerStatus {
    /// The storage node.
    pub node: String,
    /// The address glusterd knows the node by.
    pub address: String,
    /// Whether glusterd on the other nodes sees this one connected.
    pub connected: bool,
    /// glusterd's peer state, for example "Peer in Cluster".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The node's zone: the value of its zoneLabel label, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// The disks holding this node's bricks, as its brick pod found them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<i32>,
}
