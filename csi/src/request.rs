//! Checking what a CSI request carries before anything acts on it: every field from outside
//! is validated here, and a refusal names the field.

use gk_api::crd::TuningProfile;
use std::collections::HashMap;
use std::path::PathBuf;

use csi::volume_capability::access_mode::Mode;
use csi_proto::v1 as csi;
use tonic::Status;

use crate::mount::{self, MountSource};

/// The size of a volume whose request names none.
pub const DEFAULT_SIZE: u64 = 1 << 30;

pub fn invalid(field: &str, reason: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("invalid {field}: {reason}"))
}

pub fn param_status(e: crate::params::ParamError) -> Status {
    Status::invalid_argument(e.to_string())
}

/// Access modes this driver serves: any, since a gluster volume is a shared filesystem.
pub fn check_capabilities(caps: &[csi::VolumeCapability]) -> Result<(), Status> {
    if caps.is_empty() {
        return Err(invalid("volume_capabilities", "at least one is required"));
    }
    for (i, c) in caps.iter().enumerate() {
        check_capability(&format!("volume_capabilities[{i}]"), c)?;
    }
    Ok(())
}

/// One capability, named `field` in refusals.
fn check_capability(field: &str, c: &csi::VolumeCapability) -> Result<(), Status> {
    match &c.access_type {
        Some(csi::volume_capability::AccessType::Mount(m)) => {
            check_mount(&format!("{field}.mount"), m)?
        }
        Some(csi::volume_capability::AccessType::Block(_)) => {
            return Err(invalid(
                field,
                "block access is not supported; gluster volumes are filesystems",
            ))
        }
        None => return Err(invalid(&format!("{field}.access_type"), "is required")),
    }
    let mode = c.access_mode.as_ref().map(|m| m.mode).unwrap_or(0);
    match Mode::try_from(mode) {
        Ok(Mode::Unknown) | Err(_) => Err(invalid(&format!("{field}.access_mode"), "is required")),
        Ok(_) => Ok(()),
    }
}

/// The filesystem types a mount capability may name: none (the CO's default) or gluster's.
const FS_TYPES: [&str; 3] = ["", "glusterfs", "fuse.glusterfs"];

/// Checks a mount capability before anything is made with it: a filesystem type this
/// driver mounts, no mount group (not advertised), and mount flags the gluster client takes.
/// StorageClass `mountOptions` arrive here, at CreateVolume and at every NodeStageVolume, so
/// a typo is refused by name at once instead of reaching a mount pod whose client refuses
/// it and restarts for ever.
fn check_mount(field: &str, m: &csi::volume_capability::MountVolume) -> Result<(), Status> {
    if !FS_TYPES.contains(&m.fs_type.as_str()) {
        return Err(invalid(
            &format!("{field}.fs_type"),
            format!(
                "{:?}: gluster volumes are mounted as glusterfs; leave fsType empty",
                m.fs_type
            ),
        ));
    }
    if !m.volume_mount_group.is_empty() {
        return Err(invalid(
            &format!("{field}.volume_mount_group"),
            "is not supported by this driver (it does not advertise VOLUME_MOUNT_GROUP)",
        ));
    }
    check_flags(&format!("{field}.mount_flags"), &m.mount_flags)
}

/// Mount flags: each one the gluster client takes ([`mount::client_args`]), and none that
/// contradicts another (`ro` with `rw`, one option with two values). A flag repeated as is
/// is harmless and allowed.
pub fn check_flags(field: &str, flags: &[String]) -> Result<(), Status> {
    let key = |f: &str| match f {
        "ro" | "rw" => "ro/rw".to_string(),
        other => other.split('=').next().unwrap_or(other).to_string(),
    };
    for (j, flag) in flags.iter().enumerate() {
        if let Err(e) = mount::client_args(std::slice::from_ref(flag)) {
            let reason = match e {
                mount::MountError::Invalid { reason, .. } => reason,
                other => other.to_string(),
            };
            return Err(invalid(&format!("{field}[{j}]"), reason));
        }
        if let Some(other) = flags[..j]
            .iter()
            .find(|o| key(o) == key(flag) && *o != flag)
        {
            return Err(invalid(
                &format!("{field}[{j}]"),
                format!("{flag:?} contradicts {other:?}, given before it"),
            ));
        }
    }
    Ok(())
}

