//! Tuning profiles: named sets of volume options, each with the reason it is there.

use std::collections::BTreeMap;

use gk_gluster::VolumeLayout;

use crate::crd::{GlusterClusterSpec, GlusterVolumeSpec, TuningProfile};

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

/// Why clients (mounts, quotad, self-heal daemons) probe a brick connection after 1 s
/// without traffic, then every second: with the 2 s user timeout, a brick whose node drops off
/// the network is given up about 2 s after it last answered even when nothing sent to it is
/// unacknowledged (a request the brick had received but not answered, or an idle quotad
/// connection).
const CLIENT_KEEPALIVE: &str = "with the 2 s user timeout, a brick whose node drops off the \
     network is given up about 2 s after it last answered even when nothing sent to it waits \
     for an acknowledgement: a request the brick had received but not answered, or quotad's \
     idle connection, which a quota'd write waits on in turn. Side by side over five node \
     cuts: a subdirectory PV stalled 1.15-3.13 s and a dedicated PV 2.24-3.07 s, against \
     2.28-5.25 s and 3.02-6.19 s with gluster's 20 s and 2 s \
     (docs/benchmarks/datapath-levers-failover-keepalive.md)";

/// Why bricks probe an idle client connection after 2 s, then every second, and drop it after
/// 5 s without an answer (with a user timeout set, Linux closes a keepalive-probed connection
/// on the timeout, not the probe count) instead of gluster's 20 s, 2 s and 42 s.
const SERVER_KEEPALIVE: &str = "a brick notices within about 5 s that a client's node dropped off \
     the network (by Linux's keepalive and user-timeout rules; not timed), and at the first \
     probe after it returns, and releases that client's locks. \
     Gluster 10.3's locks translator holds an unlink while another client holds a lock on the \
     file, and releasing a dead client's lock does not wake it: a file deleted while a node was \
     cut left that node's brick holding the writer's stale lock, the self-heal daemon's unlink \
     of it waited forever, and the volume never healed \
     (docs/benchmarks/datapath-levers-failover-keepalive.md). Trade-off: a client whose node \
     is unreachable for 5 s loses its locks and reconnects";

