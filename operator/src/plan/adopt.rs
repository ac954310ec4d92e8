//! Taking over a gluster volume that exists already (`spec.existingVolume`): what the
//! volume must agree with before the operator manages it. Nothing is changed in gluster
//! while any of it fails.

use gk_agent_proto::v1::Volume;
use gk_gluster::VolumeLayout;

use super::error::{spec_error, SpecError};
use super::layout::{layout, layout_of};
use crate::crd::GlusterVolumeSpec;

fn describe(l: &VolumeLayout) -> String {
    match l {
        VolumeLayout::Distribute => "Distribute".into(),
        VolumeLayout::Replicate { replica } => format!("Replicate with replica {replica}"),
        VolumeLayout::Arbiter => "Arbiter (replica 3 arbiter 1)".into(),
        VolumeLayout::Disperse { data, redundancy } => {
            format!("Disperse with disperse.data {data} and disperse.redundancy {redundancy}")
        }
    }
}

/// Checks the existing volume `vol` against `spec`: its layout (naming spec.type,
/// spec.replica or spec.disperse), its bricks on the cluster's nodes (`node_addresses`),
/// and, while it is being adopted (`adopted_id` None), a brickCount that would not shrink
/// it and, in a cluster with TLS (`tls`), I/O TLS on already: bricks take `server.ssl` only
/// when they start, so turning it on under running clients would cut them off. Once
/// adopted, a volume of that name with another id is refused too: it was replaced.
pub fn check(
    spec: &GlusterVolumeSpec,
    vol: &Volume,
    node_addresses: &[String],
    adopted_id: Option<&str>,
    tls: bool,
) -> Result<(), SpecError> {
    let name = &vol.name;
    let have = layout_of(vol);
    let want = layout(spec)?;
    if have != want {
        let field = match (&have, &want) {
            (VolumeLayout::Replicate { .. }, VolumeLayout::Replicate { .. }) => "spec.replica",
            (VolumeLayout::Disperse { .. }, VolumeLayout::Disperse { .. }) => "spec.disperse",
            _ => "spec.type",
        };
        return Err(spec_error(
            field,
            format!(
                "gluster volume {name} is {}, and the spec says {}; describe it as it is \
                 (nothing was changed)",
                describe(&have),
                describe(&want)
            ),
        ));
    }
    if let Some(b) = vol.bricks.iter().find(|b| {
        b.split_once(':')
            .is_none_or(|(host, _)| !node_addresses.iter().any(|a| a == host))
    }) {
        return Err(spec_error(
            "spec.existingVolume",
            format!(
                "brick {b} of gluster volume {name} is not on a node of the cluster (its \
                 nodes are {}); only a volume whose bricks are all on the cluster's nodes can \
                 be adopted",
                node_addresses.join(", ")
            ),
        ));
    }
    match adopted_id {
        None => {
            let on = |k: &str| vol.options.get(k).map(String::as_str) == Some("on");
            if tls && !(on("client.ssl") && on("server.ssl")) {
                return Err(spec_error(
                    "spec.existingVolume",
                    format!(
                        "the cluster has TLS and gluster volume {name} has not \
                         (client.ssl and server.ssl on): its bricks would take server.ssl \
                         only when they restart, cutting off the clients meanwhile. Turn both \
                         on by hand and restart it (gluster volume stop and start), then adopt \
                         it; nothing was changed"
                    ),
                ));
            }
            let want_bricks = spec.brick_count.unwrap_or(0) as usize;
            if want_bricks < vol.bricks.len() {
                return Err(spec_error(
                    "spec.brickCount",
                    format!(
                        "gluster volume {name} has {} bricks; adopt it with brickCount {} \
                         (raise it later to grow the volume), adoption never removes bricks",
                        vol.bricks.len(),
                        vol.bricks.len()
                    ),
                ));
            }
        }
        Some(id) if id != vol.id => {
            return Err(spec_error(
                "spec.existingVolume",
                format!(
                    "gluster volume {name} is not the one adopted: its id was {id} and is now \
                     {}; delete this GlusterVolume and adopt the new volume",
                    vol.id
                ),
            ));
        }
        Some(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::fixtures::spec;

    fn vol(replica: u32, arbiter: u32, disperse: u32, redundancy: u32, n: usize) -> Volume {
        Volume {
            name: "seed".into(),
            id: "id-1".into(),
            status: "Started".into(),
            replica_count: replica,
            arbiter_count: arbiter,
            disperse_count: disperse,
            redundancy_count: redundancy,
            bricks: (0..n)
                .map(|i| format!("10.0.0.{}:/b/seed-{i}", i % 4 + 1))
                .collect(),
            ..Default::default()
        }
    }

    fn nodes() -> Vec<String> {
        (1..=4).map(|i| format!("10.0.0.{i}")).collect()
    }

    fn field(spec_yaml: &str, v: &Volume, adopted: Option<&str>) -> String {
        check(&spec(spec_yaml), v, &nodes(), adopted, false)
            .unwrap_err()
            .field
    }

    const R3: &str =
        "{cluster: c, type: Replicate, replica: 3, brickCount: 3, existingVolume: seed}";

    #[test]
    fn a_volume_as_the_spec_describes_it_is_adopted() {
        let v = vol(3, 0, 0, 0, 3);
        assert_eq!(check(&spec(R3), &v, &nodes(), None, false), Ok(()));
        // Growing at adoption is allowed; once adopted, the count is the day-two steps'.
        let grow = R3.replace("brickCount: 3", "brickCount: 6");
        assert_eq!(check(&spec(&grow), &v, &nodes(), None, false), Ok(()));
        let shrink = R3.replace("brickCount: 3", "brickCount: 0");
        assert_eq!(
            check(&spec(&shrink), &v, &nodes(), Some("id-1"), false),
            Ok(())
        );
        let arbiter = vol(3, 1, 0, 0, 3);
        let a = "{cluster: c, type: Arbiter, brickCount: 3, existingVolume: seed}";
        assert_eq!(check(&spec(a), &arbiter, &nodes(), None, false), Ok(()));
        let ec = vol(1, 0, 3, 1, 3);
        let d = "{cluster: c, type: Disperse, disperse: {data: 2, redundancy: 1}, brickCount: 3, existingVolume: seed}";
        assert_eq!(check(&spec(d), &ec, &nodes(), None, false), Ok(()));
        let dist = vol(1, 0, 0, 0, 2);
        let s = "{cluster: c, type: Distribute, brickCount: 2, existingVolume: seed}";
        assert_eq!(check(&spec(s), &dist, &nodes(), None, false), Ok(()));
    }

    #[test]
    fn disagreements_are_refused_naming_the_field() {
        let r3 = vol(3, 0, 0, 0, 3);
        let r2 = R3.replace("replica: 3", "replica: 2");
        assert_eq!(field(&r2, &r3, None), "spec.replica");
        let arbiter = "{cluster: c, type: Arbiter, brickCount: 3, existingVolume: seed}";
        assert_eq!(field(arbiter, &r3, None), "spec.type");
        assert_eq!(field(R3, &vol(3, 1, 0, 0, 3), None), "spec.type");
        let ec = "{cluster: c, type: Disperse, disperse: {data: 4, redundancy: 2}, brickCount: 6, existingVolume: seed}";
        assert_eq!(field(ec, &vol(1, 0, 3, 1, 3), None), "spec.disperse");
        let e = check(&spec(R3), &vol(1, 0, 0, 0, 3), &nodes(), None, false).unwrap_err();
        assert_eq!(e.field, "spec.type");
        assert!(e.reason.contains("is Distribute"), "{e}");
        let few = R3.replace("brickCount: 3", "brickCount: 0");
        assert_eq!(field(&few, &vol(3, 0, 0, 0, 6), None), "spec.brickCount");
        let mut elsewhere = r3.clone();
        elsewhere.bricks[2] = "10.9.9.9:/b/seed".into();
        assert_eq!(field(R3, &elsewhere, None), "spec.existingVolume");
        assert_eq!(field(R3, &r3, Some("id-0")), "spec.existingVolume");
        // A cluster with TLS adopts only a volume that has it already.
        let e = check(&spec(R3), &r3, &nodes(), None, true).unwrap_err();
        assert_eq!(e.field, "spec.existingVolume");
        assert!(e.reason.contains("server.ssl"), "{e}");
        let mut tls = r3.clone();
        for k in ["client.ssl", "server.ssl"] {
            tls.options.insert(k.into(), "on".into());
        }
        assert_eq!(check(&spec(R3), &tls, &nodes(), None, true), Ok(()));
        assert_eq!(check(&spec(R3), &r3, &nodes(), Some("id-1"), true), Ok(()));
    }
}
