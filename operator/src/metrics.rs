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

    pub fn volume(&self, namespace: &str, volume: &str, online: i64, total: i64, pending: i64) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        self.bricks_online.get_or_create(&l).set(online);
        self.bricks_total.get_or_create(&l).set(total);
        self.heal_pending.get_or_create(&l).set(pending);
    }

    pub fn capacity(&self, namespace: &str, volume: &str, total_bytes: i64, used_bytes: i64) {
        let l = VolumeLabel {
            namespace: namespace.into(),
            volume: volume.into(),
        };
        self.capacity_bytes.get_or_create(&l).set(total_bytes);
        self.used_bytes.get_or_create(&l).set(used_bytes);
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
        let mut out = String::new();
        let registry = self.registry.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_client::encoding::text::encode(&mut out, &registry)
            .expect("writing to a String");
        out
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
        m.volume("ns", "v", 2, 3, 17);
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
    }
}
