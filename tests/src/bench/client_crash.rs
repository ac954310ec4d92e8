//! The client-crash bench's results and their tables (`docs/benchmarks/client-crash.md`):
//! what a writer in a pod sees when its PV's gluster client is killed.

use serde::{Deserialize, Serialize};

use super::{fmt, median, range, RunInfo};

/// How the node plugin was told to find a dead client's targets.
pub const MODES: [(&str, &str); 2] = [
    (
        "mount-events",
        "on mount-table changes and every 3 s (the chart's default)",
    ),
    ("timer", "every 3 s only (GK_REPAIR_ON_MOUNT_CHANGE=false)"),
];

/// One SIGKILL of the PV's gluster client.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Kill {
    pub mode: String,
    pub round: usize,
    /// 1-minute load average just before the kill.
    pub load1: f64,
    /// From the kill until a new gluster client process serves the staging path.
    pub client_ms: f64,
    /// From the kill until the first write that succeeded after the failed ones (or, when
    /// none failed, the end of the longest gap): what the application waited.
    pub back_ms: f64,
    /// Writes of the writer that opens its file for each write, failed after the kill.
    pub failed: usize,
    /// Writes through a descriptor opened before the kill: failed, and succeeded before the
    /// writer opened its file again.
    pub held_failed: usize,
    pub held_ok: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub run: RunInfo,
    /// Where the bricks live (the demo's nodes).
    pub storage: String,
    pub kills: Vec<Kill>,
}

/// The generated block of the document.
pub fn render(r: &Results) -> String {
    let mut out = format!(
        "Run of {} UTC at commit `{}` ({} cores, glusterfs {}): `{}`. Bricks on {}. {} kills \
         of the PV's gluster client in all, the two ways of repairing in turns.\n\n",
        r.run.started,
        r.run.commit,
        r.run.cores,
        r.run.glusterfs,
        r.run.command,
        r.storage,
        r.kills.len(),
    );
    out.push_str(
        "| the plugin repairs | kills | new client serves (median, range) | writer waited (median, range) | failed writes (median, range) | held descriptor: failed / succeeded | load (1 min) |\n\
         |---|---:|---|---|---|---|---|\n",
    );
    for (mode, words) in MODES {
        let k: Vec<&Kill> = r.kills.iter().filter(|k| k.mode == mode).collect();
        if k.is_empty() {
            continue;
        }
        let col = |f: fn(&Kill) -> f64| -> Vec<f64> { k.iter().map(|k| f(k)).collect() };
        let ms = |v: &[f64]| {
            let (lo, hi) = range(v);
            format!("{} ms ({}–{})", fmt(median(v)), fmt(lo), fmt(hi))
        };
        let n = |v: &[f64]| {
            let (lo, hi) = range(v);
            format!("{} ({}–{})", fmt(median(v)), fmt(lo), fmt(hi))
        };
        let loads = col(|k| k.load1);
        let (lo, hi) = range(&loads);
        out.push_str(&format!(
            "| {words} | {} | {} | {} | {} | {} / {} | {}–{} |\n",
            k.len(),
            ms(&col(|k| k.client_ms)),
            ms(&col(|k| k.back_ms)),
            n(&col(|k| k.failed as f64)),
            k.iter().map(|k| k.held_failed).sum::<usize>(),
            k.iter().map(|k| k.held_ok).sum::<usize>(),
            fmt(lo),
            fmt(hi),
        ));
    }
    let waited = |mode: &str| -> Vec<f64> {
        r.kills
            .iter()
            .filter(|k| k.mode == mode)
            .map(|k| k.back_ms)
            .collect()
    };
    let (a, b) = (waited(MODES[0].0), waited(MODES[1].0));
    if !a.is_empty() && !b.is_empty() {
        out.push_str(&format!(
            "\nWriter waited, median on mount events ÷ median on the timer only: {}; the ranges \
             {}.\n",
            fmt(median(&a) / median(&b)),
            if super::overlap(&a, &b) {
                "overlap"
            } else {
                "do not overlap"
            }
        ));
    }
    out.push_str("\nEach kill:\n\n| mode | round | new client serves | writer waited | failed writes | held descriptor failed / succeeded | load |\n|---|---:|---:|---:|---:|---|---:|\n");
    for k in &r.kills {
        out.push_str(&format!(
            "| {} | {} | {} ms | {} ms | {} | {} / {} | {} |\n",
            k.mode,
            k.round,
            fmt(k.client_ms),
            fmt(k.back_ms),
            k.failed,
            k.held_failed,
            k.held_ok,
            fmt(k.load1)
        ));
    }
    out
}

/// What a writer's log (lines `ok|fail reopen|held MS`, `reopen held MS`) says of the window
/// after a kill at `kill` and before `until`: (back_ms, failed, held_failed, held_ok).
pub fn window(log: &str, kill: u64, until: u64) -> (f64, usize, usize, usize) {
    let mut failed = 0;
    let (mut held_failed, mut held_ok, mut held_reopened) = (0, 0, false);
    let mut last_ok = kill;
    let mut longest_gap = 0u64;
    let mut back = None;
    for line in log.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        let (Some(&what), Some(&who), Some(at)) = (
            w.first(),
            w.get(1),
            w.get(2).and_then(|t| t.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if at < kill || at >= until {
            continue;
        }
        match (what, who) {
            ("fail", "reopen") => failed += 1,
            ("ok", "reopen") => {
                longest_gap = longest_gap.max(at - last_ok);
                last_ok = at;
                if failed > 0 && back.is_none() {
                    back = Some(at - kill);
                }
            }
            ("fail", "held") if !held_reopened => held_failed += 1,
            ("ok", "held") if !held_reopened => held_ok += 1,
            ("reopen", "held") => held_reopened = true,
            _ => {}
        }
    }
    (
        back.unwrap_or(longest_gap) as f64,
        failed,
        held_failed,
        held_ok,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_counts_from_the_kill_to_the_first_write_back() {
        let log = "ok reopen 900\nok held 950\n\
                   fail reopen 1050\nfail held 1060\nfail reopen 1110\n\
                   ok reopen 1800\nfail held 1900\nreopen held 2000\nok held 2050\n\
                   fail reopen 9000\n";
        // The kill at 1000; the writer's first success after it is at 1800; the held
        // descriptor never worked again before the writer opened its file anew.
        assert_eq!(window(log, 1000, 5000), (800.0, 2, 2, 0));
    }

    #[test]
    fn without_a_failure_the_window_is_the_longest_gap() {
        let log = "ok reopen 1000\nok reopen 1050\nok reopen 1400\nok held 1450\n";
        assert_eq!(window(log, 1000, 5000), (350.0, 0, 0, 1));
    }

    #[test]
    fn both_modes_render_with_their_ratio() {
        let kill = |mode: &str, back: f64| Kill {
            mode: mode.into(),
            round: 0,
            load1: 1.0,
            client_ms: 300.0,
            back_ms: back,
            failed: 3,
            held_failed: 4,
            held_ok: 0,
        };
        let r = Results {
            run: RunInfo {
                commit: "abc".into(),
                started: "2026-12-08 01:00".into(),
                cores: 2,
                glusterfs: "10.3".into(),
                command: "cargo bench".into(),
            },
            storage: "xfs".into(),
            kills: vec![kill("mount-events", 500.0), kill("timer", 2000.0)],
        };
        let md = render(&r);
        assert!(md.contains("| on mount-table changes"), "{md}");
        assert!(md.contains("| every 3 s only"), "{md}");
        assert!(md.contains("median on the timer only: 0.25"), "{md}");
    }
}
