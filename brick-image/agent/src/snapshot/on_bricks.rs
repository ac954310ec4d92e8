//! Copies made on the bricks themselves, by reflink, instead of through a gluster client.
//!
//! Every brick of the volume copies its own part of the source directory into the target
//! directory (which was made through gluster, so it has its gfid on every brick). Gluster
//! knows an entry by its gfid (`trusted.gfid` and a handle under `.glusterfs`), so a copy
//! gets new ones: each copied entry's gfid is derived from the target and the source entry's
//! gfid. Every brick of a set holds the source under the same gfids, so every brick derives
//! the same new ones without talking to the others, and hard links keep sharing theirs.
//!
//! Replication's and disperse's attributes (`trusted.afr.*`, `trusted.ec.*`: pending
//! changes, fragment sizes and versions) travel with the data, as in gluster's own LVM
//! snapshots: a change in flight while the copies were made is then healed in the copy as
//! it would be in the source. What describes an entry's place (gfid2path, pgfid), gluster's
//! quota accounting and this project's own records do not travel: they belong to the source.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::AgentError;

pub const GFID: &str = "trusted.gfid";

/// Whether an extended attribute of a source entry is kept by its copy (the gfid is
/// replaced, not kept).
pub fn travels(name: &str) -> bool {
    const STAYS: [&str; 4] = [
        // Where the entry is: its parent's gfid and its name, wrong for the copy.
        "trusted.gfid2path.",
        "trusted.pgfid.",
        // Gluster's quota accounting of the source; its marker counts the copy afresh.
        "trusted.glusterfs.quota.",
        // The source PV's size and what filled it.
        "trusted.glusterkube.",
    ];
    name != GFID && !STAYS.iter().any(|p| name.starts_with(p))
}

/// The gfid of the copy, made for `target`, of the entry whose gfid is `old`.
pub fn copy_gfid(target: &str, old: &[u8; 16]) -> [u8; 16] {
    let mut h = Sha256::new();
    h.update(b"glusterkube brick copy\0");
    h.update(target.as_bytes());
    h.update([0]);
    h.update(old);
    let d = h.finalize();
    let mut g = [0u8; 16];
    g.copy_from_slice(&d[..16]);
    // An RFC 9562 version 8 UUID: made by this rule, never taken for a random one.
    g[6] = (g[6] & 0x0f) | 0x80;
    g[8] = (g[8] & 0x3f) | 0x80;
    g
}

pub fn uuid_string(g: &[u8; 16]) -> String {
    let h: String = g.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// An entry's handle, relative to its brick's root: `.glusterfs/ab/cd/<gfid>`.
pub fn handle_path(g: &[u8; 16]) -> PathBuf {
    PathBuf::from(format!(
        ".glusterfs/{:02x}/{:02x}/{}",
        g[0],
        g[1],
        uuid_string(g)
    ))
}

/// What a directory's handle (a symlink) points to: its parent's handle and its name.
pub fn dir_handle_target(parent: &[u8; 16], name: &OsStr) -> PathBuf {
    Path::new(&format!(
        "../../{:02x}/{:02x}/{}",
        parent[0],
        parent[1],
        uuid_string(parent)
    ))
    .join(name)
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> AgentError {
    AgentError::io(what)
}

fn errno(what: String) -> impl FnOnce(rustix::io::Errno) -> AgentError {
    move |e| AgentError::Io {
        what,
        source: e.into(),
    }
}

pub fn gfid_of(path: &Path) -> Result<Option<[u8; 16]>, AgentError> {
    let mut buf = [0u8; 16];
    match rustix::fs::lgetxattr(path, GFID, &mut buf) {
        Ok(16) => Ok(Some(buf)),
        Ok(n) => Err(AgentError::Io {
            what: format!("reading the gfid of {}", path.display()),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{n} bytes, not 16"),
            ),
        }),
        Err(rustix::io::Errno::NODATA) => Ok(None),
        Err(e) => Err(errno(format!("reading the gfid of {}", path.display()))(e)),
    }
}

fn xattrs(path: &Path) -> Result<Vec<(String, Vec<u8>)>, AgentError> {
    let what = || format!("listing the attributes of {}", path.display());
    let mut names = vec![0u8; 4096];
    let n = loop {
        match rustix::fs::llistxattr(path, &mut names) {
            Ok(n) => break n,
            Err(rustix::io::Errno::RANGE) => names.resize(names.len() * 4, 0),
            Err(e) => return Err(errno(what())(e)),
        }
    };
    let mut out = Vec::new();
    for name in names[..n].split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let mut value = vec![0u8; 256];
        let len = loop {
            match rustix::fs::lgetxattr(path, name.as_str(), &mut value) {
                Ok(len) => break len,
                Err(rustix::io::Errno::RANGE) => value.resize(value.len() * 16, 0),
                Err(e) => return Err(errno(what())(e)),
            }
        };
        value.truncate(len);
        out.push((name, value));
    }
    Ok(out)
}

