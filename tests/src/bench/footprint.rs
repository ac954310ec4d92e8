//! The operator footprint bench's results and table (`docs/benchmarks/operator-footprint.md`),
//! and reading a process's memory from /proc.

use serde::{Deserialize, Serialize};

use super::{fmt, RunInfo};

/// Targets of the performance issue.
pub const RSS_MIB: f64 = 40.0;
pub const STEADY_CPU_PERCENT: f64 = 1.0;

/// Where a process's resident memory is, from /proc/PID/smaps, in KiB.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Memory {
    /// The binary's own pages (code and data).
    pub binary_kib: u64,
    /// Shared libraries.
    pub libraries_kib: u64,
    /// Anonymous memory: the allocator's heap and arenas, thread stacks.
    pub anonymous_kib: u64,
    pub threads: u64,
}

/// `pid`'s resident memory by kind; None when the process is gone.
pub fn memory(pid: u32) -> Option<Memory> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let exe = exe
        .to_string_lossy()
        .trim_end_matches(" (deleted)")
        .to_string();
    let mut m = Memory::default();
    let mut kind = 0u8;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            // A mapping's header: "start-end perms offset dev inode [path]".
            let path = line.split_whitespace().nth(5).unwrap_or("");
            kind = if path == exe {
                0
            } else if path.starts_with('/') {
                1
            } else {
                2
            };
        } else if let Some(rest) = line.strip_prefix("Rss:") {
            let kib: u64 = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            match kind {
                0 => m.binary_kib += kib,
                1 => m.libraries_kib += kib,
                _ => m.anonymous_kib += kib,
            }
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    m.threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Some(m)
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub run: RunInfo,
    pub load_before: [f64; 3],
    pub load_after: [f64; 3],
    pub volumes: usize,
    pub pvs: usize,
    pub refresh_seconds: u64,
    pub steady_seconds: f64,
    pub cluster_ready_s: f64,
    pub first_volume_ready_s: f64,
    pub rest_ready_s: f64,
    pub pvs_counted_s: f64,
    pub peak_rss_kib: u64,
    pub build_cpu_s: f64,
    pub build_wall_s: f64,
    pub steady_rss_kib: (u64, u64),
    pub steady_cpu_s: f64,
    /// Where the memory was at the end of the steady state.
    pub memory: Memory,
    pub reconciles: f64,
}

fn mib(kib: u64) -> String {
    format!("{} MiB", fmt(kib as f64 / 1024.0))
}

fn verdict(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "**missed**"
    }
}

/// The generated block of the document.
pub fn render(r: &Results) -> String {
    let load = |l: &[f64; 3]| format!("{:.2}, {:.2}, {:.2}", l[0], l[1], l[2]);
    let mut out = format!(
        "Run of {} UTC at commit `{}` ({} cores, glusterfs {}): `{}`; {} GlusterVolumes \
         (replica 3, gluster TLS on), {} PersistentVolumes, refresh every {} s. Load average \
         (1, 5, 15 min) {} at the start, {} at the end.\n\n",
        r.run.started,
        r.run.commit,
        r.run.cores,
        r.run.glusterfs,
        r.run.command,
        r.volumes,
        r.pvs,
        r.refresh_seconds,
        load(&r.load_before),
        load(&r.load_after),
    );
    out.push_str("| measure | result | target |\n|---|---|---|\n");
    let steady_pct = 100.0 * r.steady_cpu_s / r.steady_seconds;
    let peak_mib = r.peak_rss_kib as f64 / 1024.0;
    let rows = [
        (
            "3-node GlusterCluster: apply → Ready".to_string(),
            format!("{} s", fmt(r.cluster_ready_s)),
            String::new(),
        ),
        (
            "replica-3 GlusterVolume: apply → Ready".into(),
            format!("{} s", fmt(r.first_volume_ready_s)),
            String::new(),
        ),
        (
            format!(
                "{} more GlusterVolumes applied at once → all Ready",
                r.volumes.saturating_sub(1)
            ),
            format!("{} s", fmt(r.rest_ready_s)),
            String::new(),
        ),
        (
            format!(
                "{} PersistentVolumes created → all in the operator's metrics",
                r.pvs
            ),
            format!("{} s", fmt(r.pvs_counted_s)),
            String::new(),
        ),
        (
            "operator peak RSS (the whole run)".into(),
            mib(r.peak_rss_kib),
            format!("≤ {RSS_MIB} MiB: {}", verdict(peak_mib <= RSS_MIB)),
        ),
        (
            format!(
                "operator RSS in the steady state ({} s)",
                fmt(r.steady_seconds)
            ),
            format!("{} – {}", mib(r.steady_rss_kib.0), mib(r.steady_rss_kib.1)),
            format!(
                "≤ {RSS_MIB} MiB: {}",
                verdict(r.steady_rss_kib.1 as f64 / 1024.0 <= RSS_MIB)
            ),
        ),
        (
            "operator CPU in the steady state, % of one core".into(),
            format!("{} % ({} s)", fmt(steady_pct), fmt(r.steady_cpu_s)),
            format!(
                "≤ {STEADY_CPU_PERCENT} %: {}",
                verdict(steady_pct <= STEADY_CPU_PERCENT)
            ),
        ),
        (
            "operator CPU while building up".into(),
            format!(
                "{} s over {} s ({} %)",
                fmt(r.build_cpu_s),
                fmt(r.build_wall_s),
                fmt(100.0 * r.build_cpu_s / r.build_wall_s)
            ),
            String::new(),
        ),
        (
            "where the RSS was at the end: anonymous (heap, arenas, stacks) / binary / libraries"
                .into(),
            format!(
                "{} / {} / {} ({} threads)",
                mib(r.memory.anonymous_kib),
                mib(r.memory.binary_kib),
                mib(r.memory.libraries_kib),
                r.memory.threads
            ),
            String::new(),
        ),
        (
            "reconciles started in the whole run".into(),
            format!("{:.0}", r.reconciles),
            String::new(),
        ),
    ];
    for (m, v, t) in rows {
        out.push_str(&format!("| {m} | {v} | {t} |\n"));
    }
    out
}
