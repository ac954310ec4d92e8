//! Putting a repaired mount back inside running containers.
//!
//! A container sees a published volume through its own bind mount of the FUSE filesystem,
//! made in its private mount namespace when it started. When the gluster client behind that
//! filesystem dies (it ran in a node plugin container that was restarted), mounting the volume
//! again on the node does not reach the container: nothing propagates into its private mounts,
//! and it keeps answering ENOTCONN. So the repaired mount is cloned (`open_tree`) and moved
//! (`move_mount`) over the dead one inside every mount namespace that still holds it. Open
//! files and working directories on the dead mount stay dead; new opens work again.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use crate::{unescape_octal, MountError};

/// A device number, `major:minor`, as the mount table shows it. Every FUSE connection has its
/// own, and it is not reused while any namespace still holds the dead mount.
pub type Device = (u32, u32);

/// One line of a mount table (`/proc/<pid>/mountinfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub device: Device,
    /// The path inside the mounted filesystem that appears at `mount_point` (`/` unless a
    /// subdirectory, such as a pod's `subPath`, was bound).
    pub root: String,
    /// Relative to the root directory of the process whose table this is.
    pub mount_point: PathBuf,
    /// Per-mount options (`ro`, `nosuid`, `nodev`, `noexec`, ...).
    pub options: Vec<String>,
    /// The filesystem type (`fuse.glusterfs`, `xfs`, ...).
    pub fs_type: String,
    /// What was mounted (for a gluster client, `SERVER:VOLUME/SUBDIR`).
    pub source: String,
}

/// Parses a mountinfo table; lines that do not have the kernel's shape are skipped.
pub fn parse_mountinfo(table: &str) -> Vec<MountEntry> {
    table.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MountEntry> {
    let fields: Vec<&str> = line.split(' ').collect();
    let (major, minor) = fields.get(2)?.split_once(':')?;
    Some(MountEntry {
        device: (major.parse().ok()?, minor.parse().ok()?),
        root: unescape_octal(fields.get(3)?),
        mount_point: PathBuf::from(unescape_octal(fields.get(4)?)),
        options: fields.get(5)?.split(',').map(String::from).collect(),
        // Optional fields end at a lone "-"; the filesystem type and source follow it.
        fs_type: fields
            .iter()
            .skip(6)
            .skip_while(|f| **f != "-")
            .nth(1)?
            .to_string(),
        source: unescape_octal(fields.iter().skip(6).skip_while(|f| **f != "-").nth(2)?),
    })
}

/// This process's mount table.
pub fn own_mounts() -> Result<Vec<MountEntry>, MountError> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").map_err(MountError::MountTable)?;
    Ok(parse_mountinfo(&table))
}

/// The device of the topmost mount at `path` in `table`; None when nothing is mounted there.
pub fn device_at(table: &[MountEntry], path: &Path) -> Option<Device> {
    table
        .iter()
        .rev()
        .find(|e| e.mount_point == path)
        .map(|e| e.device)
}

/// One mount namespace other than ours: the processes in it (any of them can be used to
/// enter it; one may end at any moment, say a `dd` a shell started), and the mounts of
/// wanted devices in it.
#[derive(Debug, Clone)]
pub struct Holder {
    pub pids: Vec<i32>,
    pub mounts: Vec<MountEntry>,
}

/// Every mount namespace on the node other than ours (this needs the host's PID namespace):
/// the processes seen in it, and its mount table. Processes come and go while this runs; a
/// namespace is recorded only once its table was read, so one whose first process ended
/// first is read through the next.
fn namespaces() -> Vec<(Vec<i32>, Vec<MountEntry>)> {
    let own = std::fs::read_link("/proc/self/ns/mnt").ok();
    let mut index: std::collections::HashMap<PathBuf, usize> = Default::default();
    let mut out: Vec<(Vec<i32>, Vec<MountEntry>)> = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(ns) = std::fs::read_link(format!("/proc/{pid}/ns/mnt")) else {
            continue;
        };
        if Some(&ns) == own.as_ref() {
            continue;
        }
        if let Some(i) = index.get(&ns) {
            out[*i].0.push(pid);
            continue;
        }
        let Ok(table) = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")) else {
            continue;
        };
        index.insert(ns, out.len());
        out.push((vec![pid], parse_mountinfo(&table)));
    }
    out
}