fn set_xattr(path: &Path, name: &str, value: &[u8]) -> Result<(), AgentError> {
    rustix::fs::lsetxattr(path, name, value, rustix::fs::XattrFlags::empty())
        .map_err(errno(format!("setting {name} on {}", path.display())))
}

fn remove_xattr(path: &Path, name: &str) -> Result<(), AgentError> {
    match rustix::fs::lremovexattr(path, name) {
        Ok(()) | Err(rustix::io::Errno::NODATA) => Ok(()),
        Err(e) => Err(errno(format!("removing {name} from {}", path.display()))(e)),
    }
}

/// Filesystems (by device) that cloned a file once: every snapshot probes each brick, and
/// a filesystem does not lose reflink while mounted. A refusal is not kept, since it may
/// be passing (a full disk).
static CLONES: std::sync::Mutex<BTreeSet<u64>> = std::sync::Mutex::new(BTreeSet::new());

/// Whether the filesystem holding `brick` clones files (FICLONE), tried once per
/// filesystem on two scratch files under the brick's `.glusterfs`, where gluster keeps
/// its own files.
pub fn reflinks(brick: &Path) -> Result<bool, AgentError> {
    let what = || format!("trying a reflink on {}", brick.display());
    let dev = std::fs::metadata(brick).map_err(io(what()))?.dev();
    let known = |c: &BTreeSet<u64>| c.contains(&dev);
    if CLONES.lock().map(|c| known(&c)).unwrap_or(false) {
        return Ok(true);
    }
    let dir = brick.join(".glusterfs");
    let a = dir.join(format!(
        "glusterkube-reflink-probe-{}-a",
        std::process::id()
    ));
    let b = dir.join(format!(
        "glusterkube-reflink-probe-{}-b",
        std::process::id()
    ));
    let result = (|| {
        std::fs::write(&a, [0u8; 4096]).map_err(io(what()))?;
        let src = std::fs::File::open(&a).map_err(io(what()))?;
        let dst = std::fs::File::create(&b).map_err(io(what()))?;
        match rustix::fs::ioctl_ficlone(&dst, &src) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::OPNOTSUPP | rustix::io::Errno::INVAL) => Ok(false),
            Err(e) => Err(errno(what())(e)),
        }
    })();
    let _ = std::fs::remove_file(&a);
    let _ = std::fs::remove_file(&b);
    if let (Ok(true), Ok(mut c)) = (&result, CLONES.lock()) {
        c.insert(dev);
    }
    result
}

/// What one brick's copy did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Copied {
    pub entries: u64,
}

/// The gfid of `target` on this brick, which must be there and empty.
fn empty_target(brick: &Path, target: &Path) -> Result<[u8; 16], AgentError> {
    let root_gfid = gfid_of(target)?.ok_or_else(|| {
        AgentError::Precondition(format!(
            "{} has no gfid on this brick yet: make it through the volume first",
            target.display()
        ))
    })?;
    if std::fs::read_dir(target)
        .map_err(io(format!("listing {}", target.display())))?
        .next()
        .is_some()
    {
        return Err(AgentError::Conflict(format!(
            "{} is not empty on brick {}",
            target.display(),
            brick.display()
        )));
    }
    Ok(root_gfid)
}

/// The first half of a copy of `source` (a directory on `brick`) into the existing, empty
/// directory `target` on the same brick: the source cloned by reflink into a staging
/// directory under the brick's `.glusterfs`, out of gluster's sight. Only this half reads
/// the source, so only it needs gluster's barrier. `copy_id` names the copy (the same on
/// every brick).
pub async fn clone(
    brick: &Path,
    source: &Path,
    target: &Path,
    copy_id: &str,
) -> Result<(), AgentError> {
    let what = format!("copying {} to {}", source.display(), target.display());
    empty_target(brick, target)?;
    let staging = staging_dir(brick, copy_id);
    {
        let (brick, staging) = (brick.to_path_buf(), staging.clone());
        blocking(move || discard(&brick, &staging)).await?;
    }
    std::fs::create_dir_all(&staging).map_err(io(format!("making {}", staging.display())))?;
    // On XFS an entry cannot be renamed into a directory of another project (EXDEV): what
    // is staged takes the target's project, as a PV sized by project quota needs anyway.
    if let Ok((id, inherit)) = crate::projects::xfs::project_of(target) {
        if id != 0 || inherit {
            crate::projects::xfs::set_project(&staging, id).map_err(|e| AgentError::Io {
                what: format!(
                    "giving {} the project of {}",
                    staging.display(),
                    target.display()
                ),
                source: std::io::Error::other(e.to_string()),
            })?;
        }
    }
    let out = tokio::process::Command::new("cp")
        .args(["-a", "--reflink=always", "-T"])
        .arg(source)
        .arg(&staging)
        .output()
        .await
        .map_err(io(format!("running cp for {what}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(AgentError::Io {
            what,
            source: std::io::Error::other(err.lines().next().unwrap_or("").trim().to_string()),
        });
    }
    Ok(())
}

