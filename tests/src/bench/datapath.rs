//! The data-path bench's results and the tables rendered from them
//! (`docs/benchmarks/datapath.md`), and its plot (`datapath.svg`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{fmt, median, overlap, range, RunInfo};

/// What a workload row measures. Higher is better for every unit here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub id: &'static str,
    pub label: &'static str,
    pub unit: &'static str,
}

pub const ROWS: &[Row] = &[
    row("dd-100B", "dd 100 B blocks, fsync at the end", "MB/s"),
    row("dd-1KiB", "dd 1 KiB blocks, fsync at the end", "MB/s"),
    row("dd-10KiB", "dd 10 KiB blocks, fsync at the end", "MB/s"),
    row("dd-100KiB", "dd 100 KiB blocks, fsync at the end", "MB/s"),
    row("dd-1MiB", "dd 1 MiB blocks, fsync at the end", "MB/s"),
    row("dd-100MiB", "dd 100 MiB blocks, fsync at the end", "MB/s"),
    row(
        "files-100x1MiB",
        "seed 001: 100 × 1 MiB files, each fsynced",
        "files/s",
    ),
    row(
        "fio-write",
        "seed 000: 4 writers, file per process, 1 MiB",
        "MB/s",
    ),
    row(
        "fio-read",
        "seed 000: 4 readers, file per process, 1 MiB",
        "MB/s",
    ),
    row("small-create", "seed 004: create 4 KiB files", "files/s"),
    row("small-stat", "seed 004: stat files", "files/s"),
    row("small-delete", "seed 004: delete files", "files/s"),
];

const fn row(id: &'static str, label: &'static str, unit: &'static str) -> Row {
    Row { id, label, unit }
}

pub fn row_by_id(id: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.id == id)
}

/// A ratio the targets ask of a case's median, against (b) or (b-tls) of the same type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// The row ids it applies to.
    pub rows: Vec<String>,
    /// `b` or `bt`.
    pub against: String,
    pub at_least: f64,
}

/// One place the workloads run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Case {
    /// `raw`, or `<case>-<type>` such as `b-r3`.
    pub key: String,
    /// `a`, `b`, `bt`, `pv`, `dv`, a profile's case, or `x` for an exploratory variant.
    pub case: String,
    /// What it is, in words, for the document.
    pub label: String,
    /// `replicate 3`, `arbiter 2+1`, `disperse 2+1`; none for raw.
    pub volume_type: Option<String>,
    /// Gluster volume options set beyond gluster's defaults, as gluster reports them set.
    pub options: BTreeMap<String, String>,
    /// FUSE mount options beyond what the mount command adds itself.
    pub mount_flags: Vec<String>,
    /// Ratios this case must reach.
    pub targets: Vec<Target>,
}

/// One measurement, with the 1-minute load average read just before it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    pub value: f64,
    pub load: f64,
}

/// One writer's stall in a failover event.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stall {
    pub event: String,
    pub case: String,
    pub rep: usize,
    /// The longest gap between two completed writes after the event.
    pub stall_s: f64,
    pub failed_writes: usize,
    /// How the case's volume healed once the event was undone (absent from runs made before
    /// it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heal: Option<Heal>,
    /// The 1-minute load average just before the event (absent from runs made before it was
    /// recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<f64>,
    /// Whether the file the writer deleted while the event was on was still on a brick once
    /// the volume reported itself healed (absent, false, from runs made before it was checked).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deleted_file_left: bool,
}

