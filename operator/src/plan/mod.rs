//! Pure planning: where bricks go, how many a size needs, how a rolling restart and a data
//! migration proceed, and the options a volume should carry. Nothing here talks to the API or
//! to gluster; the controllers feed it what they observed and act on what it returns.

pub mod adopt;
pub mod error;
pub mod layout;
pub mod migration;
pub mod node;
pub mod placement;
pub mod profiles;
pub mod pv_quota;
pub mod rollout;
pub mod settle;
pub mod size;
pub mod spread;
pub mod zones;

pub use error::SpecError;
pub use layout::{layout, layout_of};
pub use migration::{
    lost, migrating, migration, migration_errors, overall, rerun, stalled, unmoved, Migration,
    LOST_AFTER, MIGRATION_RUNS,
};
pub use node::{DiskSlot, NodeSlot};
pub use placement::{bricks, replacements, resize, Resize};
pub use profiles::{options, options_at_create, profile_of};
pub use rollout::{rollout_step, BrickPod, NotSafe, RolloutStep};
pub use settle::{after_check, lookup_optimize, Check, CHECK_RUNS, LOOKUP_OPTIMIZE};
pub use size::{size_bricks, wanted_bricks, MAX_BRICKS};

/// Specs and nodes for the planning tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use gk_gluster::Brick;

    use super::node::{DiskSlot, NodeSlot};
    use crate::crd::GlusterVolumeSpec;

    pub fn spec(yaml: &str) -> GlusterVolumeSpec {
        let v: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
        serde_json::from_value(v).unwrap()
    }

    pub fn nodes(n: usize) -> Vec<NodeSlot> {
        (1..=n)
            .map(|i| NodeSlot {
                node: format!("n{i}"),
                address: format!("10.0.0.{i}"),
                disks: vec![DiskSlot {
                    brick_root: "/var/lib/glusterkube/bricks/".into(),
                    total_bytes: 100 << 30,
                }],
                zone: None,
            })
            .collect()
    }

    pub fn hosts(bricks: &[Brick]) -> Vec<&str> {
        bricks.iter().map(|b| b.host.as_str()).collect()
    }

    pub fn brick(host: &str, path: &str) -> Brick {
        Brick::new(host, path).unwrap()
    }
}