/// Removes what the copy `copy_id` staged on `brick`, with the handles it made.
pub async fn abandon(brick: &Path, copy_id: &str) -> Result<(), AgentError> {
    let (brick, staging) = (brick.to_path_buf(), staging_dir(brick, copy_id));
    blocking(move || discard(&brick, &staging)).await
}

/// Whether [`clone`] staged the copy `copy_id` on `brick`.
pub fn staged(brick: &Path, copy_id: &str) -> bool {
    staging_dir(brick, copy_id).is_dir()
}

/// The second half: every staged entry given its own gfid and handle (the gfids derive from
/// `copy_id` and the source entry's), then moved into `target`. A copy cut short never
/// shows gluster two entries with one gfid.
pub async fn finish(brick: &Path, target: &Path, copy_id: &str) -> Result<Copied, AgentError> {
    let root_gfid = empty_target(brick, target)?;
    let staging = staging_dir(brick, copy_id);
    let (b, st, t, id) = (
        brick.to_path_buf(),
        staging,
        target.to_path_buf(),
        copy_id.to_string(),
    );
    blocking(move || {
        let done = regfid(&b, &st, root_gfid, &id)?;
        // The target keeps its own gfid, layout and records, and takes the source's mode
        // and owner.
        let meta = std::fs::metadata(&st).map_err(io(format!("reading {}", st.display())))?;
        std::fs::set_permissions(&t, meta.permissions())
            .map_err(io(format!("setting the mode of {}", t.display())))?;
        std::os::unix::fs::lchown(&t, Some(meta.uid()), Some(meta.gid()))
            .map_err(io(format!("setting the owner of {}", t.display())))?;
        for e in std::fs::read_dir(&st).map_err(io(format!("listing {}", st.display())))? {
            let e = e.map_err(io(format!("listing {}", st.display())))?;
            std::fs::rename(e.path(), t.join(e.file_name())).map_err(io(format!(
                "moving {} into {}",
                e.path().display(),
                t.display()
            )))?;
        }
        std::fs::remove_dir(&st).map_err(io(format!("removing {}", st.display())))?;
        Ok(done)
    })
    .await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, AgentError> + Send + 'static,
) -> Result<T, AgentError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AgentError::Io {
            what: "copying on a brick".into(),
            source: std::io::Error::other(e.to_string()),
        })?
}

/// Where the copy `copy_id` is staged on `brick`.
pub fn staging_dir(brick: &Path, copy_id: &str) -> PathBuf {
    let h: String = Sha256::digest(copy_id.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    brick.join(".glusterfs/glusterkube-copies").join(h)
}

/// Removes what a copy cut short left in `staging`, with the handles it made: a file's
/// handle when it is this very inode, a directory's when it leads to this directory or to
/// nothing. Handles of the source (entries not yet given their own gfid) are left alone.
fn discard(brick: &Path, staging: &Path) -> Result<(), AgentError> {
    if std::fs::symlink_metadata(staging).is_err() {
        return Ok(());
    }
    fn walk(brick: &Path, dir: &Path) -> Result<(), AgentError> {
        for e in std::fs::read_dir(dir).map_err(io(format!("listing {}", dir.display())))? {
            let e = e.map_err(io(format!("listing {}", dir.display())))?;
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(io(format!("reading {}", path.display())))?;
            if meta.is_dir() {
                walk(brick, &path)?;
            }
            if let Some(g) = gfid_of(&path)? {
                let handle = brick.join(handle_path(&g));
                let ours = if meta.is_dir() {
                    match std::fs::metadata(&handle) {
                        Ok(h) => (h.dev(), h.ino()) == (meta.dev(), meta.ino()),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            std::fs::symlink_metadata(&handle).is_ok()
                        }
                        Err(_) => false,
                    }
                } else {
                    std::fs::symlink_metadata(&handle)
                        .map(|h| (h.dev(), h.ino()) == (meta.dev(), meta.ino()))
                        .unwrap_or(false)
                };
                if ours {
                    std::fs::remove_file(&handle)
                        .map_err(io(format!("removing {}", handle.display())))?;
                }
            }
            if meta.is_dir() {
                std::fs::remove_dir(&path)
            } else {
                std::fs::remove_file(&path)
            }
            .map_err(io(format!("removing {}", path.display())))?;
        }
        Ok(())
    }
    walk(brick, staging)?;
    std::fs::remove_dir(staging).map_err(io(format!("removing {}", staging.display())))
}