pub fn required_bytes(range: Option<&csi::CapacityRange>) -> Result<u64, Status> {
    let Some(r) = range else {
        return Ok(DEFAULT_SIZE);
    };
    if r.required_bytes < 0 || r.limit_bytes < 0 {
        return Err(invalid("capacity_range", "sizes cannot be negative"));
    }
    let (req, lim) = (r.required_bytes as u64, r.limit_bytes as u64);
    if lim != 0 && req > lim {
        return Err(Status::out_of_range(format!(
            "required_bytes {req} is above limit_bytes {lim}"
        )));
    }
    Ok(match (req, lim) {
        (0, 0) => DEFAULT_SIZE,
        (0, lim) => lim.min(DEFAULT_SIZE),
        (req, _) => req,
    })
}

/// One page of `all` for a List call: the entries from `starting_token` (an index this
/// driver gave), at most `max_entries` of them (0: all), and the next page's token.
pub fn page<T: Clone>(
    all: &[T],
    max_entries: i32,
    starting_token: &str,
    what: &str,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(invalid("max_entries", "cannot be negative"));
    }
    let start: usize = if starting_token.is_empty() {
        0
    } else {
        starting_token.parse().map_err(|_| {
            Status::aborted(format!(
                "starting_token {starting_token:?} is not one this driver gave"
            ))
        })?
    };
    if start > all.len() {
        return Err(Status::aborted(format!(
            "starting_token {start} is past the {} {what}",
            all.len()
        )));
    }
    let take = if max_entries == 0 {
        usize::MAX
    } else {
        max_entries as usize
    };
    let end = start.saturating_add(take).min(all.len());
    let next = if end < all.len() {
        end.to_string()
    } else {
        String::new()
    };
    Ok((all[start..end].to_vec(), next))
}

/// The volume context of a PV: where the node plugin mounts it from. `tls_secret` names the
/// Secret holding the gluster certificate clients present, when the pool has a CA of its own
/// (a pool made by hand); `profile` is the volume's tuning profile when known (it may ask for
/// mount options on single-node volumes).
pub fn volume_context(
    pool: &(dyn std::fmt::Display + Sync),
    volume: &str,
    servers: &[String],
    dir: &str,
    tls: bool,
    tls_secret: Option<&str>,
    profile: Option<TuningProfile>,
) -> HashMap<String, String> {
    let mut ctx = HashMap::from([
        ("pool".to_string(), pool.to_string()),
        ("glusterVolume".to_string(), volume.to_string()),
        ("servers".to_string(), servers.join(",")),
        ("subdir".to_string(), dir.to_string()),
        ("tls".to_string(), tls.to_string()),
    ]);
    if let Some(s) = tls_secret {
        ctx.insert(TLS_SECRET_KEY.to_string(), s.to_string());
    }
    if let Some(p) = profile {
        ctx.insert("profile".to_string(), p.name().to_string());
    }
    ctx
}

/// Whether the capability publishes the volume to one node only.
fn single_node(cap: &csi::VolumeCapability) -> bool {
    use csi::volume_capability::access_mode::Mode;
    cap.access_mode.as_ref().is_some_and(|m| {
        matches!(
            Mode::try_from(m.mode),
            Ok(Mode::SingleNodeWriter
                | Mode::SingleNodeReaderOnly
                | Mode::SingleNodeSingleWriter
                | Mode::SingleNodeMultiWriter)
        )
    })
}

/// The mount options a volume's profile asks for with this capability, beyond the ones the
/// StorageClass gave (`given`, which win: an option already there is not added again).
/// Volumes made before profiles were recorded have no profile in their context, and get none.
pub fn profile_mount_flags(
    ctx: &HashMap<String, String>,
    cap: &csi::VolumeCapability,
    given: &[String],
) -> Result<Vec<String>, Status> {
    let Some(name) = ctx.get("profile") else {
        return Ok(Vec::new());
    };
    let profile = TuningProfile::parse(name).ok_or_else(|| {
        invalid(
            "volume_context.profile",
            format!("{name:?} is not a tuning profile this driver knows"),
        )
    })?;
    if !single_node(cap) {
        return Ok(Vec::new());
    }
    let key = |f: &str| f.split('=').next().unwrap_or(f).to_string();
    Ok(profile
        .single_node_mount_options()
        .iter()
        .filter(|o| !given.iter().any(|g| key(g) == key(o)))
        .map(|o| o.to_string())
        .collect())
}

