//! Brick-native PV limits: a subdirectory PV's size enforced by each brick filesystem's own
//! project quota instead of gluster's quota translator, whose marker updates every ancestor
//! directory before it answers each create, write and unlink (issue 36: unlinks 2.6× and
//! creates 2.2× slower with it on a hand-made volume).
//!
//! The PV's size is recorded on its directory as [`SIZE_XATTR`], set through a gluster mount
//! so that gluster keeps it on every brick of the set and heals it to a brick that gets the
//! directory later (heal, replace-brick). Each node's agent then gives the directory, on
//! each of its bricks, a project id of that brick's filesystem (kept in the filesystem's
//! registry, [`plan::Registry`]) with the inherit flag, and the limit [`plan::brick_limit`]
//! decides for the volume's layout. [`reconcile`] does that for every PV directory of a
//! brick; it is idempotent and cheap when nothing changed (one ioctl per directory).
//!
//! A write past the limit fails on the brick with ENOSPC (XFS reports project quotas so,
//! like a full disk), which gluster passes to the client unchanged; `df` on a mount of the
//! directory shows the limit and the use, from the bricks' statfs.

pub mod keeper;
pub mod plan;
pub mod volume;
pub mod xfs;

use std::path::{Path, PathBuf};

pub use plan::{brick_limit, Layout, NotServed};

/// The PV's size in bytes, as decimal ASCII, on its directory (set through gluster).
pub const SIZE_XATTR: &str = "trusted.glusterkube.pv-size";

#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("reading the mount table: {0}")]
    MountTable(String),
    #[error("{}: {}", .0.display(), .1)]
    Io(PathBuf, #[source] std::io::Error),
    #[error("{0}; project quotas cannot be set on this brick")]
    Tool(String),
    #[error("{}: not a path xfs_quota can be given", .0.display())]
    Path(PathBuf),
    #[error("{0}")]
    Registry(String),
    #[error(transparent)]
    Exhausted(#[from] plan::Exhausted),
    #[error(transparent)]
    NotServed(#[from] NotServed),
    #[error(
        "{} is on {fs_type} at {}, not mounted with project quotas (XFS with prjquota)",
        .path.display(), .mount_point.display()
    )]
    Unsupported {
        path: PathBuf,
        fs_type: String,
        mount_point: PathBuf,
    },
}

/// Whether the filesystem holding `root` enforces project quotas; if not, why.
pub fn capable(root: &Path) -> Result<(), ProjectError> {
    let fs = xfs::brick_fs(root)?;
    if fs.project_quotas {
        Ok(())
    } else {
        Err(ProjectError::Unsupported {
            path: root.into(),
            fs_type: fs.fs_type,
            mount_point: fs.mount_point,
        })
    }
}

/// The size recorded on `dir`, if any.
pub fn recorded_size(dir: &Path) -> Result<Option<u64>, ProjectError> {
    let mut buf = [0u8; 32];
    match rustix::fs::getxattr(dir, SIZE_XATTR, &mut buf) {
        Ok(n) => std::str::from_utf8(&buf[..n])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| {
                ProjectError::Registry(format!(
                    "{}: {SIZE_XATTR} is not a size in bytes",
                    dir.display()
                ))
            }),
        Err(rustix::io::Errno::NODATA) => Ok(None),
        Err(e) => Err(ProjectError::Io(dir.into(), e.into())),
    }
}

/// Records `bytes` as the size of `dir`. Through a gluster mount, every brick of the
/// directory's set keeps it.
pub fn record_size(dir: &Path, bytes: u64) -> Result<(), ProjectError> {
    rustix::fs::setxattr(
        dir,
        SIZE_XATTR,
        bytes.to_string().as_bytes(),
        rustix::fs::XattrFlags::empty(),
    )
    .map_err(|e| ProjectError::Io(dir.into(), e.into()))
}

