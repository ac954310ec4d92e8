//! FUSE mounts of gluster volumes and their teardown.
//!
//! The mount itself goes through `mount -t glusterfs` (the `mount.glusterfs` helper starts
//! the FUSE client process); unmounting and mount-table reads use the kernel directly.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

pub mod reattach;

#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("could not run mount: {0}; is glusterfs-client installed?")]
    Spawn(#[source] std::io::Error),
    #[error("mounting {source_spec} on {target} failed: {message}; see the client log {log_file}")]
    Mount {
        source_spec: String,
        target: PathBuf,
        message: String,
        log_file: PathBuf,
    },
    #[error("unmounting {target} failed: {source}")]
    Unmount {
        target: PathBuf,
        #[source]
        source: nix::Error,
    },
    #[error("reading the mount table failed: {0}")]
    MountTable(#[source] std::io::Error),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> MountError {
    MountError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Where a gluster volume (or a subdirectory of one) is fetched from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountSource {
    /// Volfile servers in order of preference. The first is the primary.
    pub servers: Vec<String>,
    pub volume: String,
    /// A subdirectory of the volume to mount instead of its root.
    pub subdir: Option<String>,
}

impl MountSource {
    /// Servers without repeats, first occurrence kept. A primary repeated among the backup
    /// servers makes mount.glusterfs fail with "File exists".
    pub fn unique_servers(&self) -> Result<Vec<&str>, MountError> {
        let mut out: Vec<&str> = Vec::new();
        for s in &self.servers {
            let ok = !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
            if !ok {
                return Err(invalid(
                    "servers",
                    format!("{s:?} is not a hostname or IPv4 address"),
                ));
            }
            if !out.contains(&s.as_str()) {
                out.push(s);
            }
        }
        if out.is_empty() {
            return Err(invalid("servers", "at least one volfile server is needed"));
        }
        Ok(out)
    }

    /// `host:/volume[/subdir]`, the device argument of mount.
    pub fn spec(&self) -> Result<String, MountError> {
        let servers = self.unique_servers()?;
        let vol_ok = !self.volume.is_empty()
            && self
                .volume
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
        if !vol_ok {
            return Err(invalid(
                "volume",
                format!("{:?} is not a gluster volume name", self.volume),
            ));
        }
        let mut spec = format!("{}:/{}", servers[0], self.volume);
        if let Some(sub) = &self.subdir {
            let ok = !sub.is_empty()
                && sub
                    .split('/')
                    .all(|p| !p.is_empty() && p != "." && p != "..")
                && sub
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
            if !ok {
                return Err(invalid(
                    "subdir",
                    format!("{sub:?} must be a relative path of plain names"),
                ));
            }
            spec.push('/');
            spec.push_str(sub);
        }
        Ok(spec)
    }
}

/// The `-o` option string: our log file and backup servers first, then the caller's flags.
pub fn mount_options(
    source: &MountSource,
    log_file: &Path,
    extra: &[String],
) -> Result<String, MountError> {
    let servers = source.unique_servers()?;
    let log = log_file
        .to_str()
        .filter(|s| log_file.is_absolute() && !s.contains(','))
        .ok_or_else(|| {
            invalid(
                "log_file",
                format!("{log_file:?} must be absolute, no commas"),
            )
        })?;
    let mut opts = vec![format!("log-file={log}")];
    if servers.len() > 1 {
        opts.push(format!("backup-volfile-servers={}", servers[1..].join(":")));
    }
    for flag in extra {
        let reserved = ["log-file", "backup-volfile-servers", "backupvolfile-server"];
        let key = flag.split('=').next().unwrap_or_default();
        if flag.is_empty() || flag.contains(',') || flag.chars().any(char::is_whitespace) {
            return Err(invalid(
                "mount_flags",
                format!("{flag:?} must be one option without commas or spaces"),
            ));
        }
        if reserved.contains(&key) {
            return Err(invalid(
                "mount_flags",
                format!("{key} is set by the driver and cannot be overridden"),
            ));
        }
        opts.push(flag.clone());
    }
    Ok(opts.join(","))
}

/// `mount.glusterfs` options with a value that the FUSE client takes as `--<name>=<value>`.
const VALUE_OPTIONS: [&str; 14] = [
    "log-level",
    "attribute-timeout",
    "entry-timeout",
    "negative-timeout",
    "gid-timeout",
    "background-qlen",
    "congestion-threshold",
    "direct-io-mode",
    "use-readdirp",
    "kernel-writeback-cache",
    "lru-limit",
    "invalidate-limit",
    "reader-thread-count",
    "auto-invalidation",
];

/// The FUSE client's arguments for `mount -o` style flags, for mounts that start the client
/// directly: `ro` is `--read-only`, `acl`, `fopen-keep-cache` and `resolve-gids` are switches,
/// the [`VALUE_OPTIONS`] take their value, `rw` is the default. Anything else is refused,
/// naming the flag, rather than dropped.
pub fn client_args(flags: &[String]) -> Result<Vec<String>, MountError> {
    let mut args = Vec::new();
    for flag in flags {
        let (key, value) = match flag.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (flag.as_str(), None),
        };
        let value_ok = value.is_none_or(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        });
        match (key, value) {
            ("rw", None) => {}
            ("ro", None) => args.push("--read-only".into()),
            ("acl" | "fopen-keep-cache" | "resolve-gids", None) => args.push(format!("--{key}")),
            (k, Some(v)) if VALUE_OPTIONS.contains(&k) && value_ok => {
                args.push(format!("--{k}={v}"))
            }
            _ => {
                return Err(invalid(
                    "mount_flags",
                    format!(
                        "{flag:?} is not supported (the gluster client is started directly); \
                         use ro, acl, fopen-keep-cache, resolve-gids or one of {} with a value",
                        VALUE_OPTIONS.join(", ")
                    ),
                ))
            }
        }
    }
    Ok(args)
}

