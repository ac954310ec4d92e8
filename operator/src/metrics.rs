//! Prometheus metrics: reconciles, errors and their duration, and per volume: bricks online,
//! heal pending, capacity and use, and the PersistentVolumes it backs.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabel {
    pub error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VolumeLabel {
    pub namespace: String,
    pub volume: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabel {
    pub namespace: String,
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SecretLabel {
    pub namespace: String,
    pub secret: String,
}

/// What one observation of a volume found.
#[derive(Clone, Debug, Default)]
pub struct VolumeGauges {
    pub bricks_online: i64,
    pub bricks: i64,
    pub heal_pending: i64,
    pub split_brain: i64,
    /// 1 while a rebalance or remove-brick of the volume has been reported stalled.
    pub migration_stalled: i64,
}

pub struct Metrics {
    registry: Mutex<Registry>,
    reconciles: Family<KindLabel, Counter>,
    errors: Family<ErrorLabel, Counter>,
    duration: Family<KindLabel, Histogram>,
    bricks_online: Family<VolumeLabel, Gauge>,
    bricks_total: Family<VolumeLabel, Gauge>,
    heal_pending: Family<VolumeLabel, Gauge>,
    capacity_bytes: Family<VolumeLabel, Gauge>,
    used_bytes: Family<VolumeLabel, Gauge>,
    persistent_volumes: Family<VolumeLabel, Gauge>,
    split_brain: Family<VolumeLabel, Gauge>,
    quota_backlog: Family<VolumeLabel, Gauge>,
    migration_stalled: Family<VolumeLabel, Gauge>,
    rollout_stalled: Family<ClusterLabel, Gauge>,
    certificate_expiry: Family<SecretLabel, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("glusterkube");
        let reconciles = Family::<KindLabel, Counter>::default();
        let errors = Family::<ErrorLabel, Counter>::default();
        let duration = Family::<KindLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.01, 2.0, 14))
        });
        let bricks_online = Family::<VolumeLabel, Gauge>::default();
        let bricks_total = Family::<VolumeLabel, Gauge>::default();
        let heal_pending = Family::<VolumeLabel, Gauge>::default();
        let capacity_bytes = Family::<VolumeLabel, Gauge>::default();
        let used_bytes = Family::<VolumeLabel, Gauge>::default();
        let persistent_volumes = Family::<VolumeLabel, Gauge>::default();
        let split_brain = Family::<VolumeLabel, Gauge>::default();
        let quota_backlog = Family::<VolumeLabel, Gauge>::default();
        let migration_stalled = Family::<VolumeLabel, Gauge>::default();
        let rollout_stalled = Family::<ClusterLabel, Gauge>::default();
        let certificate_expiry = Family::<SecretLabel, Gauge>::default();
        registry.register("reconciles", "Reconciles started", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by error kind",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration",
            duration.clone(),
        );
        registry.register(
            "volume_bricks_online",
            "Bricks online per volume",
            bricks_online.clone(),
        );
        registry.register("volume_bricks", "Bricks per volume", bricks_total.clone());
        registry.register(
            "volume_heal_pending",
            "Entries waiting for self-heal per volume",
            heal_pending.clone(),
        );
        registry.register(
            "volume_capacity_bytes",
            "Usable bytes per volume",
            capacity_bytes.clone(),
        );
        registry.register(
            "volume_used_bytes",
            "Bytes in use per volume",
            used_bytes.clone(),
        );
        registry.register(
            "volume_persistent_volumes",
            "PersistentVolumes of the CSI driver backed by each volume",
            persistent_volumes.clone(),
        );
        registry.register(
            "volume_split_brain_entries",
            "Entries in split-brain per volume (gluster cannot heal them on its own)",
            split_brain.clone(),
        );
        registry.register(
            "volume_quota_registrations_pending",
            "Quota limits enforced on a volume's directories that glusterd has not registered yet",
            quota_backlog.clone(),
        );
        registry.register(
            "volume_migration_stalled",
            "1 while a volume's rebalance or remove-brick shows no change in gluster's counts \
             for the operator's migration stall time",
            migration_stalled.clone(),
        );
        registry.register(
            "cluster_rollout_stalled",
            "1 while a GlusterCluster's rolling restart is stopped (RolloutStalled)",
            rollout_stalled.clone(),
        );
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "When each certificate the operator issued expires (Unix time), by its Secret",
            certificate_expiry.clone(),
        );
        Self {
            registry: Mutex::new(registry),
            reconciles,
            errors,
            duration,
            bricks_online,
            bricks_total,
            heal_pending,
            capacity_bytes,
            used_bytes,
            persistent_volumes,
            split_brain,
            quota_backlog,
            migration_stalled,
            rollout_stalled,
            certificate_expiry,
        }
    }
}