/// The Tuned profile. Seed 000's "high performance" list, applied whole, was slower than
/// gluster's defaults on every row of a first dd ladder recorded in ENVIRONMENT.md, so only
/// options with a reason that holds on any cluster are kept; the rest wait for the benchmark
/// harness to earn their place.
pub const TUNED: &[ProfileOption] = &[
    ProfileOption {
        key: "network.ping-timeout",
        value: "10",
        reason: "above the 5 s that glusterd 10.3 sleeps, holding its big lock, each time it \
                 spawns a rebalance process: at 5, a remove-brick or rebalance process that \
                 asked a peer's glusterd for a brick port during that sleep gave the brick up \
                 5 s later and failed its run (`fix layout on / failed`, CI at e25b79d). A \
                 backstop for a brick that hangs but stays reachable: a node whose link is \
                 cut is given up by client.tcp-user-timeout and keepalive below (node-cut \
                 stall median 2.3 s at both 5 and 10, no ping-timer expiry; \
                 docs/benchmarks/datapath-levers-failover-ping.md); gluster's 42 s stalls pods \
                 for minutes",
        applies: Applies::All,
    },
    ProfileOption {
        key: "client.tcp-user-timeout",
        value: "2",
        reason: "a brick host that drops off the network is given up after 2 s of \
                 unacknowledged data instead of a ping cycle: a durable writer on a \
                 subdirectory PV (TLS, quota) stalled 4.5, 2.3 and 4.5 s with 2, against 9.5, \
                 3.3 and 3.3 s with 3 and 70-80 s with gluster's defaults, no failed write and \
                 no ping-timer expiry (docs/benchmarks/datapath.md). Set before quota is \
                 enabled, so quotad's connections have it too. Trade-off: a brick that leaves \
                 data unacknowledged for 2 s is dropped, then reconnects and heals",
        applies: Applies::All,
    },
    ProfileOption {
        key: "client.keepalive-time",
        value: "1",
        reason: CLIENT_KEEPALIVE,
        applies: Applies::All,
    },
    ProfileOption {
        key: "client.keepalive-interval",
        value: "1",
        reason: CLIENT_KEEPALIVE,
        applies: Applies::All,
    },
    ProfileOption {
        key: "server.keepalive-time",
        value: "2",
        reason: SERVER_KEEPALIVE,
        applies: Applies::All,
    },
    ProfileOption {
        key: "server.keepalive-interval",
        value: "1",
        reason: SERVER_KEEPALIVE,
        applies: Applies::All,
    },
    ProfileOption {
        key: "server.tcp-user-timeout",
        value: "5",
        reason: SERVER_KEEPALIVE,
        applies: Applies::All,
    },
    ProfileOption {
        key: "performance.aggregate-size",
        value: "1MB",
        reason: "writes that queue up behind one in flight are sent as one request of up to 1 \
                 MiB instead of 128 KiB: with quota's accounting on every write request, a \
                 subdirectory PV wrote 1 MiB blocks at 1.8x and 100 KiB blocks at 1.9x the \
                 speed, four parallel writers at 1.5x. Writes still leave at once when nothing \
                 else is in flight (trickling writes stay on), so other clients see them as \
                 soon as before",
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
        key: "cluster.rebal-throttle",
        value: "lazy",
        reason: "a rebalance or remove-brick moves one file at a time on each node instead of \
                 two: with two migration threads gluster can leave a file's lock request \
                 unanswered until the 30 min frame timeout (gluster issue 4620; its reporter's \
                 remove-brick ran 24 h without it at lazy), and a shrink cannot commit before \
                 every file has moved. Trade-off: migrations of many small files take up to \
                 twice as long",
        applies: Applies::All,
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

/// What the Database profile adds to Tuned (and, on volumes published to one node, the
/// kernel's write-back cache: `TuningProfile::single_node_mount_options`).
pub const DATABASE: &[ProfileOption] = &[ProfileOption {
    key: TRICKLING_WRITES,
    value: "on",
    reason: "kept on (gluster's default), set so volumes made when this profile turned it off \
             get it back: with trickling writes off, a write the bricks refuse after the client \
             answered it (the PV full) leaves the next write held in gluster 10.3's write-behind \
             for ever, and the writer cannot be killed (tests/tests/gluster_ops.rs)",
    applies: Applies::All,
}];

/// Gluster's write-behind option that holds small writes until a whole aggregate is full;
/// a volume may not turn it off (see [`DATABASE`]).
pub const TRICKLING_WRITES: &str = "performance.write-behind-trickling-writes";

/// The options of `profile`, before a volume's own.
pub fn profile_options(profile: TuningProfile) -> Vec<&'static ProfileOption> {
    let extra: &[ProfileOption] = match profile {
        TuningProfile::GlusterDefaults => return Vec::new(),
        TuningProfile::Tuned => &[],
        TuningProfile::Database => DATABASE,
    };
    TUNED.iter().chain(extra).collect()
}

/// The options a volume should carry: its profile, then its own options over them.
pub fn options(
    profile: TuningProfile,
    layout: VolumeLayout,
    own: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = profile_options(profile)
        .into_iter()
        .filter(|o| o.applies.matches(layout))
        .map(|o| (o.key.to_string(), o.value.to_string()))
        .collect();
    out.extend(own.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// The options a new volume is created with, set before its bricks first start: its
/// profile's, then access control over them. Gluster reads TCP keepalive and user timeouts
/// when a connection is made, so a profile option set after the start would miss the
/// self-heal daemons' first connections (seen: a node cut stalled a writer 42 s behind a heal
/// lock held over such a connection). The volume's own options follow once it has started.
pub fn options_at_create(
    profile: TuningProfile,
    layout: VolumeLayout,
    access: &[(String, String)],
) -> BTreeMap<String, String> {
    options(profile, layout, &access.iter().cloned().collect())
}

/// The profile a volume runs with: its own, or else its cluster's default.
pub fn profile_of(volume: &GlusterVolumeSpec, cluster: &GlusterClusterSpec) -> TuningProfile {
    volume.profile.unwrap_or(cluster.default_profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_volume_starts_with_its_profile_and_access() {
        let r3 = VolumeLayout::Replicate { replica: 3 };
        let access = [
            ("server.ssl".to_string(), "on".to_string()),
            ("network.ping-timeout".to_string(), "9".to_string()),
        ];
        let o = options_at_create(TuningProfile::Tuned, r3, &access);
        for key in [
            "client.keepalive-time",
            "client.tcp-user-timeout",
            "server.keepalive-time",
            "server.tcp-user-timeout",
        ] {
            assert!(
                o.contains_key(key),
                "{key} is not set before the start: {o:?}"
            );
        }
        assert_eq!(o["server.ssl"], "on");
        assert_eq!(
            o["network.ping-timeout"], "9",
            "access wins over the profile"
        );
        assert_eq!(
            options_at_create(TuningProfile::GlusterDefaults, r3, &access),
            BTreeMap::from(access.clone())
        );
    }

    #[test]
    fn the_profile_doc_lists_every_option() {
        let doc = include_str!("../../../docs/profiles.md");
        for o in TUNED.iter().chain(DATABASE) {
            let row = format!("| `{}` | {} |", o.key, o.value);
            assert!(doc.contains(&row), "docs/profiles.md lacks {row}");
        }
        for p in TuningProfile::ALL {
            assert!(
                doc.contains(&format!("## {}", p.name())),
                "docs/profiles.md has no section for {}",
                p.name()
            );
        }
    }

    #[test]
    fn every_profile_but_gluster_defaults_builds_on_tuned() {
        let r3 = VolumeLayout::Replicate { replica: 3 };
        let tuned = options(TuningProfile::Tuned, r3, &BTreeMap::new());
        for p in [TuningProfile::Database] {
            let o = options(p, r3, &BTreeMap::new());
            for (k, v) in &tuned {
                assert_eq!(o.get(k), Some(v), "{p:?} lacks Tuned's {k}");
            }
            assert!(o.len() > tuned.len(), "{p:?} adds nothing");
        }
        assert_eq!(
            options(TuningProfile::Database, r3, &BTreeMap::new())[TRICKLING_WRITES],
            "on",
            "volumes made when Database turned trickling writes off get them back"
        );
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
