use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::{Capacity, TuningProfile};

/// A gluster volume on a GlusterCluster: its layout, bricks, options and lifecycle.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq)]
#[kube(
    group = "glusterkube.dev",
    version = "v1alpha1",
    kind = "GlusterVolume",
    doc = "A gluster volume on a GlusterCluster: layout, bricks, options and lifecycle.",
    namespaced,
    status = "GlusterVolumeStatus",
    shortname = "gvol",
    category = "gluster",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Bricks","type":"string","jsonPath":".status.bricksSummary","description":"Bricks online / total"}"#,
    printcolumn = r#"{"name":"Heal Pending","type":"integer","jsonPath":".status.healPending"}"#,
    printcolumn = r#"{"name":"Capacity","type":"string","jsonPath":".status.capacity.total"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.type == oldSelf.type").message("type is immutable").field_path(".type"))]
#[x_kube(validation = Rule::new("self.cluster == oldSelf.cluster").message("cluster is immutable").field_path(".cluster"))]
#[x_kube(validation = Rule::new("self.type == 'Replicate' ? has(self.replica) : !has(self.replica)").message("replica is required for type Replicate and allowed only there").field_path(".replica"))]
#[x_kube(validation = Rule::new("self.type == 'Disperse' ? has(self.disperse) : !has(self.disperse)").message("disperse is required for type Disperse and allowed only there").field_path(".disperse"))]
#[x_kube(validation = Rule::new("has(self.bricks) != has(self.brickCount)").message("set exactly one of bricks or brickCount").field_path(".brickCount"))]
#[x_kube(validation = Rule::new("!has(self.replica) || !has(oldSelf.replica) || self.replica == oldSelf.replica").message("replica is immutable; add bricks in whole sets instead").field_path(".replica"))]
#[x_kube(validation = Rule::new("!has(self.disperse) || !has(oldSelf.disperse) || self.disperse == oldSelf.disperse").message("disperse is immutable; add bricks in whole sets instead").field_path(".disperse"))]
#[x_kube(validation = Rule::new("!has(self.brickCount) || self.type != 'Replicate' || !has(self.replica) || self.brickCount % self.replica == 0").message("brickCount must be a multiple of replica: bricks are added and removed in whole replica sets").field_path(".brickCount"))]
#[x_kube(validation = Rule::new("!has(self.bricks) || self.type != 'Replicate' || !has(self.replica) || size(self.bricks) % self.replica == 0").message("the number of bricks must be a multiple of replica: bricks are added and removed in whole replica sets").field_path(".bricks"))]
#[x_kube(validation = Rule::new("!has(self.brickCount) || self.type != 'Arbiter' || self.brickCount % 3 == 0").message("brickCount must be a multiple of 3 for Arbiter (two data bricks and one arbiter per set)").field_path(".brickCount"))]
#[x_kube(validation = Rule::new("!has(self.bricks) || self.type != 'Arbiter' || size(self.bricks) % 3 == 0").message("arbiter volumes need bricks in sets of 3 (two data bricks and one arbiter)").field_path(".bricks"))]
#[x_kube(validation = Rule::new("!has(self.brickCount) || self.type != 'Disperse' || !has(self.disperse) || self.brickCount % (self.disperse.data + self.disperse.redundancy) == 0").message("brickCount must be a multiple of disperse.data + disperse.redundancy: bricks are added and removed in whole disperse sets").field_path(".brickCount"))]
#[x_kube(validation = Rule::new("!has(self.bricks) || self.type != 'Disperse' || !has(self.disperse) || size(self.bricks) % (self.disperse.data + self.disperse.redundancy) == 0").message("the number of bricks must be a multiple of disperse.data + disperse.redundancy").field_path(".bricks"))]
#[x_kube(validation = Rule::new("has(self.existingVolume) == has(oldSelf.existingVolume) && (!has(self.existingVolume) || self.existingVolume == oldSelf.existingVolume)").message("existingVolume is immutable: set it when creating the GlusterVolume").field_path(".existingVolume"))]
#[x_kube(validation = Rule::new("!has(self.existingVolume) || self.deletionPolicy != 'Delete'").message("deletionPolicy Delete is refused for an adopted volume: deleting the GlusterVolume releases it, leaving the gluster volume and its data as they are").field_path(".deletionPolicy"))]
#[x_kube(validation = Rule::new("!has(self.existingVolume) || has(self.brickCount)").message("an adopted volume's bricks are read from gluster: set brickCount (its current number of bricks, or more to grow it), not bricks").field_path(".bricks"))]
pub struct GlusterVolumeSpec {
    /// The GlusterCluster, in this namespace, that holds this volume. Immutable.
    #[schemars(length(min = 1, max = 253))]
    pub cluster: String,