/// Measures one reconcile; call `finish` when it ends.
pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    kind: KindLabel,
    start: Instant,
}

impl ReconcileTimer<'_> {
    pub fn finish(self) {
        self.metrics
            .duration
            .get_or_create(&self.kind)
            .observe(self.start.elapsed().as_secs_f64());
    }
}

impl Metrics {
    pub fn reconcile_started(&self, kind: &str) -> ReconcileTimer<'_> {
        let kind = KindLabel { kind: kind.into() };
        self.reconciles.get_or_create(&kind).inc();
        ReconcileTimer {
            metrics: self,
            kind,
            start: Instant::now(),
        }
    }

    pub fn error(&self, label: &str) {
        self.errors
            .get_or_create(&ErrorLabel {
                error: label.into(),
            })
            .inc();
    }

    pub fn volume(&self, namespace: &str, volume: &str, g: &VolumeGauges) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        self.bricks_online.get_or_create(&l).set(g.bricks_online);
        self.bricks_total.get_or_create(&l).set(g.bricks);
        self.heal_pending.get_or_create(&l).set(g.heal_pending);
        self.split_brain.get_or_create(&l).set(g.split_brain);
        self.migration_stalled
            .get_or_create(&l)
            .set(g.migration_stalled);
    }

    /// Quota limits of a volume waiting for glusterd; counted after the volume's other
    /// gauges, so it is dropped when they are gone (the volume was deleted meanwhile).
    pub fn quota_backlog(&self, namespace: &str, volume: &str, pending: i64) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        if self.bricks_total.get(&l).is_some() {
            self.quota_backlog.get_or_create(&l).set(pending);
        }
    }

    /// Whether a GlusterCluster's rolling restart stopped (its RolloutStalled condition).
    pub fn rollout_stalled(&self, namespace: &str, cluster: &str, stalled: bool) {
        self.rollout_stalled
            .get_or_create(&ClusterLabel {
                namespace: namespace.into(),
                cluster: cluster.into(),
            })
            .set(i64::from(stalled));
    }

    /// When a certificate the operator issued expires, by the Secret holding it.
    pub fn certificate_expiry(&self, namespace: &str, secret: &str, unix_seconds: i64) {
        self.certificate_expiry
            .get_or_create(&SecretLabel {
                namespace: namespace.into(),
                secret: secret.into(),
            })
            .set(unix_seconds);
    }

    /// Drops the gauges of a deleted GlusterCluster and of its certificates.
    pub fn forget_cluster(&self, namespace: &str, cluster: &str, secrets: &[String]) {
        self.rollout_stalled.remove(&ClusterLabel {
            namespace: namespace.into(),
            cluster: cluster.into(),
        });
        for secret in secrets {
            self.certificate_expiry.remove(&SecretLabel {
                namespace: namespace.into(),
                secret: secret.clone(),
            });
        }
    }

    pub fn capacity(&self, namespace: &str, volume: &str, total_bytes: i64, used_bytes: i64) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        self.capacity_bytes.get_or_create(&l).set(total_bytes);
        self.used_bytes.get_or_create(&l).set(used_bytes);
    }

    /// Drops every gauge of a deleted volume.
    pub fn forget_volume(&self, namespace: &str, volume: &str) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        for family in [
            &self.bricks_online,
            &self.bricks_total,
            &self.heal_pending,
            &self.capacity_bytes,
            &self.used_bytes,
            &self.split_brain,
            &self.quota_backlog,
            &self.migration_stalled,
        ] {
            family.remove(&l);
        }
    }

    /// Replaces the PersistentVolume counts, so volumes that lost their last PV drop out.
    pub fn persistent_volumes(&self, counts: &BTreeMap<(String, String), i64>) {
        self.persistent_volumes.clear();
        for ((namespace, volume), n) in counts {
            self.persistent_volumes
                .get_or_create(&VolumeLabel {
                    namespace: namespace.clone(),
                    volume: volume.clone(),
                })
                .set(*n);
        }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        gk_api::metrics::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposes_what_was_recorded() {
        let m = Metrics::default();
        m.reconcile_started("GlusterVolume").finish();
        m.error("agent");
        m.volume(
            "ns",
            "v",
            &VolumeGauges {
                bricks_online: 2,
                bricks: 3,
                heal_pending: 17,
                split_brain: 1,
                migration_stalled: 1,
            },
        );
        m.quota_backlog("ns", "v", 4);
        m.quota_backlog("ns", "deleted", 9);
        m.rollout_stalled("ns", "c", true);
        m.certificate_expiry("ns", "c-agent-tls", 1_900_000_000);
        m.capacity("ns", "v", 1000, 250);
        m.persistent_volumes(&BTreeMap::from([(("ns".into(), "old".into()), 4)]));
        m.persistent_volumes(&BTreeMap::from([(("ns".into(), "v".into()), 5)]));
        let text = m.encode();
        assert!(
            text.contains("glusterkube_reconciles_total{kind=\"GlusterVolume\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_reconcile_errors_total{error=\"agent\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_volume_bricks_online{namespace=\"ns\",volume=\"v\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_volume_heal_pending{namespace=\"ns\",volume=\"v\"} 17"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_volume_capacity_bytes{namespace=\"ns\",volume=\"v\"} 1000"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_volume_used_bytes{namespace=\"ns\",volume=\"v\"} 250"),
            "{text}"
        );
        assert!(
            text.contains("glusterkube_volume_persistent_volumes{namespace=\"ns\",volume=\"v\"} 5"),
            "{text}"
        );
        assert!(!text.contains("volume=\"old\""), "{text}");
        assert!(!text.contains("volume=\"deleted\""), "{text}");
        for want in [
            "glusterkube_volume_split_brain_entries{namespace=\"ns\",volume=\"v\"} 1",
            "glusterkube_volume_quota_registrations_pending{namespace=\"ns\",volume=\"v\"} 4",
            "glusterkube_volume_migration_stalled{namespace=\"ns\",volume=\"v\"} 1",
            "glusterkube_cluster_rollout_stalled{namespace=\"ns\",cluster=\"c\"} 1",
            "glusterkube_certificate_expiry_timestamp_seconds{namespace=\"ns\",secret=\"c-agent-tls\"} 1900000000",
        ] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
        m.forget_cluster("ns", "c", &["c-agent-tls".into()]);
        m.forget_volume("ns", "v");
        let text = m.encode();
        assert!(
            !text.contains("volume=\"v\"} 2")
                && !text.contains("volume_used_bytes{")
                && !text.contains("volume_migration_stalled{"),
            "a deleted volume's gauges are gone:\n{text}"
        );
        assert!(
            !text.contains("cluster=\"c\"") && !text.contains("c-agent-tls"),
            "a deleted cluster's gauges are gone:\n{text}"
        );
    }
}