/// The volume context key naming the Secret with a pool's own gluster certificate.
pub const TLS_SECRET_KEY: &str = "tlsSecret";

/// The keys of a volume context this driver reads. A static PV's `volumeAttributes` are
/// written by people, so a key that is none of these (a typo such as `server`) is refused;
/// keys with a `/` are the CO's own (the provisioner adds
/// `storage.kubernetes.io/csiProvisionerIdentity`).
const CONTEXT_KEYS: [&str; 7] = [
    "pool",
    "glusterVolume",
    "servers",
    "subdir",
    "tls",
    TLS_SECRET_KEY,
    "profile",
];

/// Whether the volume context asks for gluster's TLS; volumes made before TLS existed have no
/// such key and mount without it.
pub fn context_tls(ctx: &HashMap<String, String>) -> Result<bool, Status> {
    match ctx.get("tls").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(invalid(
            "volume_context.tls",
            format!("{other:?} must be true or false"),
        )),
    }
}

/// The Secret with the pool's own gluster certificate, when the context names one.
pub fn context_tls_secret(ctx: &HashMap<String, String>) -> Result<Option<String>, Status> {
    ctx.get(TLS_SECRET_KEY)
        .map(|s| {
            gk_api::names::secret_name(s)
                .map_err(|e| invalid(&format!("volume_context.{TLS_SECRET_KEY}"), e))
        })
        .transpose()
}

pub fn mount_source(ctx: &HashMap<String, String>) -> Result<MountSource, Status> {
    let mut keys: Vec<&String> = ctx.keys().collect();
    keys.sort();
    if let Some(k) = keys
        .into_iter()
        .find(|k| !k.contains('/') && !CONTEXT_KEYS.contains(&k.as_str()))
    {
        return Err(invalid(
            &format!("volume_context.{k}"),
            format!(
                "is not a key of this driver; known: {}",
                CONTEXT_KEYS.join(", ")
            ),
        ));
    }
    let get = |k: &str| {
        ctx.get(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| invalid(&format!("volume_context.{k}"), "is required"))
    };
    let source = MountSource {
        servers: get("servers")?.split(',').map(str::to_string).collect(),
        volume: get("glusterVolume")?.clone(),
        subdir: ctx.get("subdir").filter(|s| !s.is_empty()).cloned(),
    };
    // Checked here, so a static PV's mistakes are named before anything is mounted.
    source.spec().map_err(|e| match e {
        mount::MountError::Invalid { field, reason } => invalid(
            &format!(
                "volume_context.{}",
                match field {
                    "volume" => "glusterVolume",
                    other => other,
                }
            ),
            reason,
        ),
        other => Status::invalid_argument(other.to_string()),
    })?;
    Ok(source)
}

pub fn mount_flags(cap: Option<&csi::VolumeCapability>) -> Result<Vec<String>, Status> {
    let cap = cap.ok_or_else(|| invalid("volume_capability", "is required"))?;
    check_capability("volume_capability", cap)?;
    Ok(match &cap.access_type {
        Some(csi::volume_capability::AccessType::Mount(m)) => m.mount_flags.clone(),
        _ => Vec::new(),
    })
}

/// A path from a CSI request: absolute, without NUL and without `.` or `..` components, so a
/// request cannot aim a mount or an unmount outside the directory it names.
pub fn path_arg(field: &str, p: &str) -> Result<PathBuf, Status> {
    let path = PathBuf::from(p);
    let reason = if p.is_empty() || !path.is_absolute() {
        "must be an absolute path"
    } else if p.contains('\0') {
        "must not contain a NUL byte"
    } else if p.split('/').any(|w| w == "." || w == "..") {
        "must not contain . or .. components"
    } else {
        return Ok(path);
    };
    Err(invalid(field, format!("{p:?} {reason}")))
}

