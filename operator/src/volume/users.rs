//! The PersistentVolumes on a GlusterVolume, read from the volume attributes the CSI driver
//! writes into every PV it provisions: `glusterVolume` (the gluster volume it mounts) and
//! `pool` (the GlusterVolume, as namespace/name).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolume};

fn csi<'a>(pv: &'a PersistentVolume, driver: &str) -> Option<&'a CSIPersistentVolumeSource> {
    pv.spec
        .as_ref()?
        .csi
        .as_ref()
        .filter(|c| c.driver == driver)
}

fn attribute<'a>(csi: &'a CSIPersistentVolumeSource, key: &str) -> Option<&'a String> {
    csi.volume_attributes.as_ref()?.get(key)
}

/// Whether `pv` still uses gluster volume `name`. A released PV whose reclaim policy is
/// Delete is the provisioner deleting it: waiting for it would deadlock with its own
/// DeleteVolume, so it does not count.
pub fn uses(pv: &PersistentVolume, driver: &str, name: &str) -> bool {
    let releasing = pv.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released")
        && pv
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref())
            == Some("Delete");
    !releasing
        && csi(pv, driver)
            .is_some_and(|c| attribute(c, "glusterVolume").map(String::as_str) == Some(name))
}

/// Strips `pv` to what [`per_volume`] and [`uses`] read (its name, our driver's two volume
/// attributes, the reclaim policy and the phase), so a watch cache of every PV of a large
/// cluster holds a few hundred bytes a PV. Other drivers' PVs keep their name only.
pub fn slim(pv: &mut PersistentVolume, driver: &str) {
    use k8s_openapi::api::core::v1::{PersistentVolumeSpec, PersistentVolumeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let ours = csi(pv, driver).map(|c| CSIPersistentVolumeSource {
        driver: c.driver.clone(),
        volume_attributes: c.volume_attributes.as_ref().map(|a| {
            a.iter()
                .filter(|(k, _)| matches!(k.as_str(), "pool" | "glusterVolume"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        }),
        ..Default::default()
    });
    pv.metadata = ObjectMeta {
        name: pv.metadata.name.take(),
        resource_version: pv.metadata.resource_version.take(),
        ..Default::default()
    };
    pv.spec = ours.map(|c| PersistentVolumeSpec {
        csi: Some(c),
        persistent_volume_reclaim_policy: pv
            .spec
            .as_mut()
            .and_then(|s| s.persistent_volume_reclaim_policy.take()),
        ..Default::default()
    });
    pv.status = pv.status.take().map(|s| PersistentVolumeStatus {
        phase: s.phase,
        ..Default::default()
    });
}

/// PersistentVolumes of the CSI driver `driver` per GlusterVolume (namespace, name).
pub fn per_volume<'a>(
    pvs: impl IntoIterator<Item = &'a PersistentVolume>,
    driver: &str,
) -> BTreeMap<(String, String), i64> {
    let mut counts = BTreeMap::new();
    for pv in pvs {
        let pool = csi(pv, driver).and_then(|c| attribute(c, "pool"));
        if let Some((ns, name)) = pool.and_then(|p| p.split_once('/')) {
            *counts
                .entry((ns.to_string(), name.to_string()))
                .or_insert(0) += 1;
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "gluster.glusterkube.dev";

    fn pv(driver: &str, attrs: serde_json::Value, phase: &str, reclaim: &str) -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv"},
            "spec": {"csi": {"driver": driver, "volumeHandle": "h", "volumeAttributes": attrs},
                     "persistentVolumeReclaimPolicy": reclaim},
            "status": {"phase": phase},
        }))
        .unwrap()
    }

    #[test]
    fn a_slimmed_persistent_volume_counts_and_guards_as_before() {
        let full: PersistentVolume = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pv-1", "resourceVersion": "7",
                         "annotations": {"pv.kubernetes.io/provisioned-by": D},
                         "managedFields": [{"manager": "csi-provisioner"}]},
            "spec": {"csi": {"driver": D, "volumeHandle": "subdir/storage/pool/pv-1",
                             "volumeAttributes": {"pool": "storage/pool",
                                                  "glusterVolume": "storage-pool",
                                                  "servers": "a,b,c", "subdir": "pv-1"}},
                     "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"],
                     "claimRef": {"namespace": "apps", "name": "data"},
                     "persistentVolumeReclaimPolicy": "Delete"},
            "status": {"phase": "Released", "message": "claim deleted"},
        }))
        .unwrap();
        let mut slim_pv = full.clone();
        slim(&mut slim_pv, D);
        assert_eq!(per_volume([&slim_pv], D), per_volume([&full], D));
        for name in ["storage-pool", "other"] {
            assert_eq!(uses(&slim_pv, D, name), uses(&full, D, name));
        }
        assert_eq!(slim_pv.metadata.name.as_deref(), Some("pv-1"));
        assert!(
            slim_pv.metadata.managed_fields.is_none() && slim_pv.metadata.annotations.is_none()
        );
        let spec = slim_pv.spec.as_ref().unwrap();
        assert!(spec.claim_ref.is_none() && spec.capacity.is_none());
        assert_eq!(
            spec.csi
                .as_ref()
                .unwrap()
                .volume_attributes
                .as_ref()
                .unwrap()
                .len(),
            2
        );
        assert!(slim_pv.status.as_ref().unwrap().message.is_none());
        // Another driver's PV keeps nothing but its name.
        let mut theirs = pv(
            "other.csi",
            serde_json::json!({"pool": "storage/pool"}),
            "Bound",
            "Delete",
        );
        slim(&mut theirs, D);
        assert!(theirs.spec.is_none() && per_volume([&theirs], D).is_empty());
    }

    #[test]
    fn counts_persistent_volumes_of_our_driver_per_pool() {
        let bound = |driver: &str, attrs| pv(driver, attrs, "Bound", "Delete");
        let pvs = [
            bound(D, serde_json::json!({"pool": "storage/pool"})),
            bound(D, serde_json::json!({"pool": "storage/pool"})),
            bound(D, serde_json::json!({"pool": "apps/pvc-1"})),
            bound("other.csi", serde_json::json!({"pool": "storage/pool"})),
            bound(D, serde_json::json!({})),
        ];
        assert_eq!(
            per_volume(&pvs, D).into_iter().collect::<Vec<_>>(),
            vec![
                (("apps".into(), "pvc-1".into()), 1),
                (("storage".into(), "pool".into()), 2),
            ]
        );
    }

    #[test]
    fn a_volume_is_used_until_its_pvs_are_gone_or_being_deleted() {
        let attrs = serde_json::json!({"glusterVolume": "storage-pool"});
        assert!(uses(
            &pv(D, attrs.clone(), "Bound", "Delete"),
            D,
            "storage-pool"
        ));
        assert!(uses(
            &pv(D, attrs.clone(), "Released", "Retain"),
            D,
            "storage-pool"
        ));
        assert!(!uses(
            &pv(D, attrs.clone(), "Released", "Delete"),
            D,
            "storage-pool"
        ));
        assert!(!uses(&pv(D, attrs.clone(), "Bound", "Delete"), D, "other"));
        assert!(!uses(
            &pv("other.csi", attrs, "Bound", "Delete"),
            D,
            "storage-pool"
        ));
    }
}