/// What [`enforce`] did to one directory on one brick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforced {
    pub id: u32,
    pub limit: u64,
    /// The id was given to the directory and its contents now (it had another).
    pub assigned: bool,
    /// The limit was set now (it differed from the one last set).
    pub limited: bool,
}

/// Makes `dir` (on a brick of a volume of `layout` and `sets`) enforce the limit for a PV of
/// `pv_bytes`: its filesystem's project id for it, on it and everything below it with the
/// inherit flag, and the brick's limit on that id.
pub async fn enforce(
    dir: &Path,
    layout: Layout,
    sets: u32,
    pv_bytes: u64,
) -> Result<Enforced, ProjectError> {
    let limit = brick_limit(layout, sets, pv_bytes)?;
    let fs = xfs::brick_fs(dir)?;
    if !fs.project_quotas {
        return Err(ProjectError::Unsupported {
            path: dir.into(),
            fs_type: fs.fs_type,
            mount_point: fs.mount_point,
        });
    }
    let key = registry_key(&fs, dir);
    let entry = xfs::with_registry(&fs.mount_point, |r| {
        r.id_of(&key)?;
        Ok(r.dirs[&key])
    })?;
    let (id, inherit) = xfs::project_of(dir)?;
    let assigned = id != entry.id || !inherit;
    if assigned {
        xfs::assign(&fs.mount_point, dir, entry.id).await?;
    }
    let limited = entry.limit != limit;
    if limited {
        xfs::set_limit(&fs.mount_point, entry.id, limit).await?;
        xfs::with_registry(&fs.mount_point, |r| {
            if let Some(e) = r.dirs.get_mut(&key) {
                e.limit = limit;
            }
            Ok(())
        })?;
    }
    Ok(Enforced {
        id: entry.id,
        limit,
        assigned,
        limited,
    })
}

/// Lifts the limit of `dir`'s project and forgets its id (never given again). For a
/// directory being deleted.
pub async fn release(dir: &Path) -> Result<(), ProjectError> {
    let fs = xfs::brick_fs(dir)?;
    let key = registry_key(&fs, dir);
    if let Some(e) = xfs::with_registry(&fs.mount_point, |r| Ok(r.release(&key)))? {
        xfs::set_limit(&fs.mount_point, e.id, 0).await?;
    }
    Ok(())
}

/// A directory's name in its filesystem's registry: its path from the filesystem's root, so
/// that the same disk mounted elsewhere keeps its ids.
fn registry_key(fs: &xfs::BrickFs, dir: &Path) -> String {
    dir.strip_prefix(&fs.mount_point)
        .unwrap_or(dir)
        .to_string_lossy()
        .into_owned()
}

/// What one pass over a brick did.
#[derive(Debug, Default)]
pub struct Pass {
    pub enforced: Vec<(PathBuf, Enforced)>,
    pub failed: Vec<(PathBuf, ProjectError)>,
}

/// Enforces every PV directory of `brick` (its top-level directories that record a size),
/// so that a directory that reached the brick by heal, replace-brick or a restore carries
/// its limit too.
pub async fn reconcile(brick: &Path, layout: Layout, sets: u32) -> Result<Pass, ProjectError> {
    let mut pass = Pass::default();
    let entries = std::fs::read_dir(brick).map_err(|e| ProjectError::Io(brick.into(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| ProjectError::Io(brick.into(), e))?;
        let name = entry.file_name();
        let dir = entry.path();
        // gluster's own (.glusterfs, .trashcan) and ours (snapshots) carry no PV limit.
        if name.to_string_lossy().starts_with('.') || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let size = match recorded_size(&dir) {
            Ok(Some(s)) => s,
            Ok(None) => continue,
            Err(e) => {
                pass.failed.push((dir, e));
                continue;
            }
        };
        match enforce(&dir, layout, sets, size).await {
            Ok(done) => pass.enforced.push((dir, done)),
            Err(e) => pass.failed.push((dir, e)),
        }
    }
    Ok(pass)
}