/// Mounts gluster volumes with the system's mount helper.
#[derive(Debug, Clone, Default)]
pub struct Mounter {
    /// Words put before `mount`, for example to run the FUSE client in another network
    /// namespace (`nsenter --net=...`). Empty in production.
    pub wrapper: Vec<String>,
}

impl Mounter {
    pub async fn mount(
        &self,
        source: &MountSource,
        target: &Path,
        log_file: &Path,
        flags: &[String],
    ) -> Result<(), MountError> {
        let spec = source.spec()?;
        let opts = mount_options(source, log_file, flags)?;
        let mut words = self.wrapper.clone();
        words.extend([
            "mount".into(),
            "-t".into(),
            "glusterfs".into(),
            "-o".into(),
            opts,
        ]);
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .arg(&spec)
            .arg(target)
            .stdin(Stdio::null());
        tracing::info!(%spec, target = %target.display(), "mounting");
        let out = cmd.output().await.map_err(MountError::Spawn)?;
        if out.status.success() && is_mounted(target)? {
            return Ok(());
        }
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(MountError::Mount {
            source_spec: spec,
            target: target.to_path_buf(),
            message: if message.is_empty() {
                format!("mount exited with {} and nothing is mounted", out.status)
            } else {
                message
            },
            log_file: log_file.to_path_buf(),
        })
    }
}

/// The client pid glusterd gives its own quota mounts. Gluster lets only such internal clients
/// set `trusted.glusterfs.quota.*` attributes; quota is not enforced on them.
pub const QUOTA_CLIENT_PID: i32 = -5;

impl Mounter {
    /// Mounts a whole volume with the FUSE client run directly as an internal quota client,
    /// so the caller may set directory limits through it. `mount.glusterfs` has no option for
    /// the client pid, hence the direct start; it never serves workloads.
    pub async fn mount_quota_client(
        &self,
        source: &MountSource,
        target: &Path,
        log_file: &Path,
    ) -> Result<(), MountError> {
        if source.subdir.is_some() {
            return Err(invalid("subdir", "a quota client mounts the whole volume"));
        }
        tracing::info!(target = %target.display(), "mounting as quota client");
        self.mount_direct(
            source,
            target,
            log_file,
            vec![format!("--client-pid={QUOTA_CLIENT_PID}")],
        )
        .await
    }

