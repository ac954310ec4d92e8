//! What the bricks were asked to do while a sample ran, from gluster's own `volume profile`:
//! each brick's io-stats counts the calls it receives and how long it took to answer them.
//! Work the translators under io-stats do on their own (quota's marker updating its
//! accounting, replication's locks held) shows only in those latencies.
//!
//! Summing and rendering are pure and unit-tested; the bench reads the counters through
//! `gk_gluster::Gluster::profile_info`.

use std::collections::BTreeMap;

use gk_gluster::BrickProfile;
use serde::{Deserialize, Serialize};

/// The calls all bricks of one case's volume received during one sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub row: String,
    pub case: String,
    pub rep: usize,
    /// Files the workload made (and stat'ed, deleted) in the sample: the divisor.
    pub files: usize,
    /// Fop name → (calls, nanoseconds the bricks took for them), summed over bricks.
    pub fops: BTreeMap<String, (u64, f64)>,
}

impl Sample {
    pub fn new(row: &str, case: &str, rep: usize, files: usize, bricks: &[BrickProfile]) -> Self {
        let mut fops: BTreeMap<String, (u64, f64)> = BTreeMap::new();
        for f in bricks.iter().flat_map(|b| &b.fops) {
            let e = fops.entry(f.name.clone()).or_default();
            e.0 += f.calls;
            e.1 += f.total_ns();
        }
        Sample {
            row: row.into(),
            case: case.into(),
            rep,
            files,
            fops,
        }
    }
}

/// Calls whose brick time is below this share of a case's total are folded into "other".
const SMALL_SHARE: f64 = 0.02;

/// One table per row: for every case, the calls its bricks received per file and the brick
/// time per file, summed over the repetitions, largest first.
pub fn render(samples: &[Sample]) -> String {
    if samples.is_empty() {
        return String::new();
    }
    let groups = super::by_row_case(samples, |s| (&s.row, &s.case));
    let mut md = String::from(
        "\n### What the bricks were asked (gluster's `volume profile`)\n\n\
         Every brick's calls during the samples of the rows below, summed over the bricks \
         (three for replicate 3) and the repetitions, divided by the files the workload \
         made. \"µs per call\" is the bricks' mean time to answer one; \"brick ms per \
         file\" is calls × that time ÷ files, the time the bricks spent answering, which \
         also holds what the translators under the counter did (quota's marker, the disk). \
         Calls under 2 % of a case's brick time are summed as \"other\".\n\n\
         | row | case | call | calls per file | µs per call | brick ms per file |\n\
         |---|---|---|---|---|---|\n",
    );
    for ((row, case), ss) in &groups {
        let files: usize = ss.iter().map(|s| s.files).sum();
        if files == 0 {
            continue;
        }
        let mut fops: BTreeMap<&str, (u64, f64)> = BTreeMap::new();
        for (name, (calls, ns)) in ss.iter().flat_map(|s| &s.fops) {
            let e = fops.entry(name.as_str()).or_default();
            e.0 += calls;
            e.1 += ns;
        }
        let total: f64 = fops.values().map(|(_, ns)| ns).sum();
        let mut rows: Vec<(&str, u64, f64)> =
            fops.into_iter().map(|(n, (c, ns))| (n, c, ns)).collect();
        rows.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(b.0)));
        let (big, small): (Vec<_>, Vec<_>) = rows
            .into_iter()
            .partition(|r| total > 0.0 && r.2 / total >= SMALL_SHARE);
        let per_file = |x: f64| x / files as f64;
        for (name, calls, ns) in &big {
            md.push_str(&format!(
                "| {row} | `{case}` | {name} | {:.2} | {:.0} | {:.2} |\n",
                per_file(*calls as f64),
                ns / *calls as f64 / 1e3,
                per_file(*ns) / 1e6
            ));
        }
        let other_calls: u64 = small.iter().map(|r| r.1).sum();
        let other_ns: f64 = small.iter().map(|r| r.2).sum();
        if other_calls > 0 {
            md.push_str(&format!(
                "| {row} | `{case}` | other ({}) | {:.2} | – | {:.2} |\n",
                small.len(),
                per_file(other_calls as f64),
                per_file(other_ns) / 1e6
            ));
        }
        md.push_str(&format!(
            "| {row} | `{case}` | **all** | {:.2} | – | **{:.2}** |\n",
            per_file(big.iter().chain(&small).map(|r| r.1).sum::<u64>() as f64),
            per_file(total) / 1e6
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;
    use gk_gluster::FopStat;

    fn brick(fops: &[(&str, u64, f64)]) -> BrickProfile {
        BrickProfile {
            brick: "n:/b".into(),
            duration_secs: 1,
            fops: fops
                .iter()
                .map(|(n, c, l)| FopStat {
                    name: n.to_string(),
                    calls: *c,
                    avg_latency_ns: *l,
                })
                .collect(),
        }
    }

    #[test]
    fn sums_over_bricks_and_divides_by_files() {
        let b = [
            brick(&[("CREATE", 100, 500e3), ("LOOKUP", 300, 10e3)]),
            brick(&[("CREATE", 100, 300e3), ("STATFS", 1, 1e3)]),
        ];
        let s = Sample::new("small", "pv", 0, 100, &b);
        assert_eq!(s.fops["CREATE"], (200, 80e6));
        let md = render(&[s.clone(), Sample { rep: 1, ..s }]);
        // CREATE: 400 calls over 200 files, 160 ms in all.
        assert!(
            md.contains("| small | `pv` | CREATE | 2.00 | 400 | 0.80 |"),
            "{md}"
        );
        assert!(
            md.contains("| small | `pv` | LOOKUP | 3.00 | 10 | 0.03 |"),
            "{md}"
        );
        // STATFS is far below 2 % of the time.
        assert!(md.contains("| other (1) | 0.01 |"), "{md}");
        assert!(md.contains("| **all** | 5.01 | – | **0.83** |"), "{md}");
    }

    #[test]
    fn nothing_recorded_renders_nothing() {
        assert_eq!(render(&[]), "");
    }
}
