//! Snapshot and clone benchmark, as the product ships: `demo.sh` on three real kubelets (the
//! chart's defaults, gluster TLS on; each node's brick directories on an XFS of its own, as
//! tests/env/node.sh makes them), a subdirectory PVC holding FILES files of about MIB MiB in
//! all, then a VolumeSnapshot of it, a PVC restored from that, and a PVC cloned from the
//! source, each timed from the API. Space is what each step adds to the used blocks of the
//! three brick filesystems (reflinked blocks count once). Beside them, on a loop-mounted XFS
//! made like the operator's bricks, the same tree copied with `cp --reflink=always` and with
//! a plain copy, with no gluster between. A FICLONE through the PVC's FUSE mount is tried and
//! its answer recorded.
//!
//!   bash tests/env/images.sh build
//!   GK_IMAGES_BUILT=1 cargo bench --profile dev -p gk-testenv --bench snapshots -- [FILES] [MIB]
//!
//! The dev profile is enough: the copies are made by the brick agents (coreutils' cp and
//! the gfid pass) and this program only asks the API and waits.
//!
//! Writes docs/benchmarks/snapshots.md. Needs root; leaves no demo and no nodes behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gk_testenv::demo::{self, until, Demo, NS, STORAGE_CLASS};
use gk_testenv::repo_root;

const NODE_DATA: &str = "/var/lib/glusterkube-node";