    /// Mounts with TLS on the management connection for this mount only (`glusterfs
    /// --secure-mgmt=yes`). Gluster turns management TLS on for every process of a host that
    /// has /var/lib/glusterd/secure-access, and `mount.glusterfs` has no per-mount option, so
    /// a node plugin serving clusters with and without TLS starts the client itself for the
    /// TLS ones. The client's certificate is read from OpenSSL's directory (/usr/lib/ssl on
    /// Debian).
    ///
    /// `flags` are the `mount -o` options a caller would give `mount.glusterfs`; those the
    /// client takes as arguments are translated ([`client_args`]), others are refused.
    pub async fn mount_secure(
        &self,
        source: &MountSource,
        target: &Path,
        log_file: &Path,
        flags: &[String],
    ) -> Result<(), MountError> {
        // spec() (in mount_direct) validates the subdirectory before it becomes an argument.
        let mut args = vec!["--secure-mgmt=yes".to_string()];
        if let Some(sub) = &source.subdir {
            args.push(format!("--subdir-mount=/{sub}"));
        }
        args.extend(client_args(flags)?);
        tracing::info!(target = %target.display(), "mounting with management TLS");
        self.mount_direct(source, target, log_file, args).await
    }

    /// Starts the FUSE client directly with `args` before the volfile servers.
    async fn mount_direct(
        &self,
        source: &MountSource,
        target: &Path,
        log_file: &Path,
        args: Vec<String>,
    ) -> Result<(), MountError> {
        let spec = source.spec()?;
        let mut words = self.wrapper.clone();
        words.extend(client_words(source, target, log_file, args)?);
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..]).stdin(Stdio::null());
        let out = cmd.output().await.map_err(MountError::Spawn)?;
        // The client daemonises before the kernel mount exists; wait for it as
        // mount.glusterfs does.
        for _ in 0..100 {
            if !out.status.success() {
                break;
            }
            if is_mounted(target)? {
                return Ok(());
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let message = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(MountError::Mount {
            source_spec: spec,
            target: target.to_path_buf(),
            message: if message.is_empty() {
                format!(
                    "glusterfs exited with {} and nothing is mounted",
                    out.status
                )
            } else {
                message
            },
            log_file: log_file.to_path_buf(),
        })
    }
}

/// `glusterfs` with `args`, the volfile servers (no repeats), the volume and its log, and the
/// mount point last (where [`fuse_clients`] finds it).
fn client_words(
    source: &MountSource,
    target: &Path,
    log_file: &Path,
    args: Vec<String>,
) -> Result<Vec<String>, MountError> {
    // spec() validates the volume and subdirectory before they become arguments.
    source.spec()?;
    let mut words = vec!["glusterfs".to_string()];
    words.extend(args);
    words.extend(
        source
            .unique_servers()?
            .iter()
            .map(|s| format!("--volfile-server={s}")),
    );
    words.push(format!("--volfile-id={}", source.volume));
    words.push(format!("--log-file={}", log_file.display()));
    words.push(target.display().to_string());
    Ok(words)
}

/// The command line of a FUSE client that stays in the foreground (`-N`) serving `source` on
/// `target`, as a mount pod runs it: management TLS for TLS volumes, the subdirectory, and the
/// `mount -o` style `flags` translated ([`client_args`]).
pub fn foreground_client(
    source: &MountSource,
    target: &Path,
    log_file: &Path,
    flags: &[String],
    tls: bool,
) -> Result<Vec<String>, MountError> {
    let mut args = vec!["-N".to_string()];
    if tls {
        args.push("--secure-mgmt=yes".into());
    }
    if let Some(sub) = &source.subdir {
        args.push(format!("--subdir-mount=/{sub}"));
    }
    args.extend(client_args(flags)?);
    client_words(source, target, log_file, args)
}