/// A volume path the kubelet asks about (stats, expansion): a published or staged volume of
/// this node. A path that is not one (relative, outside the kubelet's directories, or absent)
/// holds no volume here: NOT_FOUND, as the spec asks.
pub fn mounted_path(kubelet: &KubeletDirs, p: &str) -> Result<PathBuf, Status> {
    if p.is_empty() {
        return Err(invalid("volume_path", "is required"));
    }
    let path = kubelet
        .volume("volume_path", p)
        .map_err(|e| Status::not_found(e.message().to_string()))?;
    if !path.exists() {
        return Err(Status::not_found(format!(
            "{} does not exist on this node",
            path.display()
        )));
    }
    Ok(path)
}

/// The kubelet's directories, where alone the node plugin mounts: staging paths under
/// `plugins/`, publish targets under `pods/`. A request naming any other place (the
/// plugin's own `/etc`, say) is refused, so a caller of the socket cannot mount a volume over
/// the plugin or the host.
#[derive(Debug, Clone)]
pub struct KubeletDirs {
    pub root: PathBuf,
}

impl Default for KubeletDirs {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/var/lib/kubelet"),
        }
    }
}

impl KubeletDirs {
    /// A staging path: under the kubelet's plugins directory.
    pub fn staging(&self, field: &str, p: &str) -> Result<PathBuf, Status> {
        self.within(field, p, &["plugins"])
    }

    /// A publish target: under the kubelet's pods directory.
    pub fn target(&self, field: &str, p: &str) -> Result<PathBuf, Status> {
        self.within(field, p, &["pods"])
    }

    /// A volume path the kubelet asks about (stats, expansion): a target or a staging path.
    pub fn volume(&self, field: &str, p: &str) -> Result<PathBuf, Status> {
        self.within(field, p, &["pods", "plugins"])
    }

    fn within(&self, field: &str, p: &str, subdirs: &[&str]) -> Result<PathBuf, Status> {
        let path = path_arg(field, p)?;
        let bases: Vec<PathBuf> = subdirs.iter().map(|d| self.root.join(d)).collect();
        let outside = || {
            invalid(
                field,
                format!(
                    "{p:?} is outside the kubelet's {} directory; the node plugin mounts only \
                     there (set --kubelet-dir to the kubelet's --root-dir)",
                    bases
                        .iter()
                        .map(|b| b.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" and ")
                ),
            )
        };
        let Some(base) = bases.iter().find(|b| path.starts_with(b) && path != **b) else {
            return Err(outside());
        };
        // A symlink on the way may lead elsewhere: what exists of the path must resolve to
        // a place under the same base.
        let existing = path.ancestors().find(|a| a.exists()).unwrap_or(&path);
        match (existing.canonicalize(), base.canonicalize()) {
            (Ok(real), Ok(real_base)) if real.starts_with(&real_base) => Ok(path),
            (Ok(_), Ok(_)) => Err(outside()),
            // The base does not exist (yet): nothing on the way can be a symlink out of it.
            (_, Err(_)) if !base.exists() => Ok(path),
            (Err(e), _) | (_, Err(e)) => Err(Status::internal(format!(
                "resolving {}: {e}",
                existing.display()
            ))),
        }
    }
}

