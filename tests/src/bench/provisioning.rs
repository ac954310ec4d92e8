//! The CSI provisioning bench's results and their table (`docs/benchmarks/csi-provisioning.md`).

use serde::{Deserialize, Serialize};

use super::{fmt, percentile, RunInfo};

/// Targets of the performance issue, in milliseconds and seconds.
pub const CREATE_P50_MS: f64 = 50.0;
pub const CREATE_P99_MS: f64 = 200.0;
pub const BULK_SECONDS: f64 = 60.0;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub run: RunInfo,
    /// 1-, 5- and 15-minute load averages before the first create and after the last delete.
    pub load_before: [f64; 3],
    pub load_after: [f64; 3],
    /// Where the bricks' loop files live.
    pub storage: String,
    /// The first CreateVolume on the pool, which also enables quota and mounts the pool in
    /// the agent.
    pub first_create_ms: f64,
    /// Each of the timed CreateVolumes, one at a time.
    pub create_ms: Vec<f64>,
    /// PVs created after those, and how long they took in all.
    pub bulk_pvs: usize,
    pub bulk_seconds: f64,
    /// Calls of the whole run that returned an error.
    pub failures: usize,
    /// Each DeleteVolume of the timed creates' PVs.
    pub delete_ms: Vec<f64>,
}

fn verdict(value: f64, target: f64) -> String {
    let ratio = value / target;
    let word = if ratio <= 1.0 { "met" } else { "**missed**" };
    format!("{} ({word})", fmt(ratio))
}

/// The generated block of the document.
pub fn render(r: &Results) -> String {
    let p = |v: &[f64], q: f64| percentile(v, q);
    let mut out = format!(
        "Run of {} UTC at commit `{}` ({} cores, glusterfs {}): `{}`. Bricks on {}. Load \
         average (1, 5, 15 min) {} before the first create, {} after the last delete.\n\n",
        r.run.started,
        r.run.commit,
        r.run.cores,
        r.run.glusterfs,
        r.run.command,
        r.storage,
        load(&r.load_before),
        load(&r.load_after),
    );
    out.push_str("| measure | result | target | result ÷ target |\n|---|---|---|---|\n");
    let n = r.create_ms.len();
    let rows = [
        (
            format!("CreateVolume p50 ({n} creates, one at a time)"),
            format!("{} ms", fmt(p(&r.create_ms, 0.5))),
            format!("≤ {CREATE_P50_MS} ms"),
            verdict(p(&r.create_ms, 0.5), CREATE_P50_MS),
        ),
        (
            format!("CreateVolume p99 (same {n})"),
            format!("{} ms", fmt(p(&r.create_ms, 0.99))),
            format!("≤ {CREATE_P99_MS} ms"),
            verdict(p(&r.create_ms, 0.99), CREATE_P99_MS),
        ),
        (
            format!(
                "{} subdirectory PVs on the same pool, one at a time",
                thousands(r.bulk_pvs)
            ),
            format!("{} s", fmt(r.bulk_seconds)),
            format!("≤ {BULK_SECONDS} s"),
            verdict(r.bulk_seconds, BULK_SECONDS),
        ),
        (
            "calls that failed".into(),
            r.failures.to_string(),
            "0".into(),
            if r.failures == 0 { "met" } else { "**missed**" }.into(),
        ),
        (
            "first CreateVolume of the pool (quota switched on, agent mounts the pool)".into(),
            format!("{} ms", fmt(r.first_create_ms)),
            String::new(),
            String::new(),
        ),
        (
            format!("DeleteVolume p50 ({} deletes)", r.delete_ms.len()),
            format!("{} ms", fmt(p(&r.delete_ms, 0.5))),
            String::new(),
            String::new(),
        ),
        (
            "DeleteVolume p99".into(),
            format!("{} ms", fmt(p(&r.delete_ms, 0.99))),
            String::new(),
            String::new(),
        ),
    ];
    for (m, v, t, ratio) in rows {
        out.push_str(&format!("| {m} | {v} | {t} | {ratio} |\n"));
    }
    out
}

fn load(l: &[f64; 3]) -> String {
    format!("{:.2}, {:.2}, {:.2}", l[0], l[1], l[2])
}

fn thousands(n: usize) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn a_missed_target_is_marked() {
        assert_eq!(verdict(25.0, 50.0), "0.50 (met)");
        assert_eq!(verdict(75.0, 50.0), "1.50 (**missed**)");
    }
}
