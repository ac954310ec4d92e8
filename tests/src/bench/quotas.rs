//! The quota bench's results and tables: a subdirectory PV's small-file and write rates on
//! three replica-3 volumes side by side in one run, with no quota, with gluster's quota as
//! the product sets it, and with the bricks' XFS project quotas as the agent sets them. It
//! runs in the VM of `tests/env/quota-vm.sh` (`GK_VM_MODE=bench`), since this machine's
//! kernel has no XFS quota support: Debian's 6.1 kernel under QEMU's software emulation.

use serde::{Deserialize, Serialize};

use super::{fmt, median, overlap, range, RunInfo};

/// The cases, in the order of the tables: the reference first.
pub const CASES: [&str; 3] = ["none", "gluster", "project"];
/// The rows, in the order of the tables.
pub const ROWS: [&str; 5] = ["create", "stat", "unlink", "write4k", "write1m"];

/// One measurement in the VM.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    pub rep: u32,
    pub case: String,
    pub row: String,
    pub value: f64,
    pub unit: String,
    /// The VM's 1-minute load average when it was taken.
    pub load1: f64,
}

/// What the VM reports (`bench.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VmResults {
    pub files: u32,
    pub reps: u32,
    pub kernel: String,
    pub glusterfs: String,
    pub vm_cpus: u32,
    pub samples: Vec<Sample>,
}

/// A run: the host's conditions and the VM's samples.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub run: RunInfo,
    /// The host's 1-, 5- and 15-minute load averages before the VM started and after it
    /// stopped.
    pub host_load_before: [f64; 3],
    pub host_load_after: [f64; 3],
    /// Whether the bench was told to run on a busy machine.
    pub any_load: bool,
    pub vm: VmResults,
}

fn values(r: &VmResults, row: &str, case: &str) -> Vec<f64> {
    r.samples
        .iter()
        .filter(|s| s.row == row && s.case == case)
        .map(|s| s.value)
        .collect()
}

fn what(row: &str) -> &'static str {
    match row {
        "create" => "create 4 KiB files",
        "stat" => "stat them",
        "unlink" => "unlink them",
        "write4k" => "4 KiB writes, fsync each",
        "write1m" => "1 MiB writes, fsync each",
        _ => "?",
    }
}

/// The generated block of `docs/benchmarks/quotas-vm.md`.
pub fn render(r: &Results) -> String {
    let vm = &r.vm;
    let loads: Vec<f64> = vm.samples.iter().map(|s| s.load1).collect();
    let (lo, hi) = range(&loads);
    let mut out = format!(
        "Commit {}, {} UTC, `{}`. Host: {} cores, 1-minute load {} before and {} after the VM{}. \
         VM: kernel {}, {}, {} vCPUs under QEMU's software emulation, load {}–{} over the \
         samples. {} files per small-file row, {} repetitions, the cases' order rotated each \
         repetition.\n\n",
        r.run.commit,
        r.run.started,
        r.run.command,
        r.run.cores,
        fmt(r.host_load_before[0]),
        fmt(r.host_load_after[0]),
        if r.any_load {
            " (run on a busy host: GK_BENCH_ANY_LOAD=1)"
        } else {
            ""
        },
        vm.kernel,
        vm.glusterfs,
        vm.vm_cpus,
        fmt(lo),
        fmt(hi),
        vm.files,
        vm.reps,
    );
    out.push_str(
        "| row | unit | none | gluster's quota | project quota | gluster ÷ none | project ÷ none |\n\
         |---|---|---:|---:|---:|---:|---:|\n",
    );
    let mut overlapping = Vec::new();
    for row in ROWS {
        let v: Vec<Vec<f64>> = CASES.iter().map(|c| values(vm, row, c)).collect();
        if v.iter().all(Vec::is_empty) {
            continue;
        }
        let unit = vm
            .samples
            .iter()
            .find(|s| s.row == row)
            .map(|s| s.unit.as_str())
            .unwrap_or("");
        let cell = |x: &[f64]| {
            let (a, b) = range(x);
            format!("{} ({}–{})", fmt(median(x)), fmt(a), fmt(b))
        };
        let ratio = |x: &[f64]| fmt(median(x) / median(&v[0]));
        out.push_str(&format!(
            "| {} | {unit} | {} | {} | {} | {} | {} |\n",
            what(row),
            cell(&v[0]),
            cell(&v[1]),
            cell(&v[2]),
            ratio(&v[1]),
            ratio(&v[2]),
        ));
        for (i, case) in CASES.iter().enumerate().skip(1) {
            if overlap(&v[0], &v[i]) {
                overlapping.push(format!("{} ({case})", what(row)));
            }
        }
    }
    out.push_str(
        "\nEach cell: the median (the range over repetitions). Ratios are of medians, \
         measured side by side in the one run.",
    );
    if overlapping.is_empty() {
        out.push_str(" No case's range overlaps the no-quota range.\n");
    } else {
        out.push_str(&format!(
            " Ranges overlapping the no-quota range, so within this run's noise: {}.\n",
            overlapping.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results() -> Results {
        let mut samples = Vec::new();
        for rep in 0..2 {
            for (case, f) in [("none", 1.0), ("gluster", 0.5), ("project", 0.97)] {
                for row in ROWS {
                    samples.push(Sample {
                        rep,
                        case: case.into(),
                        row: row.into(),
                        value: 100.0 * f + rep as f64,
                        unit: if row.starts_with("write") {
                            "MB/s"
                        } else {
                            "ops/s"
                        }
                        .into(),
                        load1: 1.5,
                    });
                }
            }
        }
        Results {
            run: RunInfo {
                commit: "abc1234".into(),
                started: "2026-12-07 04:00".into(),
                cores: 2,
                glusterfs: "10.3".into(),
                command: "cargo bench -p gk-testenv --bench quota_vm".into(),
            },
            host_load_before: [0.5, 0.4, 0.3],
            host_load_after: [1.9, 1.0, 0.5],
            any_load: false,
            vm: VmResults {
                files: 300,
                reps: 2,
                kernel: "6.1.0-57-amd64".into(),
                glusterfs: "glusterfs 10.3".into(),
                vm_cpus: 2,
                samples,
            },
        }
    }

    #[test]
    fn ratios_are_of_medians_and_overlaps_are_named() {
        let text = render(&results());
        // none: 100, 101 (median 100.5); gluster 50, 51; project 97, 98.
        assert!(
            text.contains("| create 4 KiB files | ops/s | 100 (100–101) | 50.5 (50.0–51.0) | 97.5 (97.0–98.0) | 0.50 | 0.97 |"),
            "{text}"
        );
        assert!(text.contains("No case's range overlaps"), "{text}");
        assert!(text.contains("load 1.50–1.50"), "{text}");
    }

    #[test]
    fn a_round_trip_renders_the_same() {
        let r = results();
        let json = serde_json::to_string(&r).unwrap();
        let back: Results = serde_json::from_str(&json).unwrap();
        assert_eq!(render(&back), render(&r));
    }
}
