//! The CSI driver's volume and snapshot IDs, which say where a volume lives with no lookup,
//! and the names in them; shared with tools that read PVs (kubectl gluster).

/// The CSI driver's name, as PVs and StorageClasses carry it.
pub const DRIVER_NAME: &str = "gluster.glusterkube.dev";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct ParamError {
    pub field: String,
    pub reason: String,
}

impl ParamError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

fn bad(field: impl Into<String>, reason: impl Into<String>) -> ParamError {
    ParamError::new(field, reason)
}

/// A namespaced reference written `namespace/name`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn parse(field: &str, s: &str) -> Result<Self, ParamError> {
        let (ns, name) = s
            .split_once('/')
            .ok_or_else(|| bad(field, format!("{s:?} must be namespace/name")))?;
        for part in [ns, name] {
            let ok = !part.is_empty()
                && part.len() <= 253
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
                && !part.starts_with(['-', '.'])
                && !part.ends_with(['-', '.']);
            if !ok {
                return Err(bad(
                    field,
                    format!("{s:?}: {part:?} is not a Kubernetes name"),
                ));
            }
        }
        Ok(Self {
            namespace: ns.into(),
            name: name.into(),
        })
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The pool a subdirectory volume or a snapshot lives on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PoolKey {
    /// A pool GlusterVolume this operator runs.
    Volume(ObjectKey),
    /// A pool made by hand (external mode), described by a Secret of type
    /// [`EXTERNAL_POOL_SECRET_TYPE`] in the CSI driver's namespace.
    External(ObjectKey),
}

/// The type of the Secret that describes an external pool.
pub const EXTERNAL_POOL_SECRET_TYPE: &str = "glusterkube.dev/external-pool";

impl PoolKey {
    /// The object that declares the pool: a GlusterVolume or a Secret.
    pub fn key(&self) -> &ObjectKey {
        match self {
            Self::Volume(k) | Self::External(k) => k,
        }
    }

    /// The first word of the pool's volume IDs and of its snapshots' IDs.
    fn words(&self) -> (&'static str, &'static str) {
        match self {
            Self::Volume(_) => ("subdir", "snapshot"),
            Self::External(_) => ("external", "external-snapshot"),
        }
    }

    fn parse_parts(kind: &str, ns: &str, name: &str, field: &str) -> Result<Self, ParamError> {
        let key = ObjectKey::parse(field, &format!("{ns}/{name}"))?;
        Ok(if kind == "external" {
            Self::External(key)
        } else {
            Self::Volume(key)
        })
    }
}

/// `namespace/name` for a GlusterVolume pool, as StorageClasses name it; `external
/// namespace/name` for a pool made by hand.
impl std::fmt::Display for PoolKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Volume(k) => write!(f, "{k}"),
            Self::External(k) => write!(f, "external {k}"),
        }
    }
}

/// A volume ID: everything later calls need, with no lookup.
///
/// - `subdir/<pool namespace>/<pool name>/<directory>`
/// - `external/<Secret namespace>/<Secret name>/<directory>` (a pool made by hand)
/// - `dedicated/<namespace>/<GlusterVolume name>`
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum VolumeId {
    Subdir { pool: PoolKey, dir: String },
    Dedicated { volume: ObjectKey },
}

impl VolumeId {
    pub fn parse(s: &str) -> Result<Self, ParamError> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts.as_slice() {
            [kind @ ("subdir" | "external"), ns, name, dir] => {
                let pool = PoolKey::parse_parts(kind, ns, name, "volume_id")?;
                if !valid_dir(dir) {
                    return Err(bad(
                        "volume_id",
                        format!("{dir:?} is not a volume directory"),
                    ));
                }
                Ok(Self::Subdir {
                    pool,
                    dir: dir.to_string(),
                })
            }
            ["dedicated", ns, name] => Ok(Self::Dedicated {
                volume: ObjectKey::parse("volume_id", &format!("{ns}/{name}"))?,
            }),
            _ => Err(bad(
                "volume_id",
                format!("{s:?} is not a volume ID of this driver"),
            )),
        }
    }
}

impl std::fmt::Display for VolumeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Subdir { pool, dir } => {
                let k = pool.key();
                write!(f, "{}/{}/{}/{dir}", pool.words().0, k.namespace, k.name)
            }
            Self::Dedicated { volume } => {
                write!(f, "dedicated/{}/{}", volume.namespace, volume.name)
            }
        }
    }
}

/// A snapshot of a subdirectory volume: its pool and its name there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotId {
    pub pool: PoolKey,
    pub name: String,
}

impl SnapshotId {
    pub fn parse(s: &str) -> Result<Self, ParamError> {
        match s.split('/').collect::<Vec<_>>().as_slice() {
            [kind @ ("snapshot" | "external-snapshot"), ns, pool, name] if valid_dir(name) => {
                let kind = if *kind == "snapshot" {
                    "subdir"
                } else {
                    "external"
                };
                Ok(Self {
                    pool: PoolKey::parse_parts(kind, ns, pool, "snapshot_id")?,
                    name: name.to_string(),
                })
            }
            _ => Err(bad(
                "snapshot_id",
                format!("{s:?} is not a snapshot ID of this driver"),
            )),
        }
    }
}

impl std::fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = self.pool.key();
        write!(
            f,
            "{}/{}/{}/{}",
            self.pool.words().1,
            k.namespace,
            k.name,
            self.name
        )
    }
}

/// A directory or snapshot name: plain, and not beginning with a dot (the pool's own
/// directories do, such as its snapshots').
pub fn valid_dir(d: &str) -> bool {
    !d.is_empty()
        && d.len() <= 200
        && !d.starts_with('.')
        && d.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}