/// Every other mount namespace on the node that holds a mount of one of `devices`, with
/// every process seen in it.
pub fn holders(devices: &[Device]) -> Vec<Holder> {
    namespaces()
        .into_iter()
        .filter_map(|(pids, table)| {
            let mounts: Vec<MountEntry> = table
                .into_iter()
                .filter(|m| devices.contains(&m.device))
                .collect();
            (!mounts.is_empty()).then_some(Holder { pids, mounts })
        })
        .collect()
}

/// Devices of gluster mounts of `source` in `table` other than `live`: copies a container
/// still holds of a mount that died and was replaced.
pub fn stale_copies(table: &[MountEntry], source: &str, live: Device) -> Vec<Device> {
    let mut out: Vec<Device> = table
        .iter()
        .filter(|m| m.fs_type == "fuse.glusterfs" && m.source == source && m.device != live)
        .map(|m| m.device)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// [`stale_copies`] over every other mount namespace on the node.
pub fn stale_copies_anywhere(source: &str, live: Device) -> Vec<Device> {
    let mut out: Vec<Device> = namespaces()
        .iter()
        .flat_map(|(_, table)| stale_copies(table, source, live))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where, below a repaired mount at `mount_root`, the content of `entry` lives.
pub fn source_for(mount_root: &Path, entry: &MountEntry) -> Option<PathBuf> {
    let relative = Path::new(&entry.root).strip_prefix("/").ok()?;
    let safe = relative
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    safe.then(|| mount_root.join(relative))
}

fn ns_err(target: &Path, what: &str, e: impl std::fmt::Display) -> MountError {
    MountError::Mount {
        source_spec: what.to_string(),
        target: target.to_path_buf(),
        message: e.to_string(),
        log_file: PathBuf::new(),
    }
}

/// Replaces the dead mount `entry` in `pid`'s mount namespace with a clone of `source`, a
/// healthy path in our namespace, keeping the entry's `ro`, `nosuid`, `nodev` and `noexec`.
pub fn reattach(pid: i32, entry: &MountEntry, source: &Path) -> Result<(), MountError> {
    use nix::mount::MsFlags;
    let target = entry.mount_point.clone();
    let fail = |what: &str, e: &dyn std::fmt::Display| ns_err(&target, what, e);
    let tree = rustix::mount::open_tree(
        rustix::fs::CWD,
        source,
        rustix::mount::OpenTreeFlags::OPEN_TREE_CLONE
            | rustix::mount::OpenTreeFlags::OPEN_TREE_CLOEXEC,
    )
    .map_err(|e| fail(&format!("cloning {}", source.display()), &e))?;
    let ns = File::open(format!("/proc/{pid}/ns/mnt"))
        .map_err(|e| fail(&format!("mount namespace of process {pid}"), &e))?;
    let root = File::open(format!("/proc/{pid}/root"))
        .map_err(|e| fail(&format!("root directory of process {pid}"), &e))?;
    let mut flags = MsFlags::empty();
    for (option, flag) in [
        ("ro", MsFlags::MS_RDONLY),
        ("nosuid", MsFlags::MS_NOSUID),
        ("nodev", MsFlags::MS_NODEV),
        ("noexec", MsFlags::MS_NOEXEC),
    ] {
        if entry.options.iter().any(|o| o == option) {
            flags |= flag;
        }
    }
    // Entering another mount namespace changes the calling thread's root and working
    // directory, so it happens on a thread of its own (with its own filesystem attributes)
    // that ends right after.
    let worker = std::thread::spawn(move || -> Result<(), MountError> {
        let fail = |what: &str, e: &dyn std::fmt::Display| ns_err(&target, what, e);
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)
            .map_err(|e| fail("unsharing filesystem attributes", &e))?;
        nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNS)
            .map_err(|e| fail(&format!("entering the mount namespace of {pid}"), &e))?;
        // Paths in the process's table are relative to its root (a container's own root).
        nix::unistd::fchdir(root.as_fd())
            .and_then(|_| nix::unistd::chroot("."))
            .map_err(|e| fail(&format!("entering the root directory of {pid}"), &e))?;
        match nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::Error::EINVAL) => {}
            Err(e) => return Err(fail("detaching the dead mount", &e)),
        }
        rustix::mount::move_mount(
            tree.as_fd(),
            "",
            rustix::fs::CWD,
            &target,
            rustix::mount::MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH,
        )
        .map_err(|e| fail("attaching the repaired mount", &e))?;
        if !flags.is_empty() {
            nix::mount::mount(
                None::<&str>,
                &target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags,
                None::<&str>,
            )
            .map_err(|e| fail("restoring the mount's flags", &e))?;
        }
        Ok(())
    });
    worker.join().map_err(|_| {
        ns_err(
            &entry.mount_point,
            "re-attaching",
            "the worker thread panicked",
        )
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
812 790 0:96 / /data rw,relatime - fuse.glusterfs 127.0.0.10:/pool/pvc-1 rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=131072
813 790 0:96 /logs/a\\040b /var/log/app ro,nosuid,nodev,relatime master:3 - fuse.glusterfs 127.0.0.10:/pool/pvc-1 rw
garbage line
";

    #[test]
    fn mountinfo_lines_parse_with_optional_fields_and_escapes() {
        let e = parse_mountinfo(TABLE);
        assert_eq!(e.len(), 3);
        assert_eq!(e[0].mount_point, PathBuf::from("/proc"));
        assert_eq!(e[1].device, (0, 96));
        assert_eq!(e[1].mount_point, PathBuf::from("/data"));
        assert_eq!(e[2].root, "/logs/a b");
        assert_eq!(e[2].options, ["ro", "nosuid", "nodev", "relatime"]);
        assert_eq!(e[0].fs_type, "proc");
        assert_eq!(e[1].fs_type, "fuse.glusterfs");
        assert_eq!(e[2].fs_type, "fuse.glusterfs");
        assert_eq!(e[1].source, "127.0.0.10:/pool/pvc-1");
        assert_eq!(e[0].source, "proc");
    }

    #[test]
    fn a_copy_of_a_replaced_mount_is_stale_and_the_live_one_is_not() {
        let table = format!(
            "{TABLE}900 790 0:97 / /data2 rw - fuse.glusterfs 127.0.0.10:/pool/pvc-1 rw\n\
             901 790 0:98 / /other rw - fuse.glusterfs 127.0.0.10:/pool/pvc-2 rw\n"
        );
        let e = parse_mountinfo(&table);
        // 0:97 is the live staging mount: 0:96, the same source, is a dead copy.
        assert_eq!(
            stale_copies(&e, "127.0.0.10:/pool/pvc-1", (0, 97)),
            [(0, 96)]
        );
        assert!(stale_copies(&e, "127.0.0.10:/pool/pvc-2", (0, 98)).is_empty());
    }

    #[test]
    fn sources_stay_below_the_repaired_mount() {
        let e = parse_mountinfo(TABLE);
        let root = Path::new("/stage");
        assert_eq!(source_for(root, &e[1]), Some(PathBuf::from("/stage")));
        assert_eq!(
            source_for(root, &e[2]),
            Some(PathBuf::from("/stage/logs/a b"))
        );
        let mut up = e[1].clone();
        up.root = "/../etc".into();
        assert_eq!(source_for(root, &up), None);
        up.root = "relative".into();
        assert_eq!(source_for(root, &up), None);
    }

    /// Every process of a namespace is listed with it, so a repair can go through another
    /// when the first one ends. Needs root (unshare, mount), as the test command does.
    #[test]
    fn a_namespace_comes_with_all_its_processes() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let dir = tempfile::tempdir().unwrap();
        let mut first = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs gk-holders {} && echo ready && exec sleep 60",
                dir.path().display()
            ))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(first.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        let pid = first.id() as i32;
        let mut second = Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-m", "sleep", "60"])
            .spawn()
            .unwrap();
        let table = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let device = parse_mountinfo(&table)
            .into_iter()
            .find(|m| m.mount_point == dir.path())
            .expect("the tmpfs in the test's namespace")
            .device;
        // nsenter execs sleep once it entered: wait until it stands in the namespace.
        let want = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
        for _ in 0..100 {
            if std::fs::read_link(format!("/proc/{}/ns/mnt", second.id())).ok()
                == Some(want.clone())
            {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let found = holders(&[device]);
        let _ = first.kill();
        let _ = second.kill();
        let _ = first.wait();
        let _ = second.wait();
        assert_eq!(found.len(), 1, "{found:?}");
        let h = &found[0];
        assert!(
            h.pids.contains(&pid) && h.pids.contains(&(second.id() as i32)),
            "{h:?}"
        );
        assert_eq!(h.mounts.len(), 1);
        assert_eq!(h.mounts[0].mount_point, dir.path());
    }
}
