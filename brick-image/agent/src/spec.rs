//! Validation of requests into gluster's typed values. Every error names the request field.

use std::collections::BTreeMap;

use gk_gluster::{Brick, Volume, VolumeLayout};

use crate::proto::{VolumeSpec, VolumeType};
use crate::AgentError;

/// A volume request, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredVolume {
    pub name: String,
    pub layout: VolumeLayout,
    pub bricks: Vec<Brick>,
    pub options: BTreeMap<String, String>,
    pub force: bool,
}

pub fn volume_name(field: &str, name: &str) -> Result<String, AgentError> {
    gk_gluster::validate_volume_name(name)
        .map_err(|e| AgentError::invalid(field, e.to_string()))?;
    Ok(name.to_string())
}

pub fn bricks(field: &str, bricks: &[String]) -> Result<Vec<Brick>, AgentError> {
    if bricks.is_empty() {
        return Err(AgentError::invalid(field, "at least one brick is needed"));
    }
    bricks
        .iter()
        .enumerate()
        .map(|(i, b)| {
            Brick::parse(b).map_err(|e| AgentError::invalid(format!("{field}[{i}]"), e.to_string()))
        })
        .collect()
}

/// Option keys are gluster's dotted names; values are single-line.
pub fn options(field: &str, opts: &BTreeMap<String, String>) -> Result<(), AgentError> {
    for (k, v) in opts {
        let key_ok = k.contains('.')
            && k.split('.').all(|w| {
                !w.is_empty()
                    && w.chars().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
                    })
            });
        if !key_ok {
            return Err(AgentError::invalid(
                format!("{field}[{k}]"),
                "is not a gluster option name such as performance.cache-size",
            ));
        }
        if v.is_empty() || v.chars().any(char::is_control) {
            return Err(AgentError::invalid(
                format!("{field}[{k}]"),
                "the value must be one non-empty line",
            ));
        }
    }
    Ok(())
}

