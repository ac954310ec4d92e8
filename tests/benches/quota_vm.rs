//! The quota bench: a subdirectory PV's small-file and write rates with no quota, gluster's
//! quota and the bricks' project quotas, side by side in one run, on Debian's 6.1 kernel in
//! the VM of `tests/env/quota-vm.sh` (this machine's kernel has no XFS quota support).
//! Writes `docs/benchmarks/quotas-vm.{json,md}` (or under `GK_BENCH_OUT`).
//!
//! `cargo build -p gk-agent && cargo bench -p gk-testenv --bench quota_vm -- [FILES] [REPS]`
//! as root, on a quiet machine.

use std::process::Command;
use std::time::Duration;

use gk_testenv::bench::{self, quotas};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let files: u32 = args.first().map_or(300, |a| a.parse().expect("FILES"));
    let reps: u32 = args.get(1).map_or(3, |a| a.parse().expect("REPS"));
    let quiet = bench::require_quiet(Duration::from_secs(600));
    let command = format!("cargo bench -p gk-testenv --bench quota_vm -- {files} {reps}");
    let run = bench::RunInfo::now(&command);
    let before = bench::load_average();
    let root = gk_testenv::repo_root();
    let status = Command::new("bash")
        .arg(root.join("tests/env/quota-vm.sh"))
        .env("GK_VM_MODE", "bench")
        .env("GK_VM_BENCH_FILES", files.to_string())
        .env("GK_VM_BENCH_REPS", reps.to_string())
        .status()
        .expect("running tests/env/quota-vm.sh");
    let after = bench::load_average();
    assert!(status.success(), "the bench VM failed: {status}");
    let cache = std::env::var("GK_CACHE").unwrap_or_else(|_| "/var/cache/glusterkube".into());
    let path = std::path::Path::new(&cache).join("vm/runs/last/results/bench.json");
    let vm: quotas::VmResults = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap_or_else(|e| panic!("{} is not the VM's bench results: {e}", path.display()));
    assert_eq!(
        vm.samples.len(),
        quotas::CASES.len() * quotas::ROWS.len() * vm.reps as usize,
        "the VM measured every case and row in every repetition"
    );
    let results = quotas::Results {
        run,
        host_load_before: before,
        host_load_after: after,
        any_load: !quiet,
        vm,
    };
    let block = quotas::render(&results);
    bench::write_results(
        &bench::out_dir(),
        "quotas-vm",
        &serde_json::to_value(&results).expect("results serialise"),
        &block,
    )
    .expect("writing docs/benchmarks/quotas-vm");
    println!("{block}");
}
