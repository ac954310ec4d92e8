//! StorageClass parameters and volume IDs. Every bad parameter is refused naming it.

use std::collections::HashMap;

pub use gk_api::volume_id::{valid_dir, ObjectKey, ParamError, PoolKey, SnapshotId, VolumeId};

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ParamError {
    ParamError::new(field, reason)
}

/// How a StorageClass provisions volumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provisioning {
    /// A quota'd directory on the pool: a GlusterVolume (mode subdir), or a gluster volume
    /// made by hand that a Secret describes (mode external).
    Subdir { pool: PoolKey },
    /// A GlusterVolume of its own on the named cluster.
    Dedicated {
        cluster: ObjectKey,
        volume_type: String,
        replica: Option<u32>,
        disperse_data: Option<u32>,
        disperse_redundancy: Option<u32>,
        brick_count: u32,
        profile: Option<String>,
    },
}

/// Parameters the external-provisioner adds itself (with --extra-create-metadata).
const PROVISIONER_PREFIX: &str = "csi.storage.k8s.io/";

fn number(field: &str, v: &str, min: u32, max: u32) -> Result<u32, ParamError> {
    v.parse::<u32>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| {
            bad(
                field,
                format!("{v:?} must be a whole number from {min} to {max}"),
            )
        })
}

impl Provisioning {
    /// Of a dedicated volume's raw space, the share that holds data, as (data, set) bricks:
    /// one copy per replica set (an arbiter set holds one copy's worth per three bricks),
    /// data of data + redundancy for disperse. None for subdirectory PVs.
    pub fn data_share(&self) -> Option<(u64, u64)> {
        let Provisioning::Dedicated {
            volume_type,
            replica,
            disperse_data,
            disperse_redundancy,
            ..
        } = self
        else {
            return None;
        };
        Some(match volume_type.as_str() {
            "Replicate" => (1, replica.unwrap_or(3).max(1) as u64),
            "Arbiter" => (1, 3),
            "Disperse" => {
                let d = disperse_data.unwrap_or(2) as u64;
                (d, d + disperse_redundancy.unwrap_or(1) as u64)
            }
            _ => (1, 1),
        })
    }

