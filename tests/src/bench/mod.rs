//! What every benchmark shares: the conditions of a run (commit, load average, storage),
//! the rule that a bench refuses a busy machine, statistics, and the generated blocks of the
//! committed documents.
//!
//! A bench measures and writes its samples as JSON; the tables in `docs/benchmarks/*.md` are
//! rendered from that JSON by the functions of this module's submodules, so the `bench_docs`
//! test can render the committed JSON again and fail when a committed table is stale.

pub mod client_crash;
pub mod cpu;
pub mod datapath;
pub mod footprint;
pub mod fops;
pub mod fuse_calls;
pub mod perf;
pub mod provisioning;
pub mod quotas;

use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Where a generated table begins and ends in a committed document.
pub const BEGIN: &str = "<!-- BEGIN GENERATED -->";
pub const END: &str = "<!-- END GENERATED -->";

/// Above this 1-minute load average a bench does not start (unless told to): on 2 cores a
/// build or another test running beside it would decide the figures.
pub const QUIET_LOAD: f64 = 1.0;

/// The 1-, 5- and 15-minute load averages.
pub fn load_average() -> [f64; 3] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut it = text
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
    [
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
        it.next().unwrap_or(f64::NAN),
    ]
}

/// What a run was measured on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunInfo {
    /// The commit measured (`git rev-parse --short HEAD`), with `+dirty` when the working
    /// tree had changes.
    pub commit: String,
    /// UTC, `YYYY-MM-DD HH:MM`.
    pub started: String,
    pub cores: usize,
    pub glusterfs: String,
    /// The command line, for the document.
    pub command: String,
}

impl RunInfo {
    pub fn now(command: &str) -> Self {
        Self {
            commit: commit(),
            started: utc_now(),
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            glusterfs: glusterfs_version(),
            command: command.to_string(),
        }
    }
}

fn commit() -> String {
    let root = crate::repo_root();
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{head}+dirty")
    } else {
        head
    }
}

/// `glusterfs --version`'s first line's version, or "unknown".
pub fn glusterfs_version() -> String {
    Command::new("glusterfs")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .map(str::to_string)
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The current time in UTC as `YYYY-MM-DD HH:MM` (from `date`, so no time crate is needed).
pub fn utc_now() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// Refuses to start while the machine is busy: panics (the bench fails) when the 1-minute
/// load average is above [`QUIET_LOAD`], unless `GK_BENCH_ANY_LOAD=1`, which the document
/// then records. Waits up to `patience` for the load to settle first.
pub fn require_quiet(patience: std::time::Duration) -> bool {
    if std::env::var("GK_BENCH_ANY_LOAD").as_deref() == Ok("1") {
        eprintln!(
            "GK_BENCH_ANY_LOAD=1: running at load {:?} without waiting for a quiet machine",
            load_average()
        );
        return false;
    }
    let deadline = std::time::Instant::now() + patience;
    loop {
        let load = load_average()[0];
        if load <= QUIET_LOAD {
            return true;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the 1-minute load average is {load:.2}, above {QUIET_LOAD}: something else is \
             running (a build, a test); a bench here would measure it. Wait for it, or set \
             GK_BENCH_ANY_LOAD=1 to run anyway (the document will say so)"
        );
        eprintln!("load average {load:.2} > {QUIET_LOAD}; waiting for a quiet machine");
        std::thread::sleep(std::time::Duration::from_secs(15));
    }
}

/// The filesystem type and device under `dir` (`stat -f` and `df`), for the document.
pub fn storage_of(dir: &Path) -> String {
    let fs = Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(dir)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let source = Command::new("df")
        .args(["--output=source"])
        .arg(dir)
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .nth(1)
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_default();
    format!("{fs} on {source}")
}

/// Samples grouped by the (row, case) `key` names, for tables that sum a row's repetitions.
pub fn by_row_case<'a, T>(
    samples: &'a [T],
    key: impl Fn(&'a T) -> (&'a str, &'a str),
) -> std::collections::BTreeMap<(&'a str, &'a str), Vec<&'a T>> {
    let mut groups = std::collections::BTreeMap::<_, Vec<&T>>::new();
    for s in samples {
        groups.entry(key(s)).or_default().push(s);
    }
    groups
}

pub fn median(v: &[f64]) -> f64 {
    percentile(v, 0.5)
}

/// The `p` quantile (0..=1) of `v` by linear interpolation between the nearest ranks; NaN
/// for an empty slice.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let pos = (s.len() - 1) as f64 * p.clamp(0.0, 1.0);
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (pos - lo as f64)
}

/// (min, max) of `v`.
pub fn range(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
            (lo.min(*x), hi.max(*x))
        })
}

/// Whether the ranges of two sample sets overlap: then a difference of their medians is
/// within the run's noise.
pub fn overlap(a: &[f64], b: &[f64]) -> bool {
    let (alo, ahi) = range(a);
    let (blo, bhi) = range(b);
    !a.is_empty() && !b.is_empty() && alo <= bhi && blo <= ahi
}