    /// How data is spread: Distribute (no redundancy), Replicate (full copies), Arbiter
    /// (replica 3 arbiter 1: two copies plus a metadata-only arbiter) or Disperse (erasure
    /// coded). Immutable.
    #[serde(rename = "type")]
    pub volume_type: VolumeType,

    /// Copies of each file, for type Replicate: 2 or 3. Replica 2 can split-brain; prefer 3
    /// or Arbiter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 2, max = 3))]
    pub replica: Option<u32>,

    /// Erasure coding, for type Disperse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disperse: Option<Disperse>,

    /// How many bricks; the operator places them over the cluster's nodes so that no two
    /// bricks of one replica or disperse set share a node. Set this or bricks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 1024))]
    pub brick_count: Option<u32>,

    /// Explicit brick placement, in set order (each consecutive group of the set size forms
    /// one replica or disperse set). Set this or brickCount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024))]
    pub bricks: Option<Vec<BrickPlacement>>,

    /// Place the bricks even when a replica or disperse set cannot have each brick in a
    /// zone of its own (fewer zones than the set size, or explicit bricks sharing a zone).
    /// The ZonesShared condition then names the sets that would go down with one zone.
    /// Without it such a volume is refused with the reason.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_shared_zones: bool,

    /// Usable capacity wanted, for example 100Gi. With brickCount, a floor on the brick
    /// count: the volume gets enough bricks to hold it, each on a disk of its own (bricks
    /// sharing a disk add no space), in whole sets; raising it adds sets and rebalances.
    /// Refused when the cluster's disks cannot hold it. With explicit bricks, it only
    /// informs the CSI driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = at_most_64)]
    #[x_kube(validation = Rule::new("isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))").message("size must be a Kubernetes quantity greater than 0, such as 100Gi or 500G (not 100GB)"))]
    pub size: Option<Quantity>,

    /// The tuning profile. Defaults to the cluster's defaultProfile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<TuningProfile>,

    /// Gluster volume options (`gluster volume set`), applied over the profile. Keys are
    /// gluster's option names, for example performance.cache-size; unknown keys are refused.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = 128), transform = values_at_most_1024)]
    #[x_kube(validation = Rule::new("self.all(k, k.matches('^[a-z][a-z0-9-]*(\\\\.[a-z0-9][a-z0-9_-]*)+$') && size(self[k]) > 0 && size(self[k]) <= 1024)").message("option keys are gluster option names like performance.cache-size, with non-empty values of at most 1024 characters"))]
    #[x_kube(validation = Rule::new("self.all(k, !self[k].matches('[[:cntrl:]]'))").message("option values must not contain newlines or other control characters"))]
    pub options: BTreeMap<String, String>,

    /// What happens to the data when this resource is deleted. Retain (the default) stops and
    /// deletes the gluster volume but keeps the brick directories; Delete removes them too.
    /// An adopted volume (existingVolume) is only released: its gluster volume keeps running
    /// with its data, and Delete is refused.
    #[serde(default)]
    pub deletion_policy: DeletionPolicy,