/// Gives every entry under `root` (parents first) its new gfid and handle, and drops the
/// attributes that belong to the source.
fn regfid(
    brick: &Path,
    root: &Path,
    root_gfid: [u8; 16],
    copy_id: &str,
) -> Result<Copied, AgentError> {
    let mut dirs: Vec<(PathBuf, [u8; 16])> = vec![(root.to_path_buf(), root_gfid)];
    let mut linked: HashSet<(u64, u64)> = HashSet::new();
    let mut handle_dirs: HashSet<PathBuf> = HashSet::new();
    let mut done = Copied::default();
    while let Some((dir, dir_gfid)) = dirs.pop() {
        let list = std::fs::read_dir(&dir).map_err(io(format!("listing {}", dir.display())))?;
        for e in list {
            let e = e.map_err(io(format!("listing {}", dir.display())))?;
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(io(format!("reading {}", path.display())))?;
            let ft = meta.file_type();
            if !ft.is_dir() && meta.nlink() > 1 && !linked.insert((meta.dev(), meta.ino())) {
                // Another name of an inode already given its gfid and handle.
                done.entries += 1;
                continue;
            }
            let old = gfid_of(&path)?.ok_or_else(|| {
                AgentError::Precondition(format!(
                    "{} has no gfid on brick {}: gluster has not looked it up yet; heal the \
                     volume and try again",
                    path.display(),
                    brick.display()
                ))
            })?;
            let new = copy_gfid(copy_id, &old);
            for (name, _) in xattrs(&path)? {
                if !travels(&name) {
                    remove_xattr(&path, &name)?;
                }
            }
            set_xattr(&path, GFID, &new)?;
            let handle = brick.join(handle_path(&new));
            let parent = handle.parent().expect("a handle has a parent");
            if !handle_dirs.contains(parent) {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(parent)
                    .map_err(io(format!("making {}", parent.display())))?;
                handle_dirs.insert(parent.to_path_buf());
            }
            // A directory's handle is a symlink to its place; anything else's, a hard link
            // (linkat without following, so a symlink's handle is the symlink).
            let made = if ft.is_dir() {
                std::os::unix::fs::symlink(dir_handle_target(&dir_gfid, &e.file_name()), &handle)
            } else {
                std::fs::hard_link(&path, &handle)
            };
            match made {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(AgentError::Conflict(format!(
                        "gfid {} of the copy of {} is already in use on brick {}",
                        uuid_string(&new),
                        path.display(),
                        brick.display()
                    )))
                }
                Err(e) => return Err(io(format!("making the handle of {}", path.display()))(e)),
            }
            if ft.is_dir() {
                dirs.push((path, new));
            }
            done.entries += 1;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfids_of_a_copy_are_the_same_everywhere_and_differ_per_target() {
        let old = [7u8; 16];
        let a = copy_gfid("snapshot:s1", &old);
        assert_eq!(a, copy_gfid("snapshot:s1", &old));
        assert_ne!(a, copy_gfid("snapshot:s2", &old));
        assert_ne!(a, copy_gfid("snapshot:s1", &[8u8; 16]));
        assert_ne!(a, old);
        assert_eq!(a[6] >> 4, 8, "version 8");
        assert_eq!(a[8] >> 6, 2, "RFC variant");
    }

    #[test]
    fn handles_are_where_gluster_looks() {
        let g = [
            0xab, 0xcd, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
            0x0d, 0x0e,
        ];
        assert_eq!(uuid_string(&g), "abcd0102-0304-0506-0708-090a0b0c0d0e");
        assert_eq!(
            handle_path(&g),
            Path::new(".glusterfs/ab/cd/abcd0102-0304-0506-0708-090a0b0c0d0e")
        );
        assert_eq!(
            dir_handle_target(&g, OsStr::new("d1")),
            Path::new("../../ab/cd/abcd0102-0304-0506-0708-090a0b0c0d0e/d1")
        );
    }

    #[test]
    fn replication_travels_and_place_does_not() {
        for keep in [
            "trusted.afr.pool-client-0",
            "trusted.afr.dirty",
            "trusted.ec.size",
            "trusted.ec.version",
            "trusted.glusterfs.dht",
            "trusted.glusterfs.dht.linkto",
            "trusted.glusterfs.mdata",
            "user.app",
            "security.selinux",
        ] {
            assert!(travels(keep), "{keep}");
        }
        for stay in [
            GFID,
            "trusted.gfid2path.5a1e0b7c4c0e1f2a",
            "trusted.pgfid.0000",
            "trusted.glusterfs.quota.size.1",
            "trusted.glusterfs.quota.limit-set.1",
            "trusted.glusterkube.pv-size",
        ] {
            assert!(!travels(stay), "{stay}");
        }
    }
}