/// How a volume healed after a failover event was undone.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Heal {
    /// Nothing left to heal this many seconds after the brick or link was back.
    Healed { seconds: f64 },
    /// Still not healed after `limit_s`; healed only once the returning node's brick was
    /// restarted (the remedy for a self-heal stuck on a brick, not something the product does).
    Stuck { limit_s: f64 },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Results {
    pub run: RunInfo,
    /// Where the loop files (bricks and raw) live.
    pub storage: String,
    /// Whether the bench waited for a quiet machine (false: told to run at any load).
    pub waited_for_quiet: bool,
    pub reps: usize,
    pub row_seconds: f64,
    pub cases: Vec<Case>,
    /// row id → case key → samples in repetition order.
    pub samples: BTreeMap<String, BTreeMap<String, Vec<Sample>>>,
    pub stalls: Vec<Stall>,
    /// Ping-timer expiries each gluster client logged over the whole run, and how many node
    /// cuts there were (each cut should cost one expiry per client whose brick was cut).
    pub ping_expiries: BTreeMap<String, usize>,
    /// Ping-timer expiries the nodes' quotad and self-heal daemons logged on each case's
    /// bricks over the whole run. (Absent from runs made before it was counted.)
    #[serde(default)]
    pub daemon_ping_expiries: BTreeMap<String, usize>,
    /// Disconnections each client logged over the whole run ([`disconnect_bound`] says how
    /// many the events explain). (Absent from runs made before it was counted.)
    #[serde(default)]
    pub disconnects: BTreeMap<String, usize>,
    /// Brick kills (each one brick of every volume).
    #[serde(default)]
    pub brick_kills: usize,
    pub node_cuts: usize,
    pub total_seconds: f64,
    /// CPU profiles of samples, when the run was asked for them (`--cpu-profile`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpu: Vec<super::cpu::Profile>,
    /// Gluster's per-brick call counts of samples, when asked for (`--fop-profile`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fops: Vec<super::fops::Sample>,
    /// The FUSE requests of dd samples, when asked for (`--fuse-calls`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fuse: Vec<super::fuse_calls::Sample>,
}

impl Results {
    fn values(&self, row: &str, key: &str) -> Vec<f64> {
        self.samples
            .get(row)
            .and_then(|m| m.get(key))
            .map(|v| v.iter().map(|s| s.value).collect())
            .unwrap_or_default()
    }

    fn case(&self, key: &str) -> Option<&Case> {
        self.cases.iter().find(|c| c.key == key)
    }

    /// The 1-minute load averages recorded before every sample, min and max.
    fn load_range(&self) -> (f64, f64) {
        let loads: Vec<f64> = self
            .samples
            .values()
            .flat_map(|m| m.values())
            .flatten()
            .map(|s| s.load)
            .collect();
        range(&loads)
    }
}

/// A case's key for a type: `b` and `r3` give `b-r3`.
pub fn key(case: &str, short_type: &str) -> String {
    format!("{case}-{short_type}")
}

fn short_type(key: &str) -> &str {
    key.rsplit_once('-').map_or("", |(_, t)| t)
}

/// "median (min–max)".
fn cell(v: &[f64]) -> String {
    if v.is_empty() {
        return "–".into();
    }
    let (lo, hi) = range(v);
    format!("{} ({}–{})", fmt(median(v)), fmt(lo), fmt(hi))
}

/// The ratio of medians, and whether the two ranges overlap (the difference is then within
/// the run's noise).
fn ratio(case: &[f64], base: &[f64]) -> String {
    if case.is_empty() || base.is_empty() {
        return "–".into();
    }
    let r = median(case) / median(base);
    if overlap(case, base) {
        format!("{} ≈", fmt(r))
    } else {
        fmt(r)
    }
}

/// The verdict on a case's targets for one row.
fn verdict(res: &Results, case: &Case, row: &str) -> String {
    let mine = res.values(row, &case.key);
    let mut out = Vec::new();
    for t in case
        .targets
        .iter()
        .filter(|t| t.rows.iter().any(|r| r == row))
    {
        let base = res.values(row, &key(&t.against, short_type(&case.key)));
        if mine.is_empty() || base.is_empty() {
            continue;
        }
        let r = median(&mine) / median(&base);
        let name = if t.against == "b" { "(b)" } else { "(b-tls)" };
        let met = if r >= t.at_least { "met" } else { "**missed**" };
        out.push(format!("≥ {}× {name}: {met}", t.at_least));
    }
    out.join("; ")
}

/// The table of one case against raw, (b) and (b-tls) of its type.
fn case_table(res: &Results, case: &Case) -> String {
    let t = short_type(&case.key);
    let (b, bt) = (key("b", t), key("bt", t));
    let mut out = String::from(
        "| workload | unit | (a) raw | (b) by hand | (b-tls) by hand, TLS | this case | ÷ (b) | ÷ (b-tls) | target |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for row in ROWS {
        let mine = res.values(row.id, &case.key);
        if mine.is_empty() {
            continue;
        }
        let vb = res.values(row.id, &b);
        let vbt = res.values(row.id, &bt);
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row.label,
            row.unit,
            cell(&res.values(row.id, "raw")),
            cell(&vb),
            cell(&vbt),
            cell(&mine),
            ratio(&mine, &vb),
            ratio(&mine, &vbt),
            verdict(res, case, row.id),
        ));
    }
    out
}

