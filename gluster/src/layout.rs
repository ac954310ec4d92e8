use std::collections::HashSet;
use std::fmt;

use crate::GlusterError;

/// How a volume spreads data over its bricks. Distributed forms (for example 2 × 3
/// distributed-replicate) follow from giving a multiple of the set size in bricks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeLayout {
    Distribute,
    Replicate {
        replica: u32,
    },
    /// `replica 3 arbiter 1`: two data bricks and a metadata-only arbiter per set.
    Arbiter,
    Disperse {
        data: u32,
        redundancy: u32,
    },
}

impl VolumeLayout {
    /// Bricks in one replica or disperse set; 1 for plain distribute.
    pub fn set_size(&self) -> u32 {
        match *self {
            Self::Distribute => 1,
            Self::Replicate { replica } => replica,
            Self::Arbiter => 3,
            Self::Disperse { data, redundancy } => data + redundancy,
        }
    }

    /// Bricks of one set that hold distinct data: replicas and arbiters hold copies or
    /// metadata, so a set holds what one brick does; a disperse set holds `data` bricks' worth.
    pub fn data_bricks(&self) -> u32 {
        match *self {
            Self::Disperse { data, .. } => data,
            _ => 1,
        }
    }

    /// The layout gluster reports for a volume by its counts (`volume info`): replica and
    /// arbiter count, disperse and redundancy count. Replica 1 or 0 is plain distribute.
    pub fn from_counts(replica: u32, arbiter: u32, disperse: u32, redundancy: u32) -> Self {
        if disperse > 0 {
            Self::Disperse {
                data: disperse.saturating_sub(redundancy),
                redundancy,
            }
        } else if arbiter > 0 {
            Self::Arbiter
        } else if replica > 1 {
            Self::Replicate { replica }
        } else {
            Self::Distribute
        }
    }

    pub fn validate(&self) -> Result<(), GlusterError> {
        match *self {
            Self::Distribute | Self::Arbiter => Ok(()),
            Self::Replicate { replica } if !(2..=3).contains(&replica) => {
                Err(GlusterError::invalid(
                    "replica",
                    format!("{replica} is not supported; use 2 or 3 (or the arbiter type)"),
                ))
            }
            Self::Replicate { .. } => Ok(()),
            Self::Disperse { data, .. } if data < 2 => Err(GlusterError::invalid(
                "disperse.data",
                format!("{data} data bricks is too few; use at least 2"),
            )),
            Self::Disperse { redundancy, .. } if redundancy < 1 => Err(GlusterError::invalid(
                "disperse.redundancy",
                "must be at least 1; without redundancy use the distribute type",
            )),
            Self::Disperse { data, redundancy } if redundancy >= data => {
                Err(GlusterError::invalid(
                    "disperse.redundancy",
                    format!("{redundancy} must be less than the {data} data bricks"),
                ))
            }
            Self::Disperse { .. } => Ok(()),
        }
    }

    fn create_words(&self) -> Vec<String> {
        match *self {
            Self::Distribute => vec![],
            Self::Replicate { replica } => vec!["replica".into(), replica.to_string()],
            Self::Arbiter => ["replica", "3", "arbiter", "1"].map(String::from).to_vec(),
            Self::Disperse { data, redundancy } => vec![
                "disperse-data".into(),
                data.to_string(),
                "redundancy".into(),
                redundancy.to_string(),
            ],
        }
    }
}

/// One brick: a directory on a peer, written `host:/path` as gluster does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Brick {
    pub host: String,
    pub path: String,
}

impl Brick {
    pub fn new(host: impl Into<String>, path: impl Into<String>) -> Result<Self, GlusterError> {
        let brick = Self {
            host: host.into(),
            path: path.into(),
        };
        brick.validate()?;
        Ok(brick)
    }

    pub fn parse(s: &str) -> Result<Self, GlusterError> {
        let (host, path) = s
            .split_once(":/")
            .ok_or_else(|| GlusterError::invalid("brick", format!("{s:?} is not host:/path")))?;
        Self::new(host, format!("/{path}"))
    }

