//! A volume's PV directories on this node's bricks: whether the bricks' project quotas size
//! the volume's PVs, what the volume's layout makes each brick hold, and the passes that
//! give the directories on this node's bricks their projects and limits.

use std::path::{Path, PathBuf};

use gk_agent_proto::pv_quota;
use gk_gluster::Volume;

use super::plan::Layout;
use super::{enforce, reconcile, recorded_size, xfs, Enforced, Pass, ProjectError};

/// Whether the bricks' project quotas size `v`'s PVs (the operator set the option so).
pub fn by_projects(v: &Volume) -> bool {
    v.options.get(pv_quota::OPTION).map(String::as_str) == Some(pv_quota::PROJECT)
}

/// `v`'s layout as a brick's share of a PV decides it, and its number of sets.
pub fn layout_of(v: &Volume) -> (Layout, u32) {
    let bricks = v.bricks.len() as u32;
    let per_set = |n: u32| (bricks / n.max(1)).max(1);
    if v.disperse_count > 0 {
        let layout = Layout::Disperse {
            data: v.disperse_count.saturating_sub(v.redundancy_count),
            redundancy: v.redundancy_count,
        };
        (layout, per_set(v.disperse_count))
    } else if v.arbiter_count > 0 {
        (Layout::Arbiter, per_set(v.replica_count))
    } else {
        (Layout::Replicate, per_set(v.replica_count))
    }
}

/// This node's bricks of `v` (those gluster knows at `address`), as paths on this node.
pub fn local_bricks(v: &Volume, address: &str) -> Vec<PathBuf> {
    v.bricks
        .iter()
        .filter(|b| b.brick.host == address)
        .map(|b| PathBuf::from(&b.brick.path))
        .collect()
}

/// The directory `path` (absolute inside the volume) on `brick`.
fn on_brick(brick: &Path, path: &str) -> PathBuf {
    brick.join(path.trim_start_matches('/'))
}

/// Gives the PV directory `path` of `v`, on each of this node's bricks that holds it, its
/// project and the limit for the size recorded on it. A brick that does not hold the
/// directory yet (heal will bring it; the next [`keep`] pass enforces it then) is skipped.
/// Returns the bricks that enforce it, as gluster names them.
pub async fn enforce_dir(
    v: &Volume,
    address: &str,
    path: &str,
) -> Result<Vec<(String, Enforced)>, ProjectError> {
    let (layout, sets) = layout_of(v);
    let mut done = Vec::new();
    for b in v.bricks.iter().filter(|b| b.brick.host == address) {
        let dir = on_brick(Path::new(&b.brick.path), path);
        let Some(size) = recorded_size_if_present(&dir)? else {
            continue;
        };
        let e = enforce(&dir, layout, sets, size).await?;
        done.push((b.brick.to_string(), e));
    }
    Ok(done)
}