/// Bind-mounts `source` on `target`, read-only if asked (a second remount step, as the
/// kernel ignores MS_RDONLY on the first bind).
pub fn bind(source: &Path, target: &Path, readonly: bool) -> Result<(), MountError> {
    use nix::mount::{mount, MsFlags};
    let fail = |e: nix::Error| MountError::Mount {
        source_spec: source.display().to_string(),
        target: target.to_path_buf(),
        message: e.to_string(),
        log_file: PathBuf::new(),
    };
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(fail)?;
    if readonly {
        let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        if let Err(e) = mount(None::<&str>, target, None::<&str>, flags, None::<&str>) {
            let _ = nix::mount::umount2(target, nix::mount::MntFlags::MNT_DETACH);
            return Err(fail(e));
        }
    }
    Ok(())
}

/// Unmounts `target`. Nothing mounted there, or no such path, counts as success.
pub fn unmount(target: &Path) -> Result<(), MountError> {
    // The mount table decides, not a stat: a FUSE mount whose client died answers ENOTCONN,
    // so `exists()` says false for exactly the mounts that most need unmounting.
    if !is_mounted(target)? {
        return Ok(());
    }
    match nix::mount::umount2(target, nix::mount::MntFlags::empty()) {
        Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => Ok(()),
        Err(source) => Err(MountError::Unmount {
            target: target.to_path_buf(),
            source,
        }),
    }
}

/// The gluster FUSE client processes alive, by the mount point each serves (its last
/// argument), found by their command lines in one pass over `/proc`. Needs the PID namespace
/// the clients run in.
pub fn fuse_clients() -> std::collections::HashMap<PathBuf, i32> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Default::default();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .collect();
            args.first()?.ends_with(b"glusterfs").then_some(())?;
            let mount_point = PathBuf::from(std::ffi::OsStr::from_bytes(args.last()?));
            Some((mount_point, pid))
        })
        .collect()
}

/// The gluster FUSE client process serving `mount_point`; None when no such process lives.
pub fn fuse_client_pid(mount_point: &Path) -> Option<i32> {
    fuse_clients().remove(mount_point)
}

/// Whether `target` is a mount point, from the kernel's mount table.
pub fn is_mounted(target: &Path) -> Result<bool, MountError> {
    Ok(mount_points()?.iter().any(|p| p == target))
}

/// Every mount point in the kernel's mount table of this process.
pub fn mount_points() -> Result<Vec<PathBuf>, MountError> {
    Ok(reattach::own_mounts()?
        .into_iter()
        .map(|e| e.mount_point)
        .collect())
}