fn options_line(case: &Case) -> String {
    let mut parts: Vec<String> = case
        .options
        .iter()
        .map(|(k, v)| format!("`{k}={v}`"))
        .collect();
    if !case.mount_flags.is_empty() {
        parts.push(format!("mount options `{}`", case.mount_flags.join(",")));
    }
    if parts.is_empty() {
        "gluster's defaults".into()
    } else {
        parts.join(", ")
    }
}

/// The generated block of the document.
pub fn render(res: &Results) -> String {
    let has_samples = res
        .samples
        .values()
        .flat_map(|m| m.values())
        .any(|v| !v.is_empty());
    let loads = if has_samples {
        let (lo, hi) = res.load_range();
        format!("The 1-minute load average read before each sample ranged {lo:.2}–{hi:.2}")
    } else {
        "No data-path samples were taken, only failover events".to_string()
    };
    let mut md = format!(
        "Run of {} UTC at commit `{}` ({} cores, glusterfs {}): `{}`; {} repetitions, {} s per \
         dd row; loop files (bricks and raw) on {}; {:.0} s in all. {loads}{}. Cells are \
         median (min–max) of the repetitions; a ratio marked ≈ is one whose two ranges overlap, \
         so the difference is within this run's noise.\n\n",
        res.run.started,
        res.run.commit,
        res.run.cores,
        res.run.glusterfs,
        res.run.command,
        res.reps,
        res.row_seconds,
        res.storage,
        res.total_seconds,
        if res.waited_for_quiet {
            " (the run started below 1.0)"
        } else {
            " (started without waiting for a quiet machine: GK_BENCH_ANY_LOAD=1)"
        },
    );
    md.push_str("### Cases\n\n| key | what | options |\n|---|---|---|\n");
    for c in &res.cases {
        md.push_str(&format!(
            "| `{}` | {} | {} |\n",
            c.key,
            c.label,
            options_line(c)
        ));
    }
    for c in res
        .cases
        .iter()
        .filter(|c| has_samples && !matches!(c.case.as_str(), "a" | "b" | "bt"))
    {
        md.push_str(&format!(
            "\n### `{}`: {}, {}\n\n",
            c.key,
            c.label,
            c.volume_type.as_deref().unwrap_or("")
        ));
        md.push_str(&case_table(res, c));
    }
    md.push_str(&failover_table(res));
    md.push_str(&super::cpu::render(&res.cpu, res.run.cores));
    md.push_str(&super::fops::render(&res.fops));
    md.push_str(&super::fuse_calls::render(&res.fuse));
    md
}