    pub fn from_parameters(params: &HashMap<String, String>) -> Result<Self, ParamError> {
        let known_subdir = ["mode", "pool", "subDir"];
        let known_dedicated = [
            "mode",
            "cluster",
            "type",
            "replica",
            "disperseData",
            "disperseRedundancy",
            "brickCount",
            "profile",
        ];
        let mode = params.get("mode").map(String::as_str).unwrap_or("subdir");
        let known: &[&str] = match mode {
            "subdir" | "external" => &known_subdir,
            "dedicated" => &known_dedicated,
            other => {
                return Err(bad(
                    "parameters.mode",
                    format!("{other:?} is not a mode; use subdir, external or dedicated"),
                ))
            }
        };
        let mut keys: Vec<&String> = params.keys().collect();
        keys.sort();
        for k in keys {
            if !known.contains(&k.as_str()) && !k.starts_with(PROVISIONER_PREFIX) {
                return Err(bad(
                    format!("parameters.{k}"),
                    format!(
                        "is not a parameter of mode {mode}; known: {}",
                        known.join(", ")
                    ),
                ));
            }
        }
        let get = |k: &str| params.get(k).map(String::as_str);
        match mode {
            "subdir" => {
                let pool = get("pool").ok_or_else(|| {
                    bad(
                        "parameters.pool",
                        "is required: the pool GlusterVolume as namespace/name",
                    )
                })?;
                Ok(Self::Subdir {
                    pool: PoolKey::Volume(ObjectKey::parse("parameters.pool", pool)?),
                })
            }
            "external" => {
                let pool = get("pool").ok_or_else(|| {
                    bad(
                        "parameters.pool",
                        "is required: the Secret describing the pool made by hand, as \
                         namespace/name (in the CSI driver's namespace)",
                    )
                })?;
                Ok(Self::Subdir {
                    pool: PoolKey::External(ObjectKey::parse("parameters.pool", pool)?),
                })
            }
            _ => {
                let cluster = get("cluster").ok_or_else(|| {
                    bad(
                        "parameters.cluster",
                        "is required: the GlusterCluster as namespace/name",
                    )
                })?;
                let volume_type = get("type").unwrap_or("Replicate").to_string();
                if !["Distribute", "Replicate", "Arbiter", "Disperse"]
                    .contains(&volume_type.as_str())
                {
                    return Err(bad(
                        "parameters.type",
                        format!(
                            "{volume_type:?} is not Distribute, Replicate, Arbiter or Disperse"
                        ),
                    ));
                }
                let replica = match (volume_type.as_str(), get("replica")) {
                    ("Replicate", None) => Some(3),
                    ("Replicate", Some(v)) => Some(number("parameters.replica", v, 2, 3)?),
                    (_, Some(_)) => {
                        return Err(bad("parameters.replica", "is only for type Replicate"))
                    }
                    (_, None) => None,
                };
                let (data, redundancy) = match (
                    volume_type.as_str(),
                    get("disperseData"),
                    get("disperseRedundancy"),
                ) {
                    ("Disperse", d, r) => {
                        let d = number("parameters.disperseData", d.unwrap_or("2"), 2, 16)?;
                        let r = number("parameters.disperseRedundancy", r.unwrap_or("1"), 1, 8)?;
                        if r >= d {
                            return Err(bad(
                                "parameters.disperseRedundancy",
                                format!("{r} must be less than disperseData {d}"),
                            ));
                        }
                        (Some(d), Some(r))
                    }
                    (_, None, None) => (None, None),
                    _ => return Err(bad("parameters.disperseData", "is only for type Disperse")),
                };
                let set = match volume_type.as_str() {
                    "Replicate" => replica.unwrap_or(3),
                    "Arbiter" => 3,
                    "Disperse" => data.unwrap_or(2) + redundancy.unwrap_or(1),
                    _ => 1,
                };
                let brick_count = match get("brickCount") {
                    Some(v) => number("parameters.brickCount", v, 1, 1024)?,
                    None => set,
                };
                if !brick_count.is_multiple_of(set) {
                    return Err(bad(
                        "parameters.brickCount",
                        format!("{brick_count} is not a multiple of the set size {set}"),
                    ));
                }
                let profile = get("profile").map(str::to_string);
                if let Some(p) = &profile {
                    if gk_api::crd::TuningProfile::parse(p).is_none() {
                        let names: Vec<&str> = gk_api::crd::TuningProfile::ALL
                            .iter()
                            .map(|p| p.name())
                            .collect();
                        return Err(bad(
                            "parameters.profile",
                            format!("{p:?} is not one of {}", names.join(", ")),
                        ));
                    }
                }
                Ok(Self::Dedicated {
                    cluster: ObjectKey::parse("parameters.cluster", cluster)?,
                    volume_type,
                    replica,
                    disperse_data: data,
                    disperse_redundancy: redundancy,
                    brick_count,
                    profile,
                })
            }
        }
    }
}

/// The claim a CreateVolume is for, from the parameters the external-provisioner adds with
/// --extra-create-metadata; None without them.
pub fn claim_of(params: &HashMap<String, String>) -> Option<ObjectKey> {
    Some(ObjectKey {
        namespace: params.get("csi.storage.k8s.io/pvc/namespace")?.clone(),
        name: params.get("csi.storage.k8s.io/pvc/name")?.clone(),
    })
}

/// The variables of a `subDir` template, and the provisioner parameters they are read from.
const SUBDIR_VARIABLES: [(&str, &str); 3] = [
    (
        "${pvc.metadata.namespace}",
        "csi.storage.k8s.io/pvc/namespace",
    ),
    ("${pvc.metadata.name}", "csi.storage.k8s.io/pvc/name"),
    ("${pv.metadata.name}", "csi.storage.k8s.io/pv/name"),
];