    fn validate(&self) -> Result<(), GlusterError> {
        validate_host("brick.host", &self.host)?;
        if !self.path.starts_with('/') || self.path == "/" {
            return Err(GlusterError::invalid(
                "brick.path",
                format!("{:?} must be an absolute directory below /", self.path),
            ));
        }
        if self.path.split('/').any(|part| part == ".." || part == ".")
            || self.path.contains("//")
            || self
                .path
                .chars()
                .any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(GlusterError::invalid(
                "brick.path",
                format!("{:?} must be a normalised path without spaces", self.path),
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Brick {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.path)
    }
}

/// Gluster's rule for volume names, stricter on length so names stay usable in paths.
pub fn validate_volume_name(name: &str) -> Result<(), GlusterError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(GlusterError::invalid(
            "volume name",
            format!("{name:?} must be 1-64 letters, digits, '-' or '_', not starting with '-'"),
        ))
    }
}

/// Checks that `bricks` make whole sets of the layout and name no brick twice.
fn check_bricks(layout: VolumeLayout, bricks: &[Brick]) -> Result<(), GlusterError> {
    layout.validate()?;
    let set = layout.set_size() as usize;
    if bricks.is_empty() || !bricks.len().is_multiple_of(set) {
        return Err(GlusterError::invalid(
            "bricks",
            format!(
                "{} bricks do not make whole sets of {set}; give a multiple of {set}",
                bricks.len()
            ),
        ));
    }
    check_distinct(bricks)
}

/// Checks each brick and that none is listed twice.
pub(crate) fn check_distinct(bricks: &[Brick]) -> Result<(), GlusterError> {
    if bricks.is_empty() {
        return Err(GlusterError::invalid(
            "bricks",
            "at least one brick is needed",
        ));
    }
    let mut seen = HashSet::new();
    for b in bricks {
        b.validate()?;
        if !seen.insert(b) {
            return Err(GlusterError::invalid(
                "bricks",
                format!("{b} is listed twice"),
            ));
        }
    }
    Ok(())
}

/// A hostname or IPv4 address as gluster takes it for peers and bricks.
pub(crate) fn validate_host(field: &'static str, host: &str) -> Result<(), GlusterError> {
    let ok = !host.is_empty()
        && host.len() <= 253
        && !host.starts_with('-')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(GlusterError::invalid(
            field,
            format!("{host:?} is not a hostname or IPv4 address"),
        ))
    }
}

/// The arguments of `gluster volume create`, after checking that the bricks fit the layout.
/// `force` is needed only when gluster would refuse bricks of one set on one host.
pub(crate) fn create_args(
    name: &str,
    layout: VolumeLayout,
    bricks: &[Brick],
    force: bool,
) -> Result<Vec<String>, GlusterError> {
    validate_volume_name(name)?;
    check_bricks(layout, bricks)?;
    let mut args = vec!["volume".to_string(), "create".into(), name.into()];
    args.extend(layout.create_words());
    args.extend(bricks.iter().map(Brick::to_string));
    if force {
        args.push("force".into());
    }
    Ok(args)
}

