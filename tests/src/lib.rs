//! Test support: starts or reuses the real parts the integration tests run against.
//!
//! - [`k8s::ControlPlane`]: etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
//!   built from source by `tests/env/k8s.sh` and listening on 127.0.0.1 only.
//! - [`gluster_net::GlusterNet`]: glusterd "nodes", each in a network namespace of its own
//!   with its own address, XFS brick filesystem and glusterd state, plus a client namespace
//!   for FUSE mounts. Torn down on drop, also when a test panics.
//!
//! A missing component is an error, never a skip.

pub mod agents;
pub mod bench;
pub mod demo;
pub mod deploy;
pub mod gluster_net;
pub mod k8s;
pub mod krew;
pub mod kubelet;
pub mod roles;

use std::path::PathBuf;
use std::process::{Command, Output};

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("`{command}` failed: {detail}")]
    Command { command: String, detail: String },
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// A gRPC channel to a unix socket (a CSI plugin's), as the kubelet and the sidecars reach it.
pub async fn unix_channel(
    socket: &std::path::Path,
) -> Result<tonic::transport::Channel, tonic::transport::Error> {
    let socket = socket.to_path_buf();
    tonic::transport::Endpoint::from_static("http://[::]:50051")
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
}

/// Deterministic pseudo-random test data (xorshift): neither compressible nor uniform, and
/// the same for the same seed, so checksums can be compared across mounts and bricks.
pub fn test_data(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Writes `block` `times` times to a new file `path` below `mountpoint` and syncs it, in a
/// thread of its own, and returns what that returned. A writer not done within `limit` is
/// hung in the gluster client serving `mountpoint`: the client is killed (so the writer and
/// the test can end) and this panics saying `what` hung.
pub fn write_guarded(
    mountpoint: &std::path::Path,
    path: std::path::PathBuf,
    block: Vec<u8>,
    times: usize,
    limit: std::time::Duration,
    what: &str,
) -> std::io::Result<()> {
    use std::io::Write;
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = std::fs::File::create(&path).and_then(|mut f| {
            for _ in 0..times {
                f.write_all(&block)?;
            }
            f.sync_all()
        });
        let _ = done.send(result);
    });
    outcome.recv_timeout(limit).unwrap_or_else(|_| {
        kill_fuse_client(mountpoint);
        panic!("{what} hung for {limit:?}")
    })
}

/// Kills the gluster FUSE client serving `mountpoint` (as a dying plugin container would
/// take it down) and waits until the mount answers ENOTCONN. Panics if either fails.
pub fn kill_fuse_client(mountpoint: &std::path::Path) {
    let pid = gk_mount::fuse_client_pid(mountpoint)
        .unwrap_or_else(|| panic!("no gluster client serves {}", mountpoint.display()));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("killing the gluster client");
    for _ in 0..200 {
        if nix::sys::statvfs::statvfs(mountpoint) == Err(nix::Error::ENOTCONN) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!(
        "{} did not break after its client was killed",
        mountpoint.display()
    );
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Runs a command to completion and fails unless it exits 0.
pub(crate) fn run(program: &str, args: &[&str]) -> Result<Output, EnvError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| EnvError::Command {
            command: format!("{program} {}", args.join(" ")),
            detail: format!("{e}; is it installed? run tests/env/install-tools.sh"),
        })?;
    if !out.status.success() {
        return Err(EnvError::Command {
            command: format!("{program} {}", args.join(" ")),
            detail: format!(
                "{}: {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        });
    }
    Ok(out)
}

/// Every regular file under `root` with its SHA-256, and every symlink with its target, as
/// `(sum or path, path or target)` pairs in a stable order: two trees compare equal when
/// their files and links do.
pub fn tree_sums(root: &std::path::Path) -> Vec<(String, String)> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("find . -type f -exec sha256sum {} + | sort -k2; find . -type l -printf '%p -> %l\\n' | sort")
        .current_dir(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.to_string(), b.trim().to_string())
        })
        .collect()
}