    /// The name of a gluster volume that already exists in the cluster's trusted pool (made
    /// by hand, say) to take over instead of creating one: its bricks and data stay where
    /// they are. type, replica and disperse must describe it, and brickCount must be at
    /// least its number of bricks (more grows it); the operator refuses otherwise, naming
    /// the field, and touches nothing. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        regex(pattern = r"^[A-Za-z0-9_][A-Za-z0-9_-]*$")
    )]
    pub existing_volume: Option<String>,
}

impl GlusterVolume {
    /// The gluster volume's name: the adopted one's, or `<namespace>-<name>` for a volume
    /// the operator creates.
    pub fn gluster_name(&self) -> String {
        use kube::ResourceExt;
        match &self.spec.existing_volume {
            Some(name) => name.clone(),
            None => crate::names::gluster_volume_name(
                &self.namespace().unwrap_or_default(),
                &self.name_any(),
            ),
        }
    }
}

/// Option values are bounded, so the apiserver can bound the cost of the rules over them.
fn values_at_most_1024(schema: &mut schemars::Schema) {
    if let Some(values) = schema
        .get_mut("additionalProperties")
        .and_then(|v| v.as_object_mut())
    {
        values.insert("maxLength".into(), 1024.into());
    }
}

/// A quantity is short; bounding it bounds the cost of its admission rule.
fn at_most_64(schema: &mut schemars::Schema) {
    schema.insert("maxLength".into(), 64.into());
}

/// How a volume spreads data over its bricks.
#[derive(schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeType {
    Distribute,
    Replicate,
    Arbiter,
    Disperse,
}

/// Erasure coding: each file is cut into data fragments plus redundancy fragments, and any
/// redundancy bricks of a set may be lost.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.redundancy < self.data").message("redundancy must be less than data").field_path(".redundancy"))]
pub struct Disperse {
    /// Data fragments per set, at least 2.
    #[schemars(range(min = 2, max = 16))]
    pub data: u32,
    /// Redundancy fragments per set, at least 1 and less than data.
    #[schemars(range(min = 1, max = 8))]
    pub redundancy: u32,
}

/// Where one brick lives.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BrickPlacement {
    /// A storage node of the cluster (spec.nodes[].name).
    #[schemars(length(min = 1, max = 253))]
    pub node: String,
}

/// What deleting the resource does to the data.
#[derive(
    schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq,
)]
pub enum DeletionPolicy {
    /// Stop and delete the gluster volume; keep the brick directories and their data.
    #[default]
    Retain,
    /// Stop and delete the gluster volume, then remove its brick directories.
    Delete,
}

/// What the operator last observed of the volume.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GlusterVolumeStatus {
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Progressing and Degraded, with reasons.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// gluster's UUID of the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_id: Option<String>,
    /// Each brick, in set order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bricks: Vec<BrickStatus>,
    /// "online/total", for the printer column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bricks_summary: Option<String>,
    /// Entries waiting for self-heal, summed over bricks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_pending: Option<i64>,
    /// Entries in split-brain, summed over bricks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_brain: Option<i64>,
    /// Usable capacity and usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Capacity>,
    /// How clients mount the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount: Option<MountInfo>,
    /// Bricks that left the volume (removed by a shrink, or replaced) whose directories the
    /// operator left on their nodes. It never reuses their paths; deletionPolicy Delete
    /// removes them with the volume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retired_bricks: Vec<String>,
    /// The last change of the brick count and its data migration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize: Option<ResizeStatus>,
    /// How the volume's subdirectory PVs are held to their size, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pv_quota: Option<PvQuotaStatus>,
}

/// How a volume's subdirectory PVs are held to their size.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PvQuotaStatus {
    pub enforcement: PvQuotaEnforcement,
    /// Why this one (and, for Gluster, what would give the volume Project).
    pub reason: String,
}

