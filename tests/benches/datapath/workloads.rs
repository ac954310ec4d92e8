//! The seeds' workloads, each on the calling thread against one directory.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

pub const MIB: usize = 1 << 20;

/// Seed 002's dd ladder: (row id, block size).
pub const DD_BLOCKS: [(&str, usize); 6] = [
    ("dd-100B", 100),
    ("dd-1KiB", 1024),
    ("dd-10KiB", 10 * 1024),
    ("dd-100KiB", 100 * 1024),
    ("dd-1MiB", MIB),
    ("dd-100MiB", 100 * MIB),
];

pub const FIO_JOBS: usize = 4;
pub const FIO_MIB_PER_JOB: usize = 64;
pub const SMALL_FILES: usize = 1000;

/// dd-style: `bs`-sized writes into one new file until `budget` has passed or `cap` bytes are
/// written, then fsync (like `conv=fsync`, so the raw filesystem is not measured at page-cache
/// speed). Returns MB/s over the whole time including the fsync, and the MB written.
pub fn dd(dir: &Path, bs: usize, budget: Duration, cap: usize) -> (f64, f64) {
    let path = dir.join("dd.bin");
    let buf = gk_testenv::test_data(bs as u64, bs);
    let mut f = File::create(&path).expect("dd file");
    let t = Instant::now();
    let mut written = 0usize;
    loop {
        f.write_all(&buf).expect("dd write");
        written += bs;
        if written + bs > cap || t.elapsed() >= budget {
            break;
        }
    }
    f.sync_all().expect("dd fsync");
    drop(f);
    let secs = t.elapsed().as_secs_f64();
    std::fs::remove_file(&path).expect("dd cleanup");
    (written as f64 / secs / 1e6, written as f64 / 1e6)
}

/// Seed 001: 100 files of 1 MiB written one after the other, each fsynced and closed; left
/// in place for `files_1m_cleanup`.
/// Returns files per second.
pub fn files_1m(dir: &Path) -> f64 {
    let sub = dir.join("seed001");
    std::fs::create_dir_all(&sub).expect("seed001 dir");
    let buf = gk_testenv::test_data(1, MIB);
    let t = Instant::now();
    for i in 0..100 {
        let mut f = File::create(sub.join(format!("f{i}"))).expect("create");
        f.write_all(&buf).expect("write");
        f.sync_all().expect("fsync");
    }
    100.0 / t.elapsed().as_secs_f64()
}

/// Removes what `files_1m` wrote (untimed, and after a profile of its calls is read).
pub fn files_1m_cleanup(dir: &Path) {
    std::fs::remove_dir_all(dir.join("seed001")).expect("seed001 cleanup");
}

/// Megabytes one phase of seed 000's fio run moves.
pub const FIO_MB: f64 = (FIO_JOBS * FIO_MIB_PER_JOB * MIB) as f64 / 1e6;

/// Seed 000, IOR-style with fio: FIO_JOBS processes each write their own file in this
/// directory with 1 MiB transfers (fsync at the end), then read them back; remove it after.
pub fn fio_dir(dir: &Path) -> PathBuf {
    let sub = dir.join("ior");
    std::fs::create_dir_all(&sub).expect("ior dir");
    sub
}

/// One phase (`write`, then `read`) in `fio_dir`'s directory. Returns MB/s aggregate.
pub fn fio_phase(sub: &Path, rw: &str) -> f64 {
    let out = Command::new("fio")
        .args([
            "--name=ior",
            &format!("--directory={}", sub.display()),
            &format!("--rw={rw}"),
            "--bs=1M",
            &format!("--size={FIO_MIB_PER_JOB}M"),
            &format!("--numjobs={FIO_JOBS}"),
            "--ioengine=psync",
            "--fallocate=none",
            "--end_fsync=1",
            // Drop the files' cached pages before reading, so reads reach the filesystem.
            "--invalidate=1",
            "--group_reporting",
            "--output-format=json",
        ])
        .output()
        .expect("fio runs (tests/env/install-tools.sh installs it)");
    assert!(
        out.status.success(),
        "fio {rw} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("fio json");
    let phase = if rw == "write" { "write" } else { "read" };
    let bw = v["jobs"][0][phase]["bw_bytes"]
        .as_f64()
        .expect("fio bw_bytes");
    assert!(bw > 0.0, "fio {rw} reported no bandwidth");
    bw / 1e6
}

/// Seed 004, bonnie-style: create SMALL_FILES files of 4 KiB in one directory, stat them
/// all, delete them all. Returns files per second for each phase.
pub fn small_files(dir: &Path) -> (f64, f64, f64) {
    let sub = dir.join("small");
    std::fs::create_dir_all(&sub).expect("small dir");
    let buf = gk_testenv::test_data(4, 4096);
    let names: Vec<PathBuf> = (0..SMALL_FILES)
        .map(|i| sub.join(format!("s{i:05}")))
        .collect();
    let t = Instant::now();
    for n in &names {
        File::create(n)
            .and_then(|mut f| f.write_all(&buf))
            .expect("small create");
    }
    let create = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        let m = std::fs::metadata(n).expect("small stat");
        assert_eq!(m.len(), 4096);
    }
    let stat = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for n in &names {
        std::fs::remove_file(n).expect("small delete");
    }
    let delete = SMALL_FILES as f64 / t.elapsed().as_secs_f64();
    std::fs::remove_dir(&sub).expect("small cleanup");
    (create, stat, delete)
}