impl DesiredVolume {
    pub fn from_spec(spec: Option<&VolumeSpec>) -> Result<Self, AgentError> {
        let spec = spec.ok_or_else(|| AgentError::invalid("spec", "is required"))?;
        let name = volume_name("spec.name", &spec.name)?;
        let ty = VolumeType::try_from(spec.r#type).map_err(|_| {
            AgentError::invalid("spec.type", format!("{} is not a volume type", spec.r#type))
        })?;
        let unused = |field: &str, v: u32| {
            if v != 0 {
                Err(AgentError::invalid(
                    field,
                    format!("is only for another volume type than {}", ty.as_str_name()),
                ))
            } else {
                Ok(())
            }
        };
        let layout = match ty {
            VolumeType::Unspecified => {
                return Err(AgentError::invalid(
                    "spec.type",
                    "is required: DISTRIBUTE, REPLICATE, ARBITER or DISPERSE",
                ))
            }
            VolumeType::Distribute | VolumeType::Arbiter => {
                unused("spec.replica", spec.replica)?;
                unused("spec.disperse_data", spec.disperse_data)?;
                unused("spec.disperse_redundancy", spec.disperse_redundancy)?;
                if ty == VolumeType::Arbiter {
                    VolumeLayout::Arbiter
                } else {
                    VolumeLayout::Distribute
                }
            }
            VolumeType::Replicate => {
                unused("spec.disperse_data", spec.disperse_data)?;
                unused("spec.disperse_redundancy", spec.disperse_redundancy)?;
                VolumeLayout::Replicate {
                    replica: spec.replica,
                }
            }
            VolumeType::Disperse => {
                unused("spec.replica", spec.replica)?;
                VolumeLayout::Disperse {
                    data: spec.disperse_data,
                    redundancy: spec.disperse_redundancy,
                }
            }
        };
        layout.validate().map_err(|e| match e {
            gk_gluster::GlusterError::Invalid { field, reason } => AgentError::invalid(
                match field {
                    "replica" => "spec.replica",
                    "disperse.data" => "spec.disperse_data",
                    "disperse.redundancy" => "spec.disperse_redundancy",
                    other => other,
                },
                reason,
            ),
            other => other.into(),
        })?;
        let bricks = bricks("spec.bricks", &spec.bricks)?;
        let set = layout.set_size() as usize;
        if !bricks.len().is_multiple_of(set) {
            return Err(AgentError::invalid(
                "spec.bricks",
                format!(
                    "{} bricks do not make whole sets of {set}; give a multiple of {set}",
                    bricks.len()
                ),
            ));
        }
        let options: BTreeMap<String, String> = spec.options.clone().into_iter().collect();
        self::options("spec.options", &options)?;
        Ok(Self {
            name,
            layout,
            bricks,
            options,
            force: spec.force,
        })
    }

    /// Whether an existing gluster volume has this layout and these bricks, in order.
    pub fn matches(&self, v: &Volume) -> Result<(), Mismatch> {
        let layout_ok = match self.layout {
            VolumeLayout::Distribute => v.replica_count <= 1 && v.disperse_count == 0,
            VolumeLayout::Replicate { replica } => {
                v.replica_count == replica && v.arbiter_count == 0
            }
            VolumeLayout::Arbiter => v.replica_count == 3 && v.arbiter_count == 1,
            VolumeLayout::Disperse { data, redundancy } => {
                v.disperse_count == data + redundancy && v.redundancy_count == redundancy
            }
        };
        if !layout_ok {
            return Err(Mismatch::Layout {
                volume: v.name.clone(),
                exists_as: format!(
                    "{} (replica {}, arbiter {}, disperse {}, redundancy {})",
                    v.type_name,
                    v.replica_count,
                    v.arbiter_count,
                    v.disperse_count,
                    v.redundancy_count
                ),
                requested: self.layout,
            });
        }
        let have: Vec<&Brick> = v.bricks.iter().map(|b| &b.brick).collect();
        let want: Vec<&Brick> = self.bricks.iter().collect();
        if have != want {
            let show = |b: &[&Brick]| {
                b.iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            return Err(Mismatch::Bricks {
                volume: v.name.clone(),
                have: show(&have),
                want: show(&want),
            });
        }
        Ok(())
    }
}

/// How an existing gluster volume differs from the one asked for (a create of a name that
/// exists otherwise: the caller picks another name or deletes the old volume).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    #[error("volume {volume} exists as {exists_as}, not as requested {requested:?}")]
    Layout {
        volume: String,
        exists_as: String,
        requested: VolumeLayout,
    },
    #[error("volume {volume} exists with bricks [{have}], not the requested [{want}]")]
    Bricks {
        volume: String,
        have: String,
        want: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(ty: VolumeType, replica: u32, data: u32, red: u32, n: usize) -> VolumeSpec {
        VolumeSpec {
            name: "v1".into(),
            r#type: ty as i32,
            replica,
            disperse_data: data,
            disperse_redundancy: red,
            bricks: (0..n).map(|i| format!("h{}:/b/{i}", i % 3)).collect(),
            options: Default::default(),
            force: false,
        }
    }

    fn field(r: Result<DesiredVolume, AgentError>) -> String {
        match r.unwrap_err() {
            AgentError::Invalid { field, .. } => field,
            other => panic!("{other}"),
        }
    }

    #[test]
    fn each_bad_request_names_its_field() {
        use VolumeType::*;
        assert_eq!(field(DesiredVolume::from_spec(None)), "spec");
        let mut s = spec(Replicate, 3, 0, 0, 3);
        s.r#type = 42;
        assert_eq!(field(DesiredVolume::from_spec(Some(&s))), "spec.type");
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(
                Unspecified,
                0,
                0,
                0,
                3
            )))),
            "spec.type"
        );
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(Replicate, 3, 0, 0, 4)))),
            "spec.bricks"
        );
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(Replicate, 5, 0, 0, 5)))),
            "spec.replica"
        );
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(Disperse, 0, 2, 2, 4)))),
            "spec.disperse_redundancy"
        );
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(Disperse, 3, 2, 1, 3)))),
            "spec.replica"
        );
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&spec(Arbiter, 0, 0, 0, 4)))),
            "spec.bricks"
        );
        let mut s = spec(Distribute, 0, 0, 0, 2);
        s.bricks[1] = "nohost".into();
        assert_eq!(field(DesiredVolume::from_spec(Some(&s))), "spec.bricks[1]");
        let mut s = spec(Distribute, 0, 0, 0, 2);
        s.name = "bad name".into();
        assert_eq!(field(DesiredVolume::from_spec(Some(&s))), "spec.name");
        let mut s = spec(Distribute, 0, 0, 0, 2);
        s.options.insert("NoDots".into(), "x".into());
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&s))),
            "spec.options[NoDots]"
        );
        let mut s = spec(Distribute, 0, 0, 0, 2);
        s.options
            .insert("performance.cache-size".into(), "1\n2".into());
        assert_eq!(
            field(DesiredVolume::from_spec(Some(&s))),
            "spec.options[performance.cache-size]"
        );
    }

    #[test]
    fn good_specs_map_to_layouts() {
        use VolumeType::*;
        let d = DesiredVolume::from_spec(Some(&spec(Disperse, 0, 2, 1, 6))).unwrap();
        assert_eq!(
            d.layout,
            VolumeLayout::Disperse {
                data: 2,
                redundancy: 1
            }
        );
        let d = DesiredVolume::from_spec(Some(&spec(Arbiter, 0, 0, 0, 3))).unwrap();
        assert_eq!(d.layout, VolumeLayout::Arbiter);
        let d = DesiredVolume::from_spec(Some(&spec(Replicate, 2, 0, 0, 4))).unwrap();
        assert_eq!(
            (d.layout, d.bricks.len()),
            (VolumeLayout::Replicate { replica: 2 }, 4)
        );
    }
}