/// Who enforces a subdirectory PV's size.
#[derive(schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PvQuotaEnforcement {
    /// Each brick filesystem's project quota on the PV's directory (XFS with prjquota):
    /// no cost on the I/O path.
    Project,
    /// Gluster's quota translator, which updates every ancestor directory on each create,
    /// write and unlink (creates and unlinks about 2× slower).
    Gluster,
}

/// A change of the brick count: bricks added then a rebalance, or a remove-brick migration
/// then the commit.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResizeStatus {
    pub operation: ResizeOperation,
    pub phase: MigrationPhase,
    /// The bricks added or being removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bricks: Vec<String>,
    /// Files gluster has moved so far.
    #[serde(default)]
    pub files_moved: i64,
    /// Bytes gluster has moved so far.
    #[serde(default)]
    pub bytes_moved: i64,
    /// Files gluster failed to move.
    #[serde(default)]
    pub failures: i64,
    /// Files gluster skipped (for example for lack of space); they stay where they are.
    #[serde(default)]
    pub skipped: i64,
    /// Gluster's status per node, or why the step is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Times the migration was run again because gluster left files unmoved; the counts
    /// above are the latest run's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reruns: u32,
    /// When the latest run started or gluster's counts for it last changed. A run whose
    /// counts stay still for the operator's migration stall time is reported as stalled in
    /// the Progressing condition and a MigrationStalled event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressed_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Check runs made after every file moved: rebalance runs that move files still off
    /// the set gluster looks them up on first. The migration completes with a check run
    /// that moves nothing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub checks: u32,
    /// When the operator last started a run (a rebalance, a remove-brick or a check run).
    /// A node still reported in progress whose run time falls more than a minute behind
    /// this has lost track of a finished run (gluster 10.3's glusterd can miss its
    /// rebalance process's last word): the run is stopped and started again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_started_at: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// Gluster's id of the run that gluster reported when the operator recorded starting the
    /// next one. While gluster still reports this id, the start never reached it (an answer
    /// lost, a reconcile cut short): the run is started again, and the old run's result is
    /// not counted a second time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_replaces: Option<String>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Growing or shrinking a volume.
#[derive(schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResizeOperation {
    /// add-brick, then rebalance.
    Expand,
    /// remove-brick start, status, then commit once every file has moved.
    Shrink,
}

/// Where a data migration stands.
#[derive(schemars::JsonSchema, Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrationPhase {
    /// Decided, not yet started in gluster.
    Pending,
    InProgress,
    /// Every file moved; check runs (see `checks`) make sure each one sits on the set
    /// gluster looks it up on first. Until one moves nothing, lookups search every set.
    Verifying,
    Completed,
    /// Gluster reported a failure; nothing is committed and no data is dropped.
    Failed,
    /// Refused before it started (see message); nothing changed in gluster.
    Refused,
}

/// One brick as last observed.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BrickStatus {
    /// The storage node.
    pub node: String,
    /// The address glusterd knows the node by.
    pub host: String,
    /// The brick directory on the node.
    pub path: String,
    /// Whether the brick process is running and reachable.
    pub online: bool,
    /// Entries on this brick waiting for heal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal_pending: Option<i64>,
    /// Entries on this brick in split-brain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_brain: Option<i64>,
    /// The zone of the brick's node, when the node has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
}

/// How clients mount the volume: `mount -t glusterfs <volfileServer>:/<volume>` with
/// `backup-volfile-servers=<backupVolfileServers joined by ':'>`.
#[derive(KubeSchema, Deserialize, Serialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MountInfo {
    /// The gluster volume name.
    pub volume: String,
    /// The primary volfile server.
    pub volfile_server: String,
    /// Every other server, never repeating the primary.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backup_volfile_servers: Vec<String>,
    /// Whether clients must mount with gluster's TLS (the cluster's tls.enabled).
    #[serde(default)]
    pub tls: bool,
}