/// The directory of a subdirectory PV: the StorageClass's `subDir` template filled in from
/// the claim's metadata when it has one, else the name the provisioner gave.
pub fn subdir_for(name: &str, params: &HashMap<String, String>) -> Result<String, ParamError> {
    let Some(template) = params.get("subDir") else {
        return dir_for_name(name);
    };
    const FIELD: &str = "parameters.subDir";
    let unique = template.contains("${pv.metadata.name}")
        || (template.contains("${pvc.metadata.namespace}")
            && template.contains("${pvc.metadata.name}"));
    if !unique {
        return Err(bad(
            FIELD,
            format!(
                "{template:?} must include ${{pv.metadata.name}}, or both \
                 ${{pvc.metadata.namespace}} and ${{pvc.metadata.name}}, so that two claims \
                 never share a directory"
            ),
        ));
    }
    let mut dir = template.clone();
    for (var, key) in SUBDIR_VARIABLES {
        if dir.contains(var) {
            let value = params.get(key).ok_or_else(|| {
                bad(
                    FIELD,
                    format!(
                        "uses {var}, which the external-provisioner passes only with \
                         --extra-create-metadata (the chart sets it)"
                    ),
                )
            })?;
            dir = dir.replace(var, value);
        }
    }
    if let Some(i) = dir.find("${") {
        return Err(bad(
            FIELD,
            format!(
                "{template:?} has an unknown variable at {:?}; known: {}",
                &dir[i..],
                SUBDIR_VARIABLES.map(|(v, _)| v).join(", ")
            ),
        ));
    }
    let dir = dir.to_ascii_lowercase();
    let ok = valid_dir(&dir)
        && dir.len() <= 200
        && dir
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'));
    if !ok {
        return Err(bad(
            FIELD,
            format!(
                "{template:?} gives {dir:?}, which is not one plain directory name (letters, \
                 digits, '-' and '.', not beginning with '.', at most 200)"
            ),
        ));
    }
    Ok(dir)
}

