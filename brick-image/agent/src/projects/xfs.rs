//! The brick filesystem's own quotas: XFS project quotas, read and set on this node.
//!
//! Which filesystem holds a path and whether it enforces project quotas come from the mount
//! table; a directory's project id and inherit flag are read with `FS_IOC_FSGETXATTR`; ids
//! are given (to a directory and everything in it) and limits set with `xfs_quota`, the
//! tool XFS ships for it.

use std::path::{Path, PathBuf};

use super::plan::Registry;
use super::ProjectError;

/// A filesystem that holds bricks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrickFs {
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// Mounted with project quotas enforced (`prjquota`/`pquota`).
    pub project_quotas: bool,
}

/// The filesystem holding `path`: the mount with the longest mount point above it.
pub fn brick_fs(path: &Path) -> Result<BrickFs, ProjectError> {
    let table = procfs::process::Process::myself()
        .and_then(|p| p.mountinfo())
        .map_err(|e| ProjectError::MountTable(e.to_string()))?;
    table
        .into_iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.as_os_str().len())
        .map(|m| BrickFs {
            project_quotas: enforces_projects(
                &m.fs_type,
                m.super_options.keys().chain(m.mount_options.keys()),
            ),
            mount_point: m.mount_point,
            fs_type: m.fs_type,
        })
        .ok_or_else(|| ProjectError::MountTable(format!("no mount holds {}", path.display())))
}

/// Whether a mount of `fs_type` with these options enforces project quotas: XFS shows
/// `prjquota` (or `pquota`) among its options when mounted so.
fn enforces_projects<'a>(fs_type: &str, mut options: impl Iterator<Item = &'a String>) -> bool {
    fs_type == "xfs" && options.any(|o| o == "prjquota" || o == "pquota")
}

/// `struct fsxattr` of `<linux/fs.h>`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct FsXattr {
    xflags: u32,
    extsize: u32,
    nextents: u32,
    projid: u32,
    cowextsize: u32,
    pad: [u8; 8],
}

nix::ioctl_read!(fs_get_xattr, b'X', 31, FsXattr);
nix::ioctl_write_ptr!(fs_set_xattr, b'X', 32, FsXattr);

/// `FS_XFLAG_PROJINHERIT`: what is made below the directory takes its project id.
const PROJINHERIT: u32 = 0x200;

/// The project id of `dir` and whether what is made below it inherits that id.
pub fn project_of(dir: &Path) -> Result<(u32, bool), ProjectError> {
    let f = std::fs::File::open(dir).map_err(|e| ProjectError::Io(dir.into(), e))?;
    let mut x = FsXattr::default();
    // SAFETY: FS_IOC_FSGETXATTR fills a `struct fsxattr`, which FsXattr lays out exactly.
    unsafe { fs_get_xattr(std::os::fd::AsRawFd::as_raw_fd(&f), &mut x) }
        .map_err(|e| ProjectError::Io(dir.into(), e.into()))?;
    Ok((x.projid, x.xflags & PROJINHERIT != 0))
}

/// Gives the directory `dir` (only it) project `id` and the inherit flag: what is then
/// made below it takes the id, and can be renamed into another directory of that project.
pub fn set_project(dir: &Path, id: u32) -> Result<(), ProjectError> {
    let f = std::fs::File::open(dir).map_err(|e| ProjectError::Io(dir.into(), e))?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&f);
    let mut x = FsXattr::default();
    // SAFETY: FS_IOC_FSGETXATTR fills a `struct fsxattr`, which FsXattr lays out exactly.
    unsafe { fs_get_xattr(fd, &mut x) }.map_err(|e| ProjectError::Io(dir.into(), e.into()))?;
    x.projid = id;
    x.xflags |= PROJINHERIT;
    // SAFETY: FS_IOC_FSSETXATTR reads the same `struct fsxattr`, filled above.
    unsafe { fs_set_xattr(fd, &x) }.map_err(|e| ProjectError::Io(dir.into(), e.into()))?;
    Ok(())
}

async fn xfs_quota(fs: &Path, command: &str) -> Result<(), ProjectError> {
    let out = tokio::process::Command::new("xfs_quota")
        .args(["-x", "-c", command])
        .arg(fs)
        .output()
        .await
        .map_err(|e| {
            ProjectError::Tool(format!("running xfs_quota: {e}; is xfsprogs installed?"))
        })?;
    // xfs_quota reports some failures on standard error with status 0.
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !err.trim().is_empty() {
        return Err(ProjectError::Tool(format!(
            "xfs_quota -x -c '{command}' {}: {}",
            fs.display(),
            err.trim()
        )));
    }
    Ok(())
}