pub(crate) fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) if bytes[i] == b'\\' => {
                out.push(
                    d.iter()
                        .fold(0u8, |acc, b| acc.wrapping_mul(8).wrapping_add(b - b'0')),
                );
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(servers: &[&str]) -> MountSource {
        MountSource {
            servers: servers.iter().map(|s| s.to_string()).collect(),
            volume: "pool".into(),
            subdir: None,
        }
    }

    #[test]
    fn primary_is_never_a_backup_and_repeats_go() {
        let s = src(&["a", "b", "a", "c", "b"]);
        let opts = mount_options(&s, Path::new("/var/log/x.log"), &[]).unwrap();
        assert_eq!(opts, "log-file=/var/log/x.log,backup-volfile-servers=b:c");
        assert_eq!(s.spec().unwrap(), "a:/pool");
        let single = mount_options(&src(&["a", "a"]), Path::new("/l"), &[]).unwrap();
        assert_eq!(single, "log-file=/l");
    }

    #[test]
    fn subdir_and_flags() {
        let mut s = src(&["h1", "h2"]);
        s.subdir = Some("pvs/pvc-1".into());
        assert_eq!(s.spec().unwrap(), "h1:/pool/pvs/pvc-1");
        let opts = mount_options(&s, Path::new("/l"), &["ro".into(), "acl".into()]).unwrap();
        assert!(opts.ends_with(",ro,acl"), "{opts}");
    }

    #[test]
    fn bad_input_names_the_field() {
        let err = |r: Result<String, MountError>| r.unwrap_err().to_string();
        assert!(err(src(&[]).spec()).contains("invalid servers"));
        assert!(err(src(&["a b"]).spec()).contains("invalid servers"));
        let mut s = src(&["a"]);
        s.subdir = Some("../etc".into());
        assert!(err(s.spec()).contains("invalid subdir"));
        s.subdir = None;
        s.volume = "x/y".into();
        assert!(err(s.spec()).contains("invalid volume"));
        let s = src(&["a"]);
        for bad in ["a,b", "", "log-file=/x", "backup-volfile-servers=z"] {
            let r = mount_options(&s, Path::new("/l"), &[bad.to_string()]);
            assert!(err(r).contains("invalid mount_flags"), "{bad}");
        }
        assert!(err(mount_options(&s, Path::new("rel"), &[])).contains("invalid log_file"));
    }

    #[test]
    fn mountinfo_escapes() {
        let table = "36 35 98:0 / /mnt/with\\040space rw - ext4 /dev/x rw\n\
                     37 35 0:44 / /tmp/plain rw - fuse.glusterfs h:/v rw\n";
        let points: Vec<_> = reattach::parse_mountinfo(table)
            .into_iter()
            .map(|e| e.mount_point)
            .collect();
        assert_eq!(
            points,
            [Path::new("/mnt/with space"), Path::new("/tmp/plain")]
        );
    }

    #[test]
    fn direct_client_arguments_come_from_mount_flags() {
        let f = |v: &[&str]| client_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            f(&[
                "ro",
                "rw",
                "acl",
                "log-level=WARNING",
                "kernel-writeback-cache=yes"
            ])
            .unwrap(),
            [
                "--read-only",
                "--acl",
                "--log-level=WARNING",
                "--kernel-writeback-cache=yes"
            ]
        );
        for bad in [
            "noatime",
            "log-level",
            "log-level=a b",
            "volfile-server=x",
            "ro=1",
        ] {
            let e = f(&[bad]).unwrap_err().to_string();
            assert!(e.contains("mount_flags") && e.contains(bad), "{bad}: {e}");
        }
    }

    #[test]
    fn a_foreground_client_serves_the_mount_point_named_last() {
        let source = MountSource {
            servers: vec!["a".into(), "b".into(), "a".into()],
            volume: "pool".into(),
            subdir: Some("pvc-1".into()),
        };
        let words = foreground_client(
            &source,
            Path::new("/var/lib/kubelet/plugins/x/globalmount"),
            Path::new("/dev/stderr"),
            &["ro".into()],
            true,
        )
        .unwrap();
        assert_eq!(
            words,
            [
                "glusterfs",
                "-N",
                "--secure-mgmt=yes",
                "--subdir-mount=/pvc-1",
                "--read-only",
                "--volfile-server=a",
                "--volfile-server=b",
                "--volfile-id=pool",
                "--log-file=/dev/stderr",
                "/var/lib/kubelet/plugins/x/globalmount",
            ]
        );
        let plain = foreground_client(
            &MountSource {
                subdir: None,
                ..source.clone()
            },
            Path::new("/m"),
            Path::new("/dev/stderr"),
            &[],
            false,
        )
        .unwrap();
        assert!(!plain
            .iter()
            .any(|w| w.contains("secure") || w.contains("subdir")));
        let bad = MountSource {
            subdir: Some("../etc".into()),
            ..source
        };
        assert!(foreground_client(&bad, Path::new("/m"), Path::new("/l"), &[], false).is_err());
    }

    #[test]
    fn unmount_of_a_plain_directory_is_success() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!is_mounted(dir.path()).unwrap());
        unmount(dir.path()).unwrap();
        unmount(&dir.path().join("missing")).unwrap();
    }
}