/// The size recorded on `dir`; None when the directory or the record is missing.
fn recorded_size_if_present(dir: &Path) -> Result<Option<u64>, ProjectError> {
    match recorded_size(dir) {
        Err(ProjectError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        other => other,
    }
}

/// One pass over this node's bricks of `v`: every PV directory gets its project and limit
/// (those that reached a brick by heal, replace-brick or add-brick included), and the ids of
/// directories that are gone from a brick filesystem are released.
pub async fn keep(v: &Volume, address: &str) -> Vec<(PathBuf, Result<Pass, ProjectError>)> {
    let (layout, sets) = layout_of(v);
    let mut out = Vec::new();
    for brick in local_bricks(v, address) {
        let pass = async {
            let fs = xfs::brick_fs(&brick)?;
            // A disk that is not mounted leaves the brick's path on another filesystem,
            // whose registry (if any) is not this one's: touch nothing there.
            if !fs.project_quotas {
                return Ok(Pass::default());
            }
            let pass = reconcile(&brick, layout, sets).await?;
            release_gone(&fs.mount_point).await?;
            Ok(pass)
        }
        .await;
        out.push((brick, pass));
    }
    out
}

/// Lifts the limits of registered directories of the filesystem at `fs` that no longer
/// exist, and forgets them (their ids are never given again).
pub async fn release_gone(fs: &Path) -> Result<Vec<u32>, ProjectError> {
    let gone = xfs::with_registry(fs, |r| {
        let gone: Vec<String> = r
            .dirs
            .keys()
            .filter(|k| !fs.join(k.trim_start_matches('/')).exists())
            .cloned()
            .collect();
        Ok(gone
            .iter()
            .filter_map(|k| r.release(k).map(|e| e.id))
            .collect::<Vec<u32>>())
    })?;
    for id in &gone {
        xfs::set_limit(fs, *id, 0).await?;
    }
    Ok(gone)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_gluster::{Brick, VolumeBrick};
    use std::collections::BTreeMap;

    fn volume(
        bricks: &[(&str, &str)],
        replica: u32,
        arbiter: u32,
        disperse: u32,
        redundancy: u32,
    ) -> Volume {
        Volume {
            name: "v".into(),
            id: "id".into(),
            status: "Started".into(),
            type_name: String::new(),
            replica_count: replica,
            arbiter_count: arbiter,
            disperse_count: disperse,
            redundancy_count: redundancy,
            bricks: bricks
                .iter()
                .map(|(h, p)| VolumeBrick {
                    brick: Brick::new(*h, *p).unwrap(),
                    host_uuid: String::new(),
                    is_arbiter: false,
                })
                .collect(),
            options: BTreeMap::new(),
        }
    }

    #[test]
    fn layouts_and_sets_come_from_the_volume() {
        let three = [("a", "/b/1"), ("b", "/b/1"), ("c", "/b/1")];
        let six = [
            ("a", "/b/1"),
            ("b", "/b/1"),
            ("c", "/b/1"),
            ("a", "/b/2"),
            ("b", "/b/2"),
            ("c", "/b/2"),
        ];
        assert_eq!(
            layout_of(&volume(&three, 3, 0, 0, 0)),
            (Layout::Replicate, 1)
        );
        assert_eq!(layout_of(&volume(&six, 3, 0, 0, 0)), (Layout::Replicate, 2));
        assert_eq!(layout_of(&volume(&three, 3, 1, 0, 0)), (Layout::Arbiter, 1));
        assert_eq!(
            layout_of(&volume(&six, 1, 0, 6, 2)),
            (
                Layout::Disperse {
                    data: 4,
                    redundancy: 2
                },
                1
            )
        );
        // Plain distribute: each brick is a set of its own.
        assert_eq!(
            layout_of(&volume(&three[..1], 1, 0, 0, 0)),
            (Layout::Replicate, 1)
        );
        assert_eq!(
            layout_of(&volume(&three, 1, 0, 0, 0)),
            (Layout::Replicate, 3)
        );
    }

    #[test]
    fn only_this_nodes_bricks_and_only_the_operators_choice() {
        let mut v = volume(&[("a", "/b/1"), ("b", "/b/1"), ("a", "/d2/1")], 3, 0, 0, 0);
        assert_eq!(
            local_bricks(&v, "a"),
            [PathBuf::from("/b/1"), PathBuf::from("/d2/1")]
        );
        assert!(local_bricks(&v, "z").is_empty());
        assert!(!by_projects(&v));
        v.options
            .insert(pv_quota::OPTION.into(), pv_quota::GLUSTER.into());
        assert!(!by_projects(&v));
        v.options
            .insert(pv_quota::OPTION.into(), pv_quota::PROJECT.into());
        assert!(by_projects(&v));
        assert_eq!(
            on_brick(Path::new("/b/1"), "/pvc-1"),
            PathBuf::from("/b/1/pvc-1")
        );
    }

    #[tokio::test]
    async fn a_brick_without_the_directory_is_left_to_the_next_pass() {
        let b = tempfile::tempdir().unwrap();
        let path = b.path().to_str().unwrap();
        let v = volume(&[("a", path)], 1, 0, 0, 0);
        // Nothing to enforce, and no filesystem touched: the directory is not there yet.
        assert!(enforce_dir(&v, "a", "/pvc-1").await.unwrap().is_empty());
        // Nor when it is there without a recorded size.
        std::fs::create_dir(b.path().join("pvc-1")).unwrap();
        assert!(enforce_dir(&v, "a", "/pvc-1").await.unwrap().is_empty());
    }
}