fn failover_table(res: &Results) -> String {
    if res.stalls.is_empty() {
        return String::new();
    }
    // Runs made before heals were recorded keep their table as it was.
    let with_heal = res.stalls.iter().any(|s| s.heal.is_some());
    let mut md = String::from(
        "\n### Failover: a durable writer's stall (4 KiB pwrite + fdatasync every 20 ms), the \
         longest gap between two completed writes after the event\n\n",
    );
    if with_heal {
        md.push_str(
            "| event | case | stall, median (min–max) | failed writes | healed after the event was \
             undone | target |\n|---|---|---|---|---|---|\n",
        );
    } else {
        md.push_str(
            "| event | case | stall, median (min–max) | failed writes | target |\n\
             |---|---|---|---|---|\n",
        );
    }
    let mut keys: Vec<(&str, &str)> = res
        .stalls
        .iter()
        .map(|s| (s.event.as_str(), s.case.as_str()))
        .collect();
    keys.sort();
    keys.dedup();
    for (event, case) in keys {
        let mine: Vec<&Stall> = res
            .stalls
            .iter()
            .filter(|s| s.event == event && s.case == case)
            .collect();
        let stalls: Vec<f64> = mine.iter().map(|s| s.stall_s).collect();
        let failed: usize = mine.iter().map(|s| s.failed_writes).sum();
        let heal = if with_heal {
            format!(" {} |", heal_cell(&mine))
        } else {
            String::new()
        };
        let is_product = res
            .case(case)
            .is_some_and(|c| !matches!(c.case.as_str(), "b" | "bt" | "x"));
        let target = if event.ends_with("-cut") && is_product {
            let (_, hi) = range(&stalls);
            if hi <= 5.0 {
                "≤ 5 s: met".to_string()
            } else {
                "≤ 5 s: **missed**".to_string()
            }
        } else {
            String::new()
        };
        md.push_str(&format!(
            "| {event} | `{case}` | {} s | {failed} |{heal} {target} |\n",
            cell(&stalls)
        ));
    }
    let list = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, n)| format!("`{k}` {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let disconnects = if res.disconnects.is_empty() {
        String::new()
    } else {
        let bound = disconnect_bound(res.brick_kills, res.node_cuts);
        let over: Vec<String> = res
            .disconnects
            .iter()
            .filter(|(_, n)| **n > bound)
            .map(|(k, n)| format!("`{k}` ({} more)", n - bound))
            .collect();
        let verdict = if over.is_empty() {
            "no client logged more".to_string()
        } else {
            format!(
                "more than they explain (a spurious disconnect, or a cause not counted here): {}",
                over.join(", ")
            )
        };
        format!(
            " Each client logged these disconnections: {}. A node cut costs a client one, a \
             brick kill one or two (gluster's client logs losing the brick and, when it asks \
             glusterd for the brick's port before the brick is back, glusterd's refusal), so \
             the events explain at most {bound}; {verdict}.",
            list(&res.disconnects)
        )
    };
    let daemons = if res.daemon_ping_expiries.is_empty() {
        String::new()
    } else {
        format!(
            " The nodes' quotad and self-heal daemons logged these ping-timer expiries on each \
             case's bricks: {}.",
            list(&res.daemon_ping_expiries)
        )
    };
    md.push_str(&event_loads(res));
    md.push_str(&format!(
        "\nOver the whole run ({} brick kills and {} node cuts, each hitting one brick of every \
         volume), each client logged these ping-timer expiries: {}. A client without keepalive \
         learns of a cut node from the ping timer, one expiry per cut; the product's clients \
         should log none.{disconnects}{daemons}\n",
        res.brick_kills,
        res.node_cuts,
        list(&res.ping_expiries),
    ));
    md
}

/// The disconnections a client's log can hold for `brick_kills` and `node_cuts` events: one
/// per cut (the brick's connection times out; reconnecting fails without connecting, which
/// gluster does not log), and up to two per kill (the brick's connection, then the glusterd
/// connection the client opens to ask for the brick's new port, closed with an error while
/// the brick is not yet registered; later failures log at debug level only).
pub fn disconnect_bound(brick_kills: usize, node_cuts: usize) -> usize {
    2 * brick_kills + node_cuts
}

/// The load average before the events, per kind of event, when the run recorded it.
fn event_loads(res: &Results) -> String {
    let mut by_event: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in &res.stalls {
        if let Some(l) = s.load {
            by_event.entry(s.event.as_str()).or_default().push(l);
        }
    }
    if by_event.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = by_event
        .iter()
        .map(|(event, loads)| {
            let (lo, hi) = range(loads);
            format!("{event} {lo:.2}–{hi:.2}")
        })
        .collect();
    format!(
        "\nThe 1-minute load average just before each event (one reading per event, shared by \
         its cases): {}.\n",
        parts.join(", ")
    )
}

/// The heal column: the seconds of the heals that finished, and how many never did.
fn heal_cell(stalls: &[&Stall]) -> String {
    let (mut healed, mut stuck) = (Vec::new(), Vec::new());
    for s in stalls {
        match s.heal {
            Some(Heal::Healed { seconds }) => healed.push(seconds),
            Some(Heal::Stuck { limit_s }) => stuck.push(limit_s),
            None => {}
        }
    }
    let mut parts = Vec::new();
    if !healed.is_empty() {
        parts.push(format!("{} s", cell(&healed)));
    }
    if let Some(limit) = stuck.first() {
        parts.push(format!(
            "**{} of {} stuck** (not healed in {limit:.0} s; healed once the brick was restarted)",
            stuck.len(),
            stalls.len()
        ));
    }
    let left = stalls.iter().filter(|s| s.deleted_file_left).count();
    if left > 0 {
        parts.push(format!(
            "**{left} of {} left the deleted file on a brick**",
            stalls.len()
        ));
    }
    parts.join("; ")
}