/// Three significant digits, or fewer decimals for large values.
pub fn fmt(v: f64) -> String {
    if !v.is_finite() {
        "–".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// `doc` with the text between [`BEGIN`] and [`END`] replaced by `block`.
pub fn replace_generated(doc: &str, block: &str) -> Result<String, String> {
    let start = doc
        .find(BEGIN)
        .ok_or_else(|| format!("no {BEGIN} line in the document"))?;
    let end = doc
        .find(END)
        .ok_or_else(|| format!("no {END} line in the document"))?;
    if end < start {
        return Err(format!("{END} comes before {BEGIN}"));
    }
    Ok(format!(
        "{}{BEGIN}\n{}{}",
        &doc[..start],
        block,
        &doc[end..]
    ))
}

/// The generated block of `doc`, as [`replace_generated`] writes it.
pub fn generated(doc: &str) -> Option<&str> {
    let start = doc.find(BEGIN)? + BEGIN.len() + 1;
    let end = doc.find(END)?;
    doc.get(start..end)
}

/// Writes `value` as pretty JSON to `dir/name.json` and the rendered `block` into the
/// generated part of `dir/name.md`.
pub fn write_results(
    dir: &Path,
    name: &str,
    value: &serde_json::Value,
    block: &str,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let json = serde_json::to_string_pretty(value).expect("results serialise") + "\n";
    std::fs::write(dir.join(format!("{name}.json")), json)?;
    let md = dir.join(format!("{name}.md"));
    let doc = std::fs::read_to_string(&md).unwrap_or_else(|_| format!("{BEGIN}\n{END}\n"));
    let doc = replace_generated(&doc, block).map_err(std::io::Error::other)?;
    std::fs::write(md, doc)
}

/// Which bench's results a committed document holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Datapath,
    Provisioning,
    Footprint,
    Quotas,
    ClientCrash,
}

/// Every generated document in docs/benchmarks, by name (`NAME.json` renders into the
/// generated block of `NAME.md`). The `datapath-levers-*` ones are runs of the data-path
/// bench with variants, kept as the evidence for the levers tried.
pub const DOCS: &[(&str, Kind)] = &[
    ("datapath", Kind::Datapath),
    ("datapath-levers-quota", Kind::Datapath),
    ("datapath-levers-threads", Kind::Datapath),
    ("datapath-levers-small-files", Kind::Datapath),
    ("datapath-levers-failover", Kind::Datapath),
    ("datapath-levers-failover-tu1", Kind::Datapath),
    ("datapath-levers-failover-keepalive", Kind::Datapath),
    ("datapath-levers-failover-keepalive-2", Kind::Datapath),
    ("datapath-levers-failover-restart", Kind::Datapath),
    ("datapath-levers-failover-ping", Kind::Datapath),
    ("datapath-levers-failover-ping-2", Kind::Datapath),
    ("datapath-levers-quota-calls", Kind::Datapath),
    ("datapath-levers-fuse-calls", Kind::Datapath),
    ("datapath-levers-fsync-calls", Kind::Datapath),
    ("datapath-profile", Kind::Datapath),
    ("csi-provisioning", Kind::Provisioning),
    ("operator-footprint", Kind::Footprint),
    ("quotas-vm", Kind::Quotas),
    ("client-crash", Kind::ClientCrash),
];

/// The generated block `json` (a results file of `kind`) renders to.
pub fn render_json(kind: Kind, json: &str) -> Result<String, serde_json::Error> {
    Ok(match kind {
        Kind::Datapath => datapath::render(&serde_json::from_str(json)?),
        Kind::Provisioning => provisioning::render(&serde_json::from_str(json)?),
        Kind::Footprint => footprint::render(&serde_json::from_str(json)?),
        Kind::Quotas => quotas::render(&serde_json::from_str(json)?),
        Kind::ClientCrash => client_crash::render(&serde_json::from_str(json)?),
    })
}

/// Where results go: `GK_BENCH_OUT`, else the repository's docs/benchmarks.
pub fn out_dir() -> std::path::PathBuf {
    std::env::var_os("GK_BENCH_OUT")
        .map(Into::into)
        .unwrap_or_else(|| crate::repo_root().join("docs/benchmarks"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_between_ranks() {
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(median(&v), 2.5);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&v, 1.0), 4.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn overlap_is_of_whole_ranges() {
        assert!(overlap(&[1.0, 3.0], &[2.0, 5.0]));
        assert!(overlap(&[1.0, 2.0], &[2.0, 5.0]));
        assert!(!overlap(&[1.0, 1.9], &[2.0, 5.0]));
        assert!(!overlap(&[], &[2.0]));
    }

    #[test]
    fn the_generated_block_is_replaced_and_read_back() {
        let doc = format!("intro\n{BEGIN}\nold\n{END}\nafter\n");
        let new = replace_generated(&doc, "new\n").unwrap();
        assert_eq!(new, format!("intro\n{BEGIN}\nnew\n{END}\nafter\n"));
        assert_eq!(generated(&new), Some("new\n"));
        assert!(replace_generated("no markers", "x").is_err());
    }
}