/// The directory (or GlusterVolume) name for a CSI volume name: the name itself when it is
/// safe, which it is for the external-provisioner's `pvc-<uuid>`; otherwise a hash of it.
pub fn dir_for_name(name: &str) -> Result<String, ParamError> {
    if name.is_empty() {
        return Err(bad("name", "is required"));
    }
    let lower = name.to_ascii_lowercase();
    if valid_dir(&lower)
        && lower.len() <= 63
        && lower
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && !lower.contains('_')
        && !lower.contains('.')
    {
        return Ok(lower);
    }
    let h = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    Ok(format!("vol-{h:016x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn field(r: Result<Provisioning, ParamError>) -> String {
        r.unwrap_err().field
    }

    #[test]
    fn subdir_is_the_default() {
        let got = Provisioning::from_parameters(&p(&[
            ("pool", "storage/pool"),
            ("csi.storage.k8s.io/pvc/name", "x"),
        ]))
        .unwrap();
        assert_eq!(
            got,
            Provisioning::Subdir {
                pool: PoolKey::Volume(ObjectKey {
                    namespace: "storage".into(),
                    name: "pool".into()
                })
            }
        );
        let external = Provisioning::from_parameters(&p(&[
            ("mode", "external"),
            ("pool", "glusterkube-system/legacy"),
            ("subDir", "${pv.metadata.name}"),
        ]))
        .unwrap();
        assert_eq!(
            external,
            Provisioning::Subdir {
                pool: PoolKey::External(ObjectKey {
                    namespace: "glusterkube-system".into(),
                    name: "legacy".into()
                })
            }
        );
        for (params, named) in [
            (vec![("mode", "external")], "parameters.pool"),
            (
                vec![("mode", "external"), ("pool", "legacy")],
                "parameters.pool",
            ),
            (
                vec![("mode", "external"), ("pool", "s/p"), ("cluster", "s/c")],
                "parameters.cluster",
            ),
        ] {
            assert_eq!(field(Provisioning::from_parameters(&p(&params))), named);
        }
    }

    #[test]
    fn dedicated_defaults_and_checks() {
        let got = Provisioning::from_parameters(&p(&[
            ("mode", "dedicated"),
            ("cluster", "s/c"),
            ("type", "Disperse"),
        ]))
        .unwrap();
        assert_eq!(got.data_share(), Some((2, 3)), "2 of 2+1 bricks hold data");
        let share = |t: &str, extra: &[(&str, &str)]| {
            let mut params = vec![("mode", "dedicated"), ("cluster", "s/c"), ("type", t)];
            params.extend_from_slice(extra);
            Provisioning::from_parameters(&p(&params))
                .unwrap()
                .data_share()
        };
        assert_eq!(share("Replicate", &[("replica", "2")]), Some((1, 2)));
        assert_eq!(share("Arbiter", &[]), Some((1, 3)));
        assert_eq!(share("Distribute", &[]), Some((1, 1)));
        let subdir = Provisioning::from_parameters(&p(&[("pool", "s/p")])).unwrap();
        assert_eq!(subdir.data_share(), None);
        match got {
            Provisioning::Dedicated {
                disperse_data,
                disperse_redundancy,
                brick_count,
                ..
            } => {
                assert_eq!(
                    (disperse_data, disperse_redundancy, brick_count),
                    (Some(2), Some(1), 3)
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subdir_templates_fill_in_the_claim_and_refuse_what_is_unsafe() {
        let meta = [
            ("csi.storage.k8s.io/pvc/namespace", "Team-A"),
            ("csi.storage.k8s.io/pvc/name", "data"),
            ("csi.storage.k8s.io/pv/name", "pvc-1234"),
        ];
        let with = |t: &str| {
            let mut m = p(&meta);
            m.insert("subDir".into(), t.into());
            m
        };
        assert_eq!(
            subdir_for(
                "pvc-1234",
                &with("${pvc.metadata.namespace}-${pvc.metadata.name}")
            ),
            Ok("team-a-data".into())
        );
        assert_eq!(
            subdir_for("x", &with("k8s-${pv.metadata.name}")),
            Ok("k8s-pvc-1234".into())
        );
        assert_eq!(subdir_for("pvc-9", &p(&meta)), Ok("pvc-9".into()));
        for bad in [
            "${pvc.metadata.name}",
            "${pv.metadata.name}/x",
            ".${pv.metadata.name}",
            "${pv.metadata.name}-${pvc.metadata.uid}",
        ] {
            assert_eq!(
                subdir_for("n", &with(bad)).unwrap_err().field,
                "parameters.subDir",
                "{bad}"
            );
        }
        let mut no_meta = p(&[]);
        no_meta.insert("subDir".into(), "${pv.metadata.name}".into());
        let e = subdir_for("n", &no_meta).unwrap_err();
        assert!(e.reason.contains("--extra-create-metadata"), "{e:?}");
        assert_eq!(
            claim_of(&p(&meta)),
            Some(ObjectKey {
                namespace: "Team-A".into(),
                name: "data".into()
            })
        );
    }

    #[test]
    fn snapshot_ids_round_trip_and_hidden_dirs_are_refused() {
        let key = ObjectKey {
            namespace: "ns".into(),
            name: "pool".into(),
        };
        for pool in [PoolKey::Volume(key.clone()), PoolKey::External(key)] {
            let id = SnapshotId {
                pool,
                name: "snapshot-1".into(),
            };
            assert_eq!(SnapshotId::parse(&id.to_string()).unwrap(), id);
        }
        assert_eq!(
            SnapshotId::parse("external-snapshot/ns/pool/s")
                .unwrap()
                .pool,
            PoolKey::External(ObjectKey {
                namespace: "ns".into(),
                name: "pool".into()
            })
        );
        for bad in [
            "snapshot/ns/pool/.glusterkube-snapshots",
            "snapshot/ns/pool",
            "subdir/ns/pool/x",
        ] {
            assert_eq!(SnapshotId::parse(bad).unwrap_err().field, "snapshot_id");
        }
        assert!(VolumeId::parse("subdir/ns/pool/.glusterkube-snapshots").is_err());
    }

    #[test]
    fn bad_parameters_are_named() {
        assert_eq!(
            field(Provisioning::from_parameters(&p(&[]))),
            "parameters.pool"
        );
        assert_eq!(
            field(Provisioning::from_parameters(&p(&[
                ("pool", "s/p"),
                ("replica", "3")
            ]))),
            "parameters.replica"
        );
        assert_eq!(
            field(Provisioning::from_parameters(&p(&[("pool", "nopool")]))),
            "parameters.pool"
        );
        assert_eq!(
            field(Provisioning::from_parameters(&p(&[("mode", "fast")]))),
            "parameters.mode"
        );
        let d = |extra: &[(&str, &str)]| {
            let mut all = vec![("mode", "dedicated"), ("cluster", "s/c")];
            all.extend_from_slice(extra);
            Provisioning::from_parameters(&p(&all))
        };
        assert_eq!(field(d(&[("type", "Stripe")])), "parameters.type");
        assert_eq!(field(d(&[("replica", "4")])), "parameters.replica");
        assert_eq!(
            field(d(&[("type", "Arbiter"), ("replica", "3")])),
            "parameters.replica"
        );
        assert_eq!(
            field(d(&[
                ("type", "Disperse"),
                ("disperseData", "2"),
                ("disperseRedundancy", "2")
            ])),
            "parameters.disperseRedundancy"
        );
        assert_eq!(field(d(&[("brickCount", "4")])), "parameters.brickCount");
        assert_eq!(field(d(&[("profile", "Fast")])), "parameters.profile");
        assert_eq!(field(d(&[("pool", "s/p")])), "parameters.pool");
    }

    #[test]
    fn volume_ids_round_trip_and_refuse_garbage() {
        for s in [
            "subdir/storage/pool/pvc-1234",
            "external/glusterkube-system/legacy/pvc-1",
            "dedicated/team-a/pvc-9",
        ] {
            assert_eq!(VolumeId::parse(s).unwrap().to_string(), s);
        }
        for bad in [
            "",
            "subdir/a/b",
            "subdir/a/b/../x",
            "subdir/a/b/c/d",
            "other/a/b",
            "subdir/A/b/c",
            "subdir/a/b/..",
        ] {
            assert!(VolumeId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn directory_names() {
        assert_eq!(dir_for_name("pvc-0f3c-11").unwrap(), "pvc-0f3c-11");
        let odd = dir_for_name("My Volume/../x").unwrap();
        assert!(odd.starts_with("vol-") && valid_dir(&odd), "{odd}");
        assert_ne!(odd, dir_for_name("My Volume/../y").unwrap());
        assert!(dir_for_name("").is_err());
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        /// Strings mixing the characters that matter for IDs and paths.
        const TRICKY: &str = "[a-z0-9/._%\\-]{0,40}|.{0,60}|(\\.\\.|/|\\x00|[a-z]{1,6}){0,12}";

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// Whatever a caller sends as a volume ID, a parsed subdirectory is one plain name
            /// (no separator, no `..`, no NUL), so it cannot leave its pool volume, and the ID
            /// prints back to what was parsed.
            #[test]
            fn volume_ids_never_name_a_path_outside_the_pool(s in TRICKY) {
                if let Ok(id) = VolumeId::parse(&s) {
                    if let VolumeId::Subdir { dir, .. } = &id {
                        prop_assert!(valid_dir(dir));
                        prop_assert!(!dir.contains('/') && !dir.contains('\0'));
                        prop_assert!(dir != "." && dir != "..");
                    }
                    prop_assert_eq!(id.to_string(), s);
                }
            }

            #[test]
            fn valid_volume_ids_round_trip(
                ns in "[a-z]([a-z0-9-]{0,20}[a-z0-9])?",
                name in "[a-z]([a-z0-9-]{0,20}[a-z0-9])?",
                dir in "[a-zA-Z0-9_-][a-zA-Z0-9._-]{0,40}",
            ) {
                let s = format!("subdir/{ns}/{name}/{dir}");
                let id = VolumeId::parse(&s).unwrap();
                prop_assert_eq!(id.to_string(), s);
                let s = format!("external/{ns}/{name}/{dir}");
                prop_assert_eq!(VolumeId::parse(&s).unwrap().to_string(), s);
                let s = format!("dedicated/{ns}/{name}");
                prop_assert_eq!(VolumeId::parse(&s).unwrap().to_string(), s);
            }

            /// Any CSI volume name maps to a safe directory name, and different names that
            /// are not already safe map to hashed names.
            #[test]
            fn any_name_gives_a_safe_directory(name in TRICKY) {
                match dir_for_name(&name) {
                    Ok(dir) => {
                        prop_assert!(valid_dir(&dir), "{dir:?}");
                        prop_assert!(dir.len() <= 63);
                        prop_assert!(dir != "." && dir != ".." && !dir.starts_with('.'));
                    }
                    Err(e) => prop_assert!(name.is_empty(), "{e:?}"),
                }
            }

            /// StorageClass parameters: arbitrary keys and values never panic, and an error
            /// always names a field.
            #[test]
            fn arbitrary_parameters_are_accepted_or_named(
                pairs in proptest::collection::vec(
                    (
                        prop_oneof![
                            Just("pool".to_string()),
                            Just("mode".to_string()),
                            Just("cluster".to_string()),
                            Just("type".to_string()),
                            Just("replica".to_string()),
                            Just("disperseData".to_string()),
                            Just("disperseRedundancy".to_string()),
                            Just("brickCount".to_string()),
                            Just("profile".to_string()),
                            "[a-zA-Z./]{0,20}",
                        ],
                        TRICKY,
                    ),
                    0..8,
                )
            ) {
                let params: HashMap<String, String> = pairs.into_iter().collect();
                if let Err(e) = Provisioning::from_parameters(&params) {
                    prop_assert!(!e.field.is_empty());
                    prop_assert!(!e.reason.is_empty());
                }
            }
        }
    }
}