pub fn mount_err(e: mount::MountError) -> Status {
    match e {
        mount::MountError::Invalid { .. } => Status::invalid_argument(e.to_string()),
        other => Status::internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cap(mode: csi::volume_capability::access_mode::Mode) -> csi::VolumeCapability {
        csi::VolumeCapability {
            access_type: Some(csi::volume_capability::AccessType::Mount(Default::default())),
            access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
        }
    }

    #[test]
    fn a_profile_adds_mount_options_only_on_single_node_volumes() {
        use csi::volume_capability::access_mode::Mode;
        let key = crate::params::ObjectKey {
            namespace: "ns".into(),
            name: "pv".into(),
        };
        let servers = ["a".to_string()];
        let db = volume_context(
            &key,
            "v",
            &servers,
            "pv",
            true,
            None,
            Some(TuningProfile::Database),
        );
        assert_eq!(db["profile"], "Database");
        // The node plugin reads back every context the controller writes.
        let src = mount_source(&db).unwrap();
        assert_eq!(src.volume, "v");
        let rwo = profile_mount_flags(&db, &cap(Mode::SingleNodeWriter), &[]).unwrap();
        assert_eq!(rwo, ["kernel-writeback-cache=yes"]);
        let rwop = profile_mount_flags(&db, &cap(Mode::SingleNodeSingleWriter), &[]).unwrap();
        assert_eq!(rwop, rwo);
        // Shared volumes: another node would read what this node's kernel still holds.
        let rwx = profile_mount_flags(&db, &cap(Mode::MultiNodeMultiWriter), &[]).unwrap();
        assert!(rwx.is_empty(), "{rwx:?}");
        // The StorageClass's own choice wins.
        let given = ["kernel-writeback-cache=no".to_string()];
        let kept = profile_mount_flags(&db, &cap(Mode::SingleNodeWriter), &given).unwrap();
        assert!(kept.is_empty(), "{kept:?}");
        // Profiles without mount options, and contexts from before profiles were recorded.
        let tuned = volume_context(
            &key,
            "v",
            &servers,
            "pv",
            true,
            None,
            Some(TuningProfile::Tuned),
        );
        assert!(
            profile_mount_flags(&tuned, &cap(Mode::SingleNodeWriter), &[])
                .unwrap()
                .is_empty()
        );
        let old = volume_context(&key, "v", &servers, "pv", true, None, None);
        assert!(!old.contains_key("profile"));
        assert!(profile_mount_flags(&old, &cap(Mode::SingleNodeWriter), &[])
            .unwrap()
            .is_empty());
        let mut bad = db.clone();
        bad.insert("profile".into(), "Fast".into());
        let e = profile_mount_flags(&bad, &cap(Mode::SingleNodeWriter), &[]).unwrap_err();
        assert!(e.message().contains("volume_context.profile"), "{e:?}");
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        #[test]
        fn request_paths_found_by_the_property_are_refused() {
            // Accepted before path_arg checked NUL and `..` (the first was proptest's minimal
            // failing input).
            for p in ["//\0", "/var/lib/kubelet/../../etc", "/a/./b"] {
                let e = path_arg("target_path", p).unwrap_err();
                assert!(e.message().contains("target_path"), "{p:?}: {e:?}");
            }
            assert!(path_arg("target_path", "/var/lib/kubelet/pods/x/volumes/y").is_ok());
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4096))]

            /// A staging or target path from a CSI request is used only if it is absolute,
            /// has no `.` or `..` component and no NUL: a caller cannot point a mount at
            /// `/var/lib/kubelet/../../etc`.
            #[test]
            fn request_paths_cannot_traverse(
                p in "(/|\\.\\.|\\.|[a-z]{1,5}|\\x00|//){0,12}|.{0,40}"
            ) {
                if let Ok(path) = path_arg("target_path", &p) {
                    prop_assert!(path.is_absolute());
                    prop_assert!(!p.contains('\0'));
                    prop_assert!(path.components().all(|c| matches!(
                        c,
                        std::path::Component::RootDir | std::path::Component::Normal(_)
                    )), "{p:?}");
                    prop_assert!(!p.split('/').any(|w| w == ".."), "{p:?}");
                }
            }
        }
    }

    #[test]
    fn mounts_go_only_under_the_kubelets_directories() {
        let root = tempfile::tempdir().unwrap();
        let k = KubeletDirs {
            root: root.path().to_path_buf(),
        };
        let under = |d: &str| root.path().join(d).display().to_string();
        std::fs::create_dir_all(root.path().join("pods/uid/volumes")).unwrap();
        std::fs::create_dir_all(root.path().join("plugins/kubernetes.io/csi")).unwrap();
        assert!(k
            .target("target_path", &under("pods/uid/volumes/pv/mount"))
            .is_ok());
        assert!(k
            .staging(
                "staging_target_path",
                &under("plugins/kubernetes.io/csi/x/globalmount")
            )
            .is_ok());
        for (field, bad) in [
            ("target_path", "/etc".to_string()),
            ("target_path", under("pods")),
            ("target_path", under("plugins/kubernetes.io/csi/x")),
            ("staging_target_path", under("pods/uid/volumes/pv")),
            (
                "staging_target_path",
                "/var/lib/kubelet2/plugins/x".to_string(),
            ),
        ] {
            let e = if field == "target_path" {
                k.target(field, &bad)
            } else {
                k.staging(field, &bad)
            }
            .unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad}");
            assert!(
                e.message().contains(field) && e.message().contains("outside"),
                "{e:?}"
            );
        }
        // A symlink inside the pods directory that leads out of it.
        std::os::unix::fs::symlink("/etc", root.path().join("pods/uid/escape")).unwrap();
        let e = k
            .target("target_path", &under("pods/uid/escape/mount"))
            .unwrap_err();
        assert!(e.message().contains("outside"), "{e:?}");
        assert!(k
            .volume("volume_path", &under("plugins/kubernetes.io/csi/x"))
            .is_ok());
    }

    #[test]
    fn sizes() {
        assert_eq!(required_bytes(None).unwrap(), DEFAULT_SIZE);
        let r = |req, lim| {
            required_bytes(Some(&csi::CapacityRange {
                required_bytes: req,
                limit_bytes: lim,
            }))
        };
        assert_eq!(r(5, 0).unwrap(), 5);
        assert_eq!(r(0, 1 << 20).unwrap(), 1 << 20);
        assert_eq!(r(10, 5).unwrap_err().code(), tonic::Code::OutOfRange);
        assert_eq!(r(-1, 0).unwrap_err().code(), tonic::Code::InvalidArgument);
    }

    #[test]
    fn capabilities() {
        let cap = |access, mode: Mode| csi::VolumeCapability {
            access_type: access,
            access_mode: Some(csi::volume_capability::AccessMode { mode: mode as i32 }),
        };
        let mount = Some(csi::volume_capability::AccessType::Mount(Default::default()));
        let block = Some(csi::volume_capability::AccessType::Block(Default::default()));
        check_capabilities(&[cap(mount.clone(), Mode::MultiNodeMultiWriter)]).unwrap();
        assert!(check_capabilities(&[cap(block, Mode::SingleNodeWriter)])
            .unwrap_err()
            .message()
            .contains("block"));
        assert!(check_capabilities(&[cap(mount, Mode::Unknown)]).is_err());
        assert!(check_capabilities(&[]).is_err());
    }

    #[test]
    fn mount_capabilities_are_checked_flag_by_flag() {
        let with = |m: csi::volume_capability::MountVolume| {
            check_capabilities(&[csi::VolumeCapability {
                access_type: Some(csi::volume_capability::AccessType::Mount(m)),
                access_mode: Some(csi::volume_capability::AccessMode {
                    mode: Mode::MultiNodeMultiWriter as i32,
                }),
            }])
        };
        let flags = |f: &[&str]| csi::volume_capability::MountVolume {
            mount_flags: f.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        for good in [
            &[][..],
            &["ro"],
            &["ro", "ro"],
            &["acl", "log-level=WARNING", "kernel-writeback-cache=yes"],
        ] {
            with(flags(good)).unwrap();
        }
        // Each refused at once, naming the flag and where it stands.
        for (bad, at) in [
            (&["ro,remount,exec"][..], 0),
            (&["--volfile-server=1.2.3.4"], 0),
            (&["acl", "noatime"], 1),
            (&["log-level=WARNING", "volfile-server=x"], 1),
            (&["ro", "rw"], 1),
            (&["log-level=INFO", "log-level=DEBUG"], 1),
            (&["log-level=a b"], 0),
            (&[""], 0),
        ] {
            let e = with(flags(bad)).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{bad:?}");
            let m = e.message();
            assert!(
                m.contains(&format!("volume_capabilities[0].mount.mount_flags[{at}]"))
                    && m.contains(bad[at]),
                "{bad:?}: {m}"
            );
        }
        for fs in ["", "glusterfs", "fuse.glusterfs"] {
            with(csi::volume_capability::MountVolume {
                fs_type: fs.into(),
                ..Default::default()
            })
            .unwrap();
        }
        let e = with(csi::volume_capability::MountVolume {
            fs_type: "ext4".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.message().contains("mount.fs_type"), "{}", e.message());
        let e = with(csi::volume_capability::MountVolume {
            volume_mount_group: "1000".into(),
            ..Default::default()
        })
        .unwrap_err();
        assert!(
            e.message().contains("volume_mount_group"),
            "{}",
            e.message()
        );
    }
}
