//! What the kernel asked a FUSE client while a dd sample ran: every request it sent the
//! mount's connection (the `fuse:fuse_request_send` tracepoint, which names the connection,
//! the opcode and the request's length), counted per opcode and divided by the `write()`
//! calls the workload made. It shows whether the kernel's write-back cache gathered small
//! writes and what else each `write()` cost a round trip to the client for.
//!
//! Parsing, summing and rendering are pure and unit-tested; `Recording` runs perf through
//! `super::perf`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The requests one case's mount received during one sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub row: String,
    pub case: String,
    pub rep: usize,
    /// `write()` calls the workload made: the divisor.
    pub writes: u64,
    /// Opcode name (`FUSE_WRITE`) → (requests, bytes the kernel sent with them).
    pub requests: BTreeMap<String, (u64, u64)>,
}

/// The connection number the tracepoint prints for a mount whose files have device `dev`
/// (`st_dev`): the kernel's own encoding, major in the bits above 20.
pub fn connection_of(dev: u64) -> u64 {
    (nix::sys::stat::major(dev) << 20) | nix::sys::stat::minor(dev)
}

/// Counts `perf script -F trace` lines of `fuse:fuse_request_send` by opcode name
/// (`connection 45 req 12 opcode 16 (FUSE_WRITE) len 4176`). Lines that are not such events
/// are skipped; the caller filters the connection when recording.
pub fn parse(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut out: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let Some(name) = words
            .by_ref()
            .find(|w| w.starts_with("(FUSE_") || w.starts_with("(CUSE_"))
            .map(|w| w.trim_matches(|c| c == '(' || c == ')'))
        else {
            continue;
        };
        let len = match (words.next(), words.next()) {
            (Some("len"), Some(n)) => n.parse().unwrap_or(0),
            _ => 0,
        };
        let e = out.entry(name.to_string()).or_default();
        e.0 += 1;
        e.1 += len;
    }
    out
}

/// Requests below this many per `write()` are summed as "other" (the write-back cache's
/// gathered WRITEs are above it: one of 128 KiB per 1,300 writes of 100 B).
const SMALL: f64 = 0.0001;

/// One table: for every row and case, the requests per `write()` call, summed over the
/// repetitions, most frequent first, and the mean size of each.
pub fn render(samples: &[Sample]) -> String {
    if samples.is_empty() {
        return String::new();
    }
    let groups = super::by_row_case(samples, |s| (&s.row, &s.case));
    let mut md = String::from(
        "\n### What the kernel asked the FUSE client (`fuse:fuse_request_send`)\n\n\
         Every request the kernel sent the case's mount during the samples of the rows \
         below, counted by perf on the FUSE tracepoint filtered to the mount's connection, \
         summed over the repetitions and divided by the `write()` calls the workload made. \
         \"bytes per request\" is the kernel's mean request length (headers included). \
         Requests under 0.0001 per `write()` are summed as \"other\".\n\n\
         | row | case | request | per write() | bytes per request |\n\
         |---|---|---|---|---|\n",
    );
    for ((row, case), ss) in &groups {
        let writes: u64 = ss.iter().map(|s| s.writes).sum();
        if writes == 0 {
            continue;
        }
        let mut reqs: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for (name, (n, bytes)) in ss.iter().flat_map(|s| &s.requests) {
            let e = reqs.entry(name.as_str()).or_default();
            e.0 += n;
            e.1 += bytes;
        }
        let mut rows: Vec<(&str, u64, u64)> =
            reqs.into_iter().map(|(k, (n, b))| (k, n, b)).collect();
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let per_write = |n: u64| n as f64 / writes as f64;
        let (big, small): (Vec<_>, Vec<_>) =
            rows.into_iter().partition(|r| per_write(r.1) >= SMALL);
        for (name, n, bytes) in &big {
            md.push_str(&format!(
                "| {row} | `{case}` | {name} | {:.4} | {:.0} |\n",
                per_write(*n),
                *bytes as f64 / *n as f64
            ));
        }
        let other: u64 = small.iter().map(|r| r.1).sum();
        if other > 0 {
            md.push_str(&format!(
                "| {row} | `{case}` | other ({}) | {:.4} | – |\n",
                small.len(),
                per_write(other)
            ));
        }
    }
    md
}

/// A `perf record` of the FUSE requests sent to the mount holding `dir`, until `finish`.
pub struct Recording(super::perf::Recording);

impl Recording {
    pub fn start(data: &Path, dir: &Path) -> std::io::Result<Recording> {
        let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(dir)?);
        let args = [
            "-e".to_string(),
            "fuse:fuse_request_send".into(),
            "--filter".into(),
            format!("connection == {}", connection_of(dev)),
        ];
        super::perf::Recording::start(data, &args).map(Recording)
    }

    pub fn finish(self) -> std::io::Result<BTreeMap<String, (u64, u64)>> {
        Ok(parse(&self.0.finish("trace")?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_tracepoint_text_by_opcode_and_length() {
        let text = "connection 45 req 10 opcode 22 (FUSE_GETXATTR) len 68 \n\
                    connection 45 req 12 opcode 16 (FUSE_WRITE) len 131152 \n\
                    connection 45 req 14 opcode 22 (FUSE_GETXATTR) len 68 \n\
                    some header line\n";
        let got = parse(text);
        assert_eq!(got["FUSE_GETXATTR"], (2, 136));
        assert_eq!(got["FUSE_WRITE"], (1, 131152));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn connection_is_the_kernels_device_encoding() {
        // 0:45, an anonymous device as FUSE mounts get: the same number either way.
        assert_eq!(connection_of(nix::sys::stat::makedev(0, 45)), 45);
        // 8:1 in the kernel's encoding is 8 << 20 | 1, not userspace's 0x801.
        assert_eq!(connection_of(nix::sys::stat::makedev(8, 1)), (8 << 20) | 1);
    }

    #[test]
    fn renders_requests_per_write_summed_over_repetitions() {
        let s = |rep, writes, w: u64, g: u64, o: u64| Sample {
            row: "dd-100B".into(),
            case: "db-r3".into(),
            rep,
            writes,
            requests: BTreeMap::from([
                ("FUSE_WRITE".to_string(), (w, w * 1000)),
                ("FUSE_GETXATTR".to_string(), (g, g * 68)),
                ("FUSE_FLUSH".to_string(), (o, o * 64)),
            ]),
        };
        let md = render(&[s(0, 10_000, 10, 10_000, 0), s(1, 10_000, 30, 10_000, 1)]);
        assert!(
            md.contains("| dd-100B | `db-r3` | FUSE_GETXATTR | 1.0000 | 68 |"),
            "{md}"
        );
        assert!(
            md.contains("| dd-100B | `db-r3` | FUSE_WRITE | 0.0020 | 1000 |"),
            "{md}"
        );
        // One FLUSH in 20,000 writes is under the cut.
        assert!(md.contains("| dd-100B | `db-r3` | other (1) |"), "{md}");
        assert!(!md.contains("FUSE_FLUSH"), "{md}");
        let getxattr = md.find("FUSE_GETXATTR").unwrap();
        assert!(
            getxattr < md.find("FUSE_WRITE |").unwrap(),
            "most frequent first"
        );
    }

    #[test]
    fn nothing_recorded_renders_nothing() {
        assert_eq!(render(&[]), "");
    }
}
