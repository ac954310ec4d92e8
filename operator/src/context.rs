//! What every reconcile shares: the API client, the event recorder, the settings of this
//! operator process and its metrics.

use std::sync::Arc;
use std::time::Duration;

use gk_api::names::INSTANCE_LABEL;
use kube::runtime::events::Recorder;
use kube::Client;

use crate::metrics::Metrics;

/// Settings of one operator process.
#[derive(Clone, Debug)]
pub struct Config {
    /// What every brick pod gets, whatever its cluster.
    pub brick_pods: BrickPods,
    /// The agents' gRPC port.
    pub agent_port: u16,
    /// How often healthy objects are re-checked (brick and heal state).
    pub refresh: Duration,
    /// The CSI driver name whose PersistentVolumes keep a volume from being deleted.
    pub csi_driver: String,
    /// How long a restarted brick pod may take to serve again, with every brick online and
    /// nothing left to heal, before the rollout stops with a Degraded condition.
    pub rollout_timeout: Duration,
    /// How long a rebalance or remove-brick migration may show no change in gluster's counts
    /// before it is reported as stalled (a Warning event and the Progressing condition).
    pub migration_stall: Duration,
    /// This operator's instance name (see [`INSTANCE_LABEL`]).
    pub instance: Option<String>,
    /// The operator's own namespace: the gluster CA and the CSI node plugins' certificate
    /// live there (see `tls::gluster`).
    pub namespace: String,
    /// Whether the controllers' watches deliver, for /healthz.
    pub health: Arc<crate::health::Health>,
}

/// Settings of the brick pods that are the operator's, not a GlusterCluster's.
#[derive(Clone, Debug)]
pub struct BrickPods {
    /// The brick image for clusters that do not name one.
    pub image: String,
    /// Secrets (by name) that brick pods pull their image with. Pods look them up in their
    /// own namespace: each GlusterCluster's namespace needs a copy.
    pub pull_secrets: Vec<String>,
    /// The brick agent's log filter (RUST_LOG syntax).
    pub agent_log_level: String,
    /// The size at which each of gluster's log files in a brick pod is rotated (one older
    /// copy is kept).
    pub log_max_mib: u32,
}

impl Default for BrickPods {
    fn default() -> Self {
        Self {
            image: format!("glusterkube/brick:{}", env!("CARGO_PKG_VERSION")),
            pull_secrets: Vec::new(),
            agent_log_level: "info".into(),
            log_max_mib: 100,
        }
    }
}

impl Config {
    /// The label selector of the objects this operator reconciles.
    pub fn selector(&self) -> String {
        match &self.instance {
            Some(i) => format!("{INSTANCE_LABEL}={i}"),
            None => format!("!{INSTANCE_LABEL}"),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            brick_pods: BrickPods::default(),
            agent_port: gk_api::agents::AGENT_PORT,
            refresh: Duration::from_secs(30),
            csi_driver: "gluster.glusterkube.dev".into(),
            rollout_timeout: Duration::from_secs(900),
            migration_stall: Duration::from_secs(600),
            instance: None,
            namespace: "glusterkube".into(),
            health: Default::default(),
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub config: Config,
    pub metrics: Arc<Metrics>,
    /// Heal counts by gluster volume, one running at a time each (see `volume::heal`).
    pub heals: crate::single_flight::SingleFlight<gk_agent_proto::v1::HealInfoResponse>,
    /// Connections to the brick agents, kept between reconciles.
    pub agents: gk_api::agents::cache::AgentCache,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_select_disjoint_objects() {
        assert_eq!(
            Config::default().selector(),
            "!glusterkube.dev/operator-instance"
        );
        let canary = Config {
            instance: Some("canary".into()),
            ..Config::default()
        };
        assert_eq!(
            canary.selector(),
            "glusterkube.dev/operator-instance=canary"
        );
    }
}