/// The SVG plot: each product case's median ÷ (b) per row, one line per case.
pub fn plot(res: &Results, path: &std::path::Path) -> Result<(), String> {
    use plotters::prelude::*;
    let series: Vec<(&Case, Vec<(usize, f64)>)> = res
        .cases
        .iter()
        .filter(|c| !matches!(c.case.as_str(), "a" | "b"))
        .map(|c| {
            let b = key("b", short_type(&c.key));
            let pts = ROWS
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let (mine, base) = (res.values(r.id, &c.key), res.values(r.id, &b));
                    (!mine.is_empty() && !base.is_empty())
                        .then(|| (i, median(&mine) / median(&base)))
                })
                .collect();
            (c, pts)
        })
        .collect();
    let top = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold(2.0f64, f64::max)
        .min(50.0);
    let root = SVGBackend::new(path, (1000, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "median ÷ (b), hand-made with gluster's defaults",
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(120)
        .y_label_area_size(50)
        .build_cartesian_2d(0usize..ROWS.len(), 0f64..top * 1.05)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_labels(ROWS.len())
        .x_label_formatter(&|i| ROWS.get(*i).map_or(String::new(), |r| r.id.to_string()))
        .y_desc("ratio")
        .draw()
        .map_err(|e| e.to_string())?;
    chart
        .draw_series(LineSeries::new(
            vec![(0, 1.0), (ROWS.len() - 1, 1.0)],
            BLACK.stroke_width(1),
        ))
        .map_err(|e| e.to_string())?;
    for (i, (c, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| e.to_string())?
            .label(c.key.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Vec<Sample> {
        v.iter().map(|&value| Sample { value, load: 0.5 }).collect()
    }

    fn results() -> Results {
        let case = |key: &str, case: &str, targets: Vec<Target>| Case {
            key: key.into(),
            case: case.into(),
            label: key.into(),
            volume_type: Some("replicate 3".into()),
            options: BTreeMap::new(),
            mount_flags: vec![],
            targets,
        };
        let mut samples = BTreeMap::new();
        samples.insert(
            "dd-1MiB".to_string(),
            BTreeMap::from([
                ("b-r3".to_string(), s(&[100.0, 110.0, 90.0])),
                ("bt-r3".to_string(), s(&[50.0, 55.0, 45.0])),
                ("pv-r3".to_string(), s(&[95.0, 99.0, 80.0])),
            ]),
        );
        Results {
            run: RunInfo {
                commit: "abc1234".into(),
                started: "2026-12-02 16:00".into(),
                cores: 2,
                glusterfs: "10.3".into(),
                command: "cargo bench".into(),
            },
            storage: "xfs on /dev/vda".into(),
            waited_for_quiet: true,
            reps: 3,
            row_seconds: 2.0,
            cases: vec![
                case("b-r3", "b", vec![]),
                case("bt-r3", "bt", vec![]),
                case(
                    "pv-r3",
                    "pv",
                    vec![
                        Target {
                            rows: vec!["dd-1MiB".into()],
                            against: "b".into(),
                            at_least: 0.9,
                        },
                        Target {
                            rows: vec!["dd-1MiB".into()],
                            against: "bt".into(),
                            at_least: 1.0,
                        },
                    ],
                ),
            ],
            samples,
            stalls: vec![],
            ping_expiries: BTreeMap::new(),
            daemon_ping_expiries: BTreeMap::new(),
            disconnects: BTreeMap::new(),
            brick_kills: 0,
            node_cuts: 0,
            total_seconds: 10.0,
            cpu: vec![],
            fops: vec![],
            fuse: vec![],
        }
    }

    #[test]
    fn ratios_say_when_ranges_overlap_and_targets_are_judged() {
        let md = render(&results());
        let line = md
            .lines()
            .find(|l| l.starts_with("| dd 1 MiB"))
            .expect("a dd 1 MiB row");
        // 95 ÷ 100 overlaps (b)'s range; 95 ÷ 50 does not overlap (b-tls)'s.
        assert!(line.contains("| 0.95 ≈ | 1.90 |"), "{line}");
        assert!(
            line.contains("≥ 0.9× (b): met; ≥ 1× (b-tls): met"),
            "{line}"
        );
    }

    #[test]
    fn a_missed_target_is_marked() {
        let mut r = results();
        r.samples
            .get_mut("dd-1MiB")
            .unwrap()
            .insert("pv-r3".into(), s(&[60.0, 61.0, 62.0]));
        let md = render(&r);
        assert!(md.contains("≥ 0.9× (b): **missed**"), "{md}");
    }

    #[test]
    fn disconnections_are_compared_with_what_the_events_explain() {
        let stall = |event: &str| Stall {
            event: event.into(),
            case: "pv-r3".into(),
            rep: 0,
            stall_s: 2.0,
            failed_writes: 0,
            heal: None,
            load: None,
            deleted_file_left: false,
        };
        let mut r = results();
        r.stalls = vec![stall("brick-kill"), stall("node-cut")];
        r.brick_kills = 2;
        r.node_cuts = 3;
        r.ping_expiries = BTreeMap::from([("b-r3".into(), 3), ("pv-r3".into(), 0)]);
        let md = render(&r);
        assert!(
            !md.contains("disconnections"),
            "not counted, not claimed: {md}"
        );
        assert_eq!(disconnect_bound(2, 3), 7);
        r.disconnects = BTreeMap::from([("b-r3".into(), 7), ("pv-r3".into(), 5)]);
        let md = render(&r);
        assert!(
            md.contains("these disconnections: `b-r3` 7, `pv-r3` 5."),
            "{md}"
        );
        assert!(
            md.contains("explain at most 7; no client logged more."),
            "{md}"
        );
        r.disconnects.insert("pv-r3".into(), 9);
        let md = render(&r);
        assert!(
            md.contains("explain at most 7; more than they explain (a spurious disconnect, or a cause not counted here): `pv-r3` (2 more)."),
            "{md}"
        );
        assert!(!md.contains("quotad"), "not counted, not claimed: {md}");
        r.daemon_ping_expiries = BTreeMap::from([("pv-r3".into(), 2)]);
        let md = render(&r);
        assert!(
            md.contains("quotad and self-heal daemons logged these ping-timer expiries on each case's bricks: `pv-r3` 2."),
            "{md}"
        );
    }

    #[test]
    fn heals_get_a_column_only_when_recorded_and_stuck_ones_are_counted() {
        let stall = |rep, heal| Stall {
            event: "node-cut".into(),
            case: "pv-r3".into(),
            rep,
            stall_s: 2.0,
            failed_writes: 0,
            heal,
            load: None,
            deleted_file_left: false,
        };
        let mut r = results();
        r.stalls = vec![stall(0, None), stall(1, None)];
        let md = render(&r);
        assert!(!md.contains("healed after"), "{md}");
        r.stalls = vec![
            stall(0, Some(Heal::Healed { seconds: 3.0 })),
            stall(1, Some(Heal::Stuck { limit_s: 120.0 })),
        ];
        let md = render(&r);
        let line = md
            .lines()
            .find(|l| l.starts_with("| node-cut | `pv-r3`"))
            .expect("the node-cut row");
        assert!(
            line.contains("| 3.00 (3.00–3.00) s; **1 of 2 stuck** (not healed in 120 s"),
            "{line}"
        );
        assert!(!md.contains("left the deleted file"), "{md}");
        r.stalls[1].deleted_file_left = true;
        let md = render(&r);
        assert!(
            md.contains("not healed in 120 s; healed once the brick was restarted); **1 of 2 left the deleted file on a brick** |"),
            "{md}"
        );
        r.stalls[1].deleted_file_left = false;
        assert!(!md.contains("load average just before"), "{md}");
        r.stalls[0].load = Some(0.4);
        r.stalls[1].load = Some(1.25);
        let md = render(&r);
        assert!(
            md.contains("just before each event (one reading per event, shared by its cases): node-cut 0.40–1.25."),
            "{md}"
        );
    }
}
