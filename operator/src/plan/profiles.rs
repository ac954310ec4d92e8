//! Tuning profiles: named sets of volume options, each with the reason it is there.

use std::collections::BTreeMap;

use gk_gluster::VolumeLayout;

use crate::crd::TuningProfile;

/// One option of a profile and why it is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileOption {
    pub key: &'static str,
    pub value: &'static str,
    pub reason: &'static str,
    /// Which layouts take the option: gluster refuses replicate's self-heal options on
    /// disperse volumes and the other way round.
    pub applies: Applies,
}

/// The layouts a profile option is set on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    All,
    /// Replicate and arbiter (AFR).
    Replicated,
    /// Disperse (EC).
    Dispersed,
}

impl Applies {
    fn matches(self, layout: VolumeLayout) -> bool {
        match self {
            Applies::All => true,
            Applies::Replicated => {
                matches!(
                    layout,
                    VolumeLayout::Replicate { .. } | VolumeLayout::Arbiter
                )
            }
            Applies::Dispersed => matches!(layout, VolumeLayout::Disperse { .. }),
        }
    }
}

/// The Tuned profile. Seed 000's "high performance" list, applied whole, was slower than
/// gluster's defaults on every row of a first dd ladder recorded in ENVIRONMENT.md, so only
/// options with a reason that holds on any cluster are kept; the rest wait for the benchmark
/// harness to earn their place.
pub const TUNED: &[ProfileOption] = &[
    ProfileOption {
        key: "network.ping-timeout",
        value: "5",
        reason: "clients block all I/O for up to twice ping-timeout when a brick host vanishes \
                 without closing its connections (measured: 17-20 s at 10, 5.6-7.7 s at 5, \
                 no spurious disconnect under a 200 MB write); gluster's 42 s stalls pods for \
                 minutes. A backstop for a brick that hangs but stays reachable",
        applies: Applies::All,
    },
    ProfileOption {
        key: "client.tcp-user-timeout",
        value: "3",
        reason: "a brick host that drops off the network is given up after 3 s of \
                 unacknowledged data instead of a ping cycle: with it a durable writer's \
                 stall fell from 17-20 s to 3.3-6.5 s with no failed write (replica 3 keeps \
                 serving from the other two). Set before quota is enabled, so quotad's \
                 connections have it too",
        applies: Applies::All,
    },
    ProfileOption {
        key: "cluster.shd-max-threads",
        value: "4",
        reason: "heals after a brick returns run with more parallelism, shortening the window \
                 with one copy missing (seed 000 used 8 on large nodes)",
        applies: Applies::Replicated,
    },
    ProfileOption {
        key: "disperse.shd-max-threads",
        value: "4",
        reason: "the same for disperse volumes, which refuse cluster.shd-max-threads \
                 (measured: \"Cannot set cluster.shd-max-threads for a non-replicate volume\")",
        applies: Applies::Dispersed,
    },
    ProfileOption {
        key: "features.cache-invalidation",
        value: "on",
        reason: "brick-side upcalls tell clients when metadata changes, which makes the \
                 longer md-cache timeout below safe on RWX volumes shared by many pods",
        applies: Applies::All,
    },
    ProfileOption {
        key: "performance.cache-invalidation",
        value: "on",
        reason: "clients act on those upcalls (seed 000)",
        applies: Applies::All,
    },
    ProfileOption {
        key: "performance.md-cache-timeout",
        value: "600",
        reason: "stat and xattr answers are cached while invalidation keeps them correct, \
                 cutting lookups for metadata-heavy workloads (seed 000)",
        applies: Applies::All,
    },
    ProfileOption {
        key: "features.cache-invalidation-timeout",
        value: "600",
        reason: "bricks remember interested clients as long as they cache (seed 000)",
        applies: Applies::All,
    },
];

/// The options a volume should carry: its profile, then its own options over them.
pub fn options(
    profile: TuningProfile,
    layout: VolumeLayout,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = match profile {
        TuningProfile::Tuned => TUNED
            .iter()
            .filter(|o| o.applies.matches(layout))
            .map(|o| (o.key.to_string(), o.value.to_string()))
            .collect(),
        TuningProfile::GlusterDefaults => BTreeMap::new(),
    };
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_doc_lists_every_option() {
        let doc = include_str!("../../../docs/profiles.md");
        for o in TUNED {
            let row = format!("| `{}` | {} |", o.key, o.value);
            assert!(doc.contains(&row), "docs/profiles.md lacks {row}");
        }
    }

    #[test]
    fn own_options_override_the_profile() {
        let own = BTreeMap::from([("network.ping-timeout".to_string(), "20".to_string())]);
        let r3 = VolumeLayout::Replicate { replica: 3 };
        let o = options(TuningProfile::Tuned, r3, &own);
        assert_eq!(o["network.ping-timeout"], "20");
        assert_eq!(o.len(), TUNED.len() - 1);
        assert!(!o.contains_key("disperse.shd-max-threads"));
        let dist = options(TuningProfile::Tuned, VolumeLayout::Distribute, &own);
        assert!(!dist.keys().any(|k| k.contains("shd-max-threads")));
        let ec = VolumeLayout::Disperse {
            data: 2,
            redundancy: 1,
        };
        let ec = options(TuningProfile::Tuned, ec, &own);
        assert_eq!(ec["disperse.shd-max-threads"], "4");
        assert!(!ec.contains_key("cluster.shd-max-threads"));
        assert_eq!(options(TuningProfile::GlusterDefaults, r3, &own).len(), 1);
        for opt in TUNED {
            assert!(opt.key.contains('.') && !opt.reason.is_empty());
        }
    }
}