fn sh(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .current_dir(repo_root())
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// How long a copy of `files` files may take: seen here at about 7 files/s through gluster
/// at load 11 to 15 (a clone of 10,000 files outlasted a fixed 30 minutes).
fn copy_limit(files: usize) -> Duration {
    Duration::from_secs((files as u64 / 2).max(1800))
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("?")
        .to_string()
}

/// Runs `script` in a workload pod with `claim` at /data until it ends; its log.
fn run_pod(k: &Demo, name: &str, claim: &str, script: &str) -> String {
    k.apply(&demo::workload_pod(name, &[(claim, "/data")], script));
    // 10,000 files took 19 minutes to write here at load 11 to 15.
    let phase = until(
        &format!("{name} ended"),
        Duration::from_secs(5400),
        Duration::from_secs(1),
        || {
            let phase = k.get("pod", name, "{.status.phase}");
            (phase == "Succeeded" || phase == "Failed").then_some(phase)
        },
    );
    let log = k.kubectl(&["-n", NS, "logs", name]);
    assert_eq!(phase, "Succeeded", "{name}: {log}");
    k.kubectl(&["-n", NS, "delete", "pod", name, "--wait=true"]);
    log
}

/// A claim of the demo's subdirectory class, made from `source` (a dataSource line) if any.
fn claim(k: &Demo, name: &str, size: &str, source: &str) {
    let mut yaml = demo::rwx_claim(name, STORAGE_CLASS, size);
    yaml.push_str(source);
    k.apply(&yaml);
}

/// Bytes used on the filesystems holding `bricks` (each node's own XFS), after a sync:
/// blocks shared by reflinks count once, as the disk holds them (`du` would count them in
/// every file).
fn brick_bytes(bricks: &[PathBuf]) -> u64 {
    sh("sync", &[]);
    bricks
        .iter()
        .map(|b| {
            let st = nix::sys::statvfs::statvfs(b).unwrap();
            (st.blocks() - st.blocks_free()) * st.fragment_size()
        })
        .sum()
}

/// The three nodes' brick filesystems (tests/env/node.sh gives each its own XFS).
fn brick_filesystems() -> Vec<PathBuf> {
    (1..=3)
        .map(|n| {
            let fs = Path::new(NODE_DATA).join(format!("gk-node-{n}/bricks"));
            let st = nix::sys::statvfs::statvfs(&fs).unwrap();
            let root = nix::sys::statvfs::statvfs(NODE_DATA).unwrap();
            assert_ne!(
                st.filesystem_id(),
                root.filesystem_id(),
                "{} is not a filesystem of its own: run tests/env/node.sh start",
                fs.display()
            );
            fs
        })
        .collect()
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Used bytes of the filesystem at `dir`, after a sync.
fn fs_used(dir: &Path) -> u64 {
    sh("sync", &[]);
    let st = nix::sys::statvfs::statvfs(dir).unwrap();
    (st.blocks() - st.blocks_free()) * st.fragment_size()
}

/// The same tree on a loop XFS made as the operator makes bricks (reflink is on by default
/// in the xfsprogs of the brick image), copied with and without a reflink.
fn local_reference(files: usize, file_kib: usize) -> Vec<(String, Duration, u64)> {
    let root = std::env::temp_dir().join(format!("gk-bench-xfs-{}", std::process::id()));
    let img = root.with_extension("img");
    std::fs::create_dir_all(&root).unwrap();
    sh("truncate", &["-s", "8G", img.to_str().unwrap()]);
    sh(
        "mkfs.xfs",
        &["-q", "-f", "-i", "size=512", img.to_str().unwrap()],
    );
    sh(
        "mount",
        &["-o", "loop", img.to_str().unwrap(), root.to_str().unwrap()],
    );
    let script = format!(
        "cd {r} && mkdir src && for i in $(seq 1 {files}); do d=src/d$((i % 100)); mkdir -p $d; \
         head -c {b} /dev/urandom > $d/f$i; done",
        r = root.display(),
        b = file_kib * 1024
    );
    sh("sh", &["-c", &script]);
    let mut out = Vec::new();
    for (label, flag, dst) in [
        ("cp --reflink=always", "--reflink=always", "reflink"),
        (
            "plain copy (cp --reflink=never)",
            "--reflink=never",
            "plain",
        ),
    ] {
        let before = fs_used(&root);
        let start = Instant::now();
        sh(
            "cp",
            &[
                "-dR",
                "--preserve=mode,ownership,timestamps",
                flag,
                root.join("src").to_str().unwrap(),
                root.join(dst).to_str().unwrap(),
            ],
        );
        sh("sync", &[]);
        let took = start.elapsed();
        out.push((
            label.to_string(),
            took,
            fs_used(&root).saturating_sub(before),
        ));
    }
    sh("umount", &[root.to_str().unwrap()]);
    let _ = std::fs::remove_file(&img);
    let _ = std::fs::remove_dir(&root);
    out
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let files = args.first().copied().unwrap_or(10_000);
    let mib = args.get(1).copied().unwrap_or(1024);
    let file_kib = mib * 1024 / files;
    let commit = sh("git", &["rev-parse", "--short", "HEAD"])
        .trim()
        .to_string();
    let dirty = !sh("git", &["status", "--porcelain", "--untracked-files=no"])
        .trim()
        .is_empty();

    let k = Demo::up(&[]);
    let mut rows: Vec<[String; 4]> = Vec::new();

    claim(&k, "bench-src", "2Gi", "");
    let bricks = brick_filesystems();
    let empty = brick_bytes(&bricks);
    k.wait(
        "pvc",
        "bench-src",
        "{.status.phase}",
        "Bound",
        Duration::from_secs(300),
    );
    let l0 = load();
    let log = run_pod(
        &k,
        "bench-writer",
        "bench-src",
        &format!(
            "set -e\nstart=$(date +%s%N)\nfor i in $(seq 1 {files}); do d=/data/d$((i % 100)); \
             mkdir -p $d; head -c {b} /dev/urandom > $d/f$i; done\nsync\n\
             echo write $(( ($(date +%s%N) - start) / 1000000 ))\n\
             cp --reflink=always /data/d1/f1 /data/reflink-probe 2>&1 || true\nrm -f /data/reflink-probe",
            b = file_kib * 1024
        ),
    );
    let write_ms: u64 = log
        .lines()
        .find_map(|l| l.strip_prefix("write "))
        .and_then(|n| n.trim().parse().ok())
        .expect("the writer's time");
    let probe = log
        .lines()
        .find(|l| l.contains("reflink-probe") || l.contains("cp:"))
        .unwrap_or("(cp --reflink=always succeeded)")
        .to_string();
    let src_bytes = brick_bytes(&bricks).saturating_sub(empty);
    rows.push([
        format!("write {files} files of {file_kib} KiB in the pod (FUSE, TLS)"),
        secs(Duration::from_millis(write_ms)),
        gib(src_bytes),
        l0,
    ]);

    let l = load();
    let before = brick_bytes(&bricks);
    k.apply(&format!(
        r#"apiVersion: snapshot.storage.k8s.io/v1
kind: VolumeSnapshot
metadata: {{name: bench-snap, namespace: {NS}}}
spec:
  volumeSnapshotClassName: glusterkube
  source: {{persistentVolumeClaimName: bench-src}}
"#
    ));
    let took = k.wait(
        "volumesnapshot",
        "bench-snap",
        "{.status.readyToUse}",
        "true",
        copy_limit(files),
    );
    rows.push([
        "VolumeSnapshot until readyToUse".into(),
        secs(took),
        gib(brick_bytes(&bricks).saturating_sub(before)),
        l,
    ]);

    let l = load();
    let before = brick_bytes(&bricks);
    claim(
        &k,
        "bench-restored",
        "2Gi",
        "  dataSource: {apiGroup: snapshot.storage.k8s.io, kind: VolumeSnapshot, name: bench-snap}\n",
    );
    let took = k.wait(
        "pvc",
        "bench-restored",
        "{.status.phase}",
        "Bound",
        copy_limit(files),
    );
    rows.push([
        "PVC from the snapshot until Bound".into(),
        secs(took),
        gib(brick_bytes(&bricks).saturating_sub(before)),
        l,
    ]);

    let l = load();
    let before = brick_bytes(&bricks);
    claim(
        &k,
        "bench-clone",
        "2Gi",
        "  dataSource: {kind: PersistentVolumeClaim, name: bench-src}\n",
    );
    let took = k.wait(
        "pvc",
        "bench-clone",
        "{.status.phase}",
        "Bound",
        copy_limit(files),
    );
    rows.push([
        "PVC cloned from the source until Bound".into(),
        secs(took),
        gib(brick_bytes(&bricks).saturating_sub(before)),
        l,
    ]);

    // The snapshot goes while the csi-snapshotter still runs to delete its copy.
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "pvc",
        "bench-restored",
        "bench-clone",
        "bench-src",
        "--wait=true",
    ]);
    k.kubectl(&[
        "-n",
        NS,
        "delete",
        "volumesnapshot",
        "bench-snap",
        "--wait=true",
    ]);
    Demo::clean();

    let l = load();
    let reference = local_reference(files, file_kib);

    let mut md = String::new();
    md.push_str("# Snapshot and clone benchmark\n\n");
    md.push_str(&format!(
        "Generated by `tests/benches/snapshots.rs` (`GK_IMAGES_BUILT=1 cargo bench --profile dev \
         -p gk-testenv --bench snapshots -- {files} {mib}`) at commit {commit}{}, on the \
         project's 2-core machine. All figures are from one run.\n\n",
        if dirty {
            " with uncommitted changes"
        } else {
            ""
        }
    ));
    md.push_str(
        "The product as it ships: `demo.sh` on three real kubelets, the chart's defaults, gluster \
         TLS on, a replica-3 pool on node-local directories, each node's on an XFS of its own \
         (`tests/env/node.sh`; reflink on, as `mkfs.xfs` makes it). Snapshots, restores and \
         clones are copied on the bricks by reflink while gluster's barrier holds \
         (`docs/snapshots.md`). Times are from the API (the object asked for, until ready or \
         Bound). Space is what each step adds to the used blocks of the three nodes' brick \
         filesystems together, after a sync: blocks a reflink shares count once.\n\n",
    );
    md.push_str(
        "| step | time | space on the bricks | load average (1 min) |\n|---|---:|---:|---:|\n",
    );
    for r in &rows {
        md.push_str(&format!("| {} | {} | {} | {} |\n", r[0], r[1], r[2], r[3]));
    }
    md.push_str(&format!(
        "\nA FICLONE through the PVC's FUSE mount (`cp --reflink=always` in the pod) answered: \
         `{}`\n\n",
        probe.trim()
    ));
    md.push_str(&format!(
        "For comparison, the same tree ({files} files of {file_kib} KiB) on one loop-mounted \
         XFS made as the bricks are (`mkfs.xfs -i size=512`), with no gluster between: what \
         a reflink saves where the filesystem can be reached directly. Load average before: \
         {l}.\n\n| copy | time | space used |\n|---|---:|---:|\n"
    ));
    for (label, took, bytes) in &reference {
        md.push_str(&format!(
            "| {label} | {} | {} |\n",
            secs(*took),
            gib(*bytes)
        ));
    }
    md.push_str(
        "\nThe ratio that matters is each copy's time against the write of the same data, \
         both measured above in one run.\n",
    );
    let out = repo_root().join("docs/benchmarks/snapshots.md");
    std::fs::write(&out, &md).unwrap();
    print!("{md}");
    eprintln!("wrote {}", out.display());
}