/// Gives `dir` and everything below it project `id`, with the inherit flag on directories.
pub async fn assign(fs: &Path, dir: &Path, id: u32) -> Result<(), ProjectError> {
    let dir = dir
        .to_str()
        .filter(|d| !d.contains(['\'', '"', ' ', '\n']))
        .ok_or_else(|| ProjectError::Path(dir.into()))?;
    xfs_quota(fs, &format!("project -s -p {dir} {id}")).await
}

/// Sets project `id`'s hard block limit on `fs` (0 lifts it), in whole KiB rounded up.
pub async fn set_limit(fs: &Path, id: u32, bytes: u64) -> Result<(), ProjectError> {
    xfs_quota(
        fs,
        &format!("limit -p bhard={}k {id}", bytes.div_ceil(1024)),
    )
    .await
}

/// The file at a brick filesystem's root that keeps its [`Registry`].
pub const REGISTRY_FILE: &str = ".glusterkube-projects.json";

/// Runs `f` on the registry of the filesystem mounted at `fs`, under a lock, and writes it
/// back (atomically: a temporary file, then rename) when `f` changed it.
pub fn with_registry<T>(
    fs: &Path,
    f: impl FnOnce(&mut Registry) -> Result<T, ProjectError>,
) -> Result<T, ProjectError> {
    let path = fs.join(REGISTRY_FILE);
    let lock_path = fs.join(".glusterkube-projects.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| ProjectError::Io(lock_path.clone(), e))?;
    let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| ProjectError::Io(lock_path.clone(), e.into()))?;
    let mut registry: Registry = match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
            ProjectError::Registry(format!("{} is not a project registry: {e}", path.display()))
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Registry::default(),
        Err(e) => return Err(ProjectError::Io(path, e)),
    };
    let before = registry.clone();
    let out = f(&mut registry)?;
    if registry != before {
        let tmp = path.with_extension("tmp");
        let bytes = serde_json::to_vec_pretty(&registry)
            .map_err(|e| ProjectError::Registry(e.to_string()))?;
        std::fs::write(&tmp, bytes)
            .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| ProjectError::Io(path.clone(), e))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fsxattr_layout_is_the_kernels() {
        // _IOR('X', 31, struct fsxattr) with a 28-byte struct, as in <linux/fs.h>.
        assert_eq!(std::mem::size_of::<FsXattr>(), 28);
        assert_eq!(
            nix::request_code_read!(b'X', 31, std::mem::size_of::<FsXattr>()) as u64,
            0x801c_581f
        );
    }

    #[test]
    fn the_registry_survives_and_is_locked_per_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let a = with_registry(dir.path(), |r| Ok(r.id_of("/b/a").unwrap())).unwrap();
        let b = with_registry(dir.path(), |r| Ok(r.id_of("/b/b").unwrap())).unwrap();
        assert_eq!(b, a + 1);
        let again = with_registry(dir.path(), |r| Ok(r.id_of("/b/a").unwrap())).unwrap();
        assert_eq!(again, a);
        std::fs::write(dir.path().join(REGISTRY_FILE), b"garbage").unwrap();
        let e = with_registry(dir.path(), |r| Ok(r.id_of("/b/c").unwrap())).unwrap_err();
        assert!(e.to_string().contains("not a project registry"), "{e}");
    }

    #[test]
    fn project_quotas_are_read_from_the_mount_options() {
        let opts = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        // As the 6.1 kernel shows an XFS brick mounted with -o prjquota (in the VM test).
        let prj = opts("rw,attr2,inode64,logbufs=8,logbsize=32k,prjquota");
        assert!(enforces_projects("xfs", prj.iter()));
        assert!(enforces_projects("xfs", opts("rw,pquota").iter()));
        // The brick image's options on a kernel without XFS quotas.
        let plain = opts("rw,noatime,attr2,inode64,allocsize=64k,logbufs=8,noquota");
        assert!(!enforces_projects("xfs", plain.iter()));
        assert!(!enforces_projects("ext4", prj.iter()));
    }

    #[test]
    fn the_filesystem_of_a_path_is_the_deepest_mount_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = brick_fs(dir.path()).unwrap();
        assert!(dir.path().starts_with(&fs.mount_point));
        assert!(!fs.fs_type.is_empty());
    }
}