/// The arguments of `gluster volume add-brick` for whole new sets of the volume's layout.
/// Gluster's add-brick knows `replica N [arbiter 1]` but no disperse words: a dispersed
/// volume takes new sets of its own size without them.
pub(crate) fn add_brick_args(
    name: &str,
    layout: VolumeLayout,
    bricks: &[Brick],
    force: bool,
) -> Result<Vec<String>, GlusterError> {
    validate_volume_name(name)?;
    check_bricks(layout, bricks)?;
    let mut args = vec!["volume".to_string(), "add-brick".into(), name.into()];
    match layout {
        VolumeLayout::Replicate { .. } | VolumeLayout::Arbiter => {
            args.extend(layout.create_words())
        }
        VolumeLayout::Distribute | VolumeLayout::Disperse { .. } => {}
    }
    args.extend(bricks.iter().map(Brick::to_string));
    if force {
        args.push("force".into());
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bricks(n: usize) -> Vec<Brick> {
        (0..n)
            .map(|i| Brick::new(format!("n{}", i % 3), format!("/b/{i}")).unwrap())
            .collect()
    }

    #[test]
    fn layouts_read_back_from_gluster_counts() {
        let ec = VolumeLayout::from_counts(1, 0, 3, 1);
        assert_eq!(
            ec,
            VolumeLayout::Disperse {
                data: 2,
                redundancy: 1
            }
        );
        assert_eq!((ec.set_size(), ec.data_bricks()), (3, 2));
        let arbiter = VolumeLayout::from_counts(3, 1, 0, 0);
        assert_eq!((arbiter.set_size(), arbiter.data_bricks()), (3, 1));
        assert_eq!(
            VolumeLayout::from_counts(3, 0, 0, 0),
            VolumeLayout::Replicate { replica: 3 }
        );
        for replica in [0, 1] {
            assert_eq!(
                VolumeLayout::from_counts(replica, 0, 0, 0),
                VolumeLayout::Distribute
            );
        }
    }

    #[test]
    fn create_words_per_layout() {
        let a = create_args(
            "v",
            VolumeLayout::Replicate { replica: 3 },
            &bricks(6),
            false,
        )
        .unwrap();
        assert_eq!(a[..5], ["volume", "create", "v", "replica", "3"]);
        assert_eq!(a.len(), 5 + 6);
        let a = create_args("v", VolumeLayout::Arbiter, &bricks(3), true).unwrap();
        assert_eq!(a[3..7], ["replica", "3", "arbiter", "1"]);
        assert_eq!(a.last().unwrap(), "force");
        let a = create_args(
            "v",
            VolumeLayout::Disperse {
                data: 2,
                redundancy: 1,
            },
            &bricks(3),
            false,
        )
        .unwrap();
        assert_eq!(a[3..7], ["disperse-data", "2", "redundancy", "1"]);
        let a = create_args("v", VolumeLayout::Distribute, &bricks(2), false).unwrap();
        assert_eq!(a, ["volume", "create", "v", "n0:/b/0", "n1:/b/1"]);
    }

    #[test]
    fn add_brick_words_per_layout() {
        let a = add_brick_args(
            "v",
            VolumeLayout::Replicate { replica: 3 },
            &bricks(3),
            false,
        )
        .unwrap();
        assert_eq!(
            a,
            [
                "volume",
                "add-brick",
                "v",
                "replica",
                "3",
                "n0:/b/0",
                "n1:/b/1",
                "n2:/b/2"
            ]
        );
        let a = add_brick_args("v", VolumeLayout::Arbiter, &bricks(3), true).unwrap();
        assert_eq!(a[3..7], ["replica", "3", "arbiter", "1"]);
        assert_eq!(a.last().unwrap(), "force");
        let disperse = VolumeLayout::Disperse {
            data: 2,
            redundancy: 1,
        };
        let a = add_brick_args("v", disperse, &bricks(3), false).unwrap();
        assert_eq!(
            a,
            ["volume", "add-brick", "v", "n0:/b/0", "n1:/b/1", "n2:/b/2"]
        );
        let err = add_brick_args(
            "v",
            VolumeLayout::Replicate { replica: 3 },
            &bricks(2),
            false,
        )
        .unwrap_err();
        assert!(matches!(
            err,
            GlusterError::Invalid {
                field: "bricks",
                ..
            }
        ));
        assert!(add_brick_args("-v", VolumeLayout::Distribute, &bricks(1), false).is_err());
    }

    #[test]
    fn rejects_layouts_that_do_not_fit() {
        let err = |l, n| {
            create_args("v", l, &bricks(n), false)
                .unwrap_err()
                .to_string()
        };
        assert!(err(VolumeLayout::Replicate { replica: 3 }, 4).contains("multiple of 3"));
        assert!(err(VolumeLayout::Replicate { replica: 4 }, 4).contains("invalid replica"));
        assert!(err(
            VolumeLayout::Disperse {
                data: 2,
                redundancy: 2
            },
            4
        )
        .contains("invalid disperse.redundancy"));
        assert!(err(
            VolumeLayout::Disperse {
                data: 1,
                redundancy: 1
            },
            2
        )
        .contains("invalid disperse.data"));
        assert!(err(VolumeLayout::Distribute, 0).contains("invalid bricks"));
        let dup = vec![Brick::parse("h:/a").unwrap(), Brick::parse("h:/a").unwrap()];
        assert!(create_args("v", VolumeLayout::Distribute, &dup, false)
            .unwrap_err()
            .to_string()
            .contains("listed twice"));
    }

    #[test]
    fn validates_names_and_bricks() {
        for bad in ["", "-x", "a b", "a/b", &"x".repeat(65)] {
            assert!(validate_volume_name(bad).is_err(), "{bad:?}");
        }
        validate_volume_name("pool_1-a").unwrap();
        for bad in [
            "h",
            "h:rel",
            ":/x",
            "h:/",
            "h:/a/../b",
            "h:/a b",
            "h h:/a",
            "h:/a//b",
        ] {
            assert!(Brick::parse(bad).is_err(), "{bad:?}");
        }
        let b = Brick::parse("10.0.0.1:/data/brick1").unwrap();
        assert_eq!(b.host, "10.0.0.1");
        assert_eq!(b.to_string(), "10.0.0.1:/data/brick1");
    }
}
