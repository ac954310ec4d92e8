//! Where the CPU goes while a data-path sample runs: `perf record` samples every CPU at a
//! fixed rate for the length of the sample, and each sample is counted against the process
//! it hit (the FUSE client, the brick processes, other gluster daemons, the workload, idle)
//! and the code it was in (OpenSSL's libcrypto and libssl, the kernel, the rest). Software
//! clock samples (`cpu-clock`): this machine's virtual CPUs expose no hardware counters.
//!
//! The classification and the rendering are pure and unit-tested; `Recording` runs perf
//! through `super::perf`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Samples per second on each CPU.
pub const HZ: u32 = 499;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Process {
    /// No task ran (the idle task, pid 0).
    Idle,
    /// The FUSE client (`glusterfs` with a mount point).
    Client,
    /// Brick processes (`glusterfsd`).
    Brick,
    /// glusterd, the self-heal daemon, quotad and gluster's own auxiliary mounts.
    OtherGluster,
    /// The process writing and reading (the bench itself, which also runs the brick agents,
    /// or fio).
    Workload,
    /// Everything else: kernel threads, perf itself.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Code {
    /// OpenSSL: libcrypto and libssl (gluster's TLS).
    Tls,
    Kernel,
    Other,
}

/// CPU seconds by process and code.
pub type Seconds = BTreeMap<Process, BTreeMap<Code, f64>>;

/// One profiled sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub row: String,
    pub case: String,
    pub rep: usize,
    /// From the first to the last sample perf took.
    pub wall_s: f64,
    /// Megabytes the workload moved while it was recorded.
    pub mb: f64,
    pub cpu_s: Seconds,
}

impl Profile {
    fn seconds(&self, p: Process, code: Option<Code>) -> f64 {
        self.cpu_s.get(&p).map_or(0.0, |by_code| match code {
            Some(c) => by_code.get(&c).copied().unwrap_or(0.0),
            None => by_code.values().sum(),
        })
    }

    fn busy(&self) -> f64 {
        self.cpu_s
            .iter()
            .filter(|(p, _)| **p != Process::Idle)
            .flat_map(|(_, c)| c.values())
            .sum()
    }
}

/// What a process is, from its command line (`argv`), its thread's name (`comm`, for
/// processes that had exited when asked) and its pid.
pub fn classify(pid: u32, argv: &[String], comm: &str, workload_pid: u32) -> Process {
    if pid == 0 {
        return Process::Idle;
    }
    if pid == workload_pid || comm == "fio" {
        return Process::Workload;
    }
    let Some(exe) = argv.first() else {
        return Process::Other;
    };
    let exe = exe.rsplit('/').next().unwrap_or(exe);
    let has = |s: &str| argv.iter().any(|a| a.contains(s));
    match exe {
        "glusterfsd" => Process::Brick,
        "glusterd" => Process::OtherGluster,
        "fio" => Process::Workload,
        // The self-heal daemon, quotad and the auxiliary mounts gluster makes for quota are
        // glusterfs processes too; a client pid marks the auxiliary mounts.
        "glusterfs" if has("shd/") || has("quotad") || has("--client-pid") => Process::OtherGluster,
        "glusterfs" => Process::Client,
        _ => Process::Other,
    }
}

/// The code a sample was in, from the shared object perf names.
pub fn code_of(dso: &str) -> Code {
    if dso.contains("libcrypto") || dso.contains("libssl") {
        Code::Tls
    } else if dso.starts_with("[kernel") {
        Code::Kernel
    } else {
        Code::Other
    }
}

/// One line of `perf script -F comm,pid,time,ip,dso`: (comm, pid, time in s, dso).
pub fn parse_line(line: &str) -> Option<(String, u32, f64, String)> {
    let line = line.trim();
    let open = line.rfind('(')?;
    let dso = line[open + 1..].strip_suffix(')')?.to_string();
    let mut head: Vec<&str> = line[..open].split_whitespace().collect();
    let _ip = head.pop()?;
    let time: f64 = head.pop()?.strip_suffix(':')?.parse().ok()?;
    let pid: u32 = head.pop()?.parse().ok()?;
    Some((head.join(" "), pid, time, dso))
}

/// The CPU seconds in a `perf script` text sampled at `hz`, and the time from its first to
/// its last sample; `what` says what a pid (with its comm) is.
pub fn tally(text: &str, hz: u32, mut what: impl FnMut(u32, &str) -> Process) -> (Seconds, f64) {
    let mut seconds = Seconds::new();
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut kinds: BTreeMap<u32, Process> = BTreeMap::new();
    for (comm, pid, time, dso) in text.lines().filter_map(parse_line) {
        first = first.min(time);
        last = last.max(time);
        let p = *kinds.entry(pid).or_insert_with(|| what(pid, &comm));
        *seconds
            .entry(p)
            .or_default()
            .entry(code_of(&dso))
            .or_default() += 1.0 / f64::from(hz);
    }
    let wall = if last >= first {
        last - first + 1.0 / f64::from(hz)
    } else {
        0.0
    };
    (seconds, wall)
}

/// A process's command line, or nothing once it has exited.
fn argv_of(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A `perf record` of every CPU's clock, running until `finish`.
pub struct Recording(super::perf::Recording);

impl Recording {
    /// Starts perf writing to `data`, and waits until it has begun sampling.
    pub fn start(data: &Path) -> std::io::Result<Recording> {
        let args = [
            "-e".to_string(),
            "cpu-clock".into(),
            "-F".into(),
            HZ.to_string(),
        ];
        super::perf::Recording::start(data, &args).map(Recording)
    }

    /// Stops perf and counts its samples; `workload_pid` is the process that ran the workload.
    pub fn finish(self, workload_pid: u32) -> std::io::Result<(Seconds, f64)> {
        let text = self.0.finish("comm,pid,time,ip,dso")?;
        Ok(tally(&text, HZ, |pid, comm| {
            classify(pid, &argv_of(pid), comm, workload_pid)
        }))
    }
}

/// The table of a run's profiles: one line per row and case, summed over its repetitions.
pub fn render(profiles: &[Profile], cores: usize) -> String {
    if profiles.is_empty() {
        return String::new();
    }
    let mut groups: BTreeMap<(String, String), Vec<&Profile>> = BTreeMap::new();
    for p in profiles {
        groups
            .entry((p.row.clone(), p.case.clone()))
            .or_default()
            .push(p);
    }
    let mut md = format!(
        "\n### Where the CPU went\n\n`perf record -a -e cpu-clock -F {HZ}` around every \
         sample of the rows below, summed over the repetitions. \"Cores\" is CPU time ÷ the \
         recorded time ({cores} cores: {cores}.00 is every core busy); \"TLS\" is the share of \
         that process's CPU time in OpenSSL (libcrypto, libssl), \"kernel\" in the kernel \
         (FUSE, sockets, XFS); \"CPU ms per MB\" is all busy CPU time ÷ the data moved.\n\n\
         | row | case | MB/s recorded | busy cores | CPU ms per MB | FUSE client: cores (TLS, \
         kernel) | bricks: cores (TLS, kernel) | other gluster | workload | other |\n\
         |---|---|---|---|---|---|---|---|---|---|\n"
    );
    for ((row, case), ps) in &groups {
        let wall: f64 = ps.iter().map(|p| p.wall_s).sum();
        let mb: f64 = ps.iter().map(|p| p.mb).sum();
        let sum = |p: Process, c: Option<Code>| -> f64 { ps.iter().map(|x| x.seconds(p, c)).sum() };
        let busy: f64 = ps.iter().map(|p| p.busy()).sum();
        let share = |part: f64, whole: f64| {
            if whole > 0.0 {
                format!("{:.0} %", 100.0 * part / whole)
            } else {
                "–".to_string()
            }
        };
        let split = |p: Process| {
            let all = sum(p, None);
            format!(
                "{:.2} ({}, {})",
                all / wall,
                share(sum(p, Some(Code::Tls)), all),
                share(sum(p, Some(Code::Kernel)), all)
            )
        };
        md.push_str(&format!(
            "| {row} | `{case}` | {:.1} | {:.2} | {:.2} | {} | {} | {:.2} | {:.2} | {:.2} |\n",
            mb / wall,
            busy / wall,
            1000.0 * busy / mb,
            split(Process::Client),
            split(Process::Brick),
            sum(Process::OtherGluster, None) / wall,
            sum(Process::Workload, None) / wall,
            sum(Process::Other, None) / wall,
        ));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn processes_are_told_apart_by_their_command_lines() {
        let client = argv(
            "/usr/sbin/glusterfs --process-name fuse --volfile-server=10.213.0.1 \
             --volfile-id=/pool /var/lib/kubelet/plugins/x/globalmount",
        );
        assert_eq!(classify(7, &client, "glfs_epoll000", 1), Process::Client);
        let brick = argv("/usr/sbin/glusterfsd -s 10.213.0.1 --volfile-id pool.x.brick");
        assert_eq!(classify(8, &brick, "glfs_iotwr000", 1), Process::Brick);
        let shd = argv("/usr/sbin/glusterfs -s localhost --volfile-id shd/pool -p x");
        assert_eq!(classify(9, &shd, "glfs_epoll000", 1), Process::OtherGluster);
        let aux = argv("/usr/sbin/glusterfs --volfile-server localhost --client-pid -5 /run/x");
        assert_eq!(classify(10, &aux, "glusterfs", 1), Process::OtherGluster);
        let glusterd = argv("/usr/sbin/glusterd -N --log-level INFO");
        assert_eq!(
            classify(11, &glusterd, "glfs_epoll000", 1),
            Process::OtherGluster
        );
        assert_eq!(classify(0, &[], "swapper", 1), Process::Idle);
        assert_eq!(classify(1, &[], "datapath-123", 1), Process::Workload);
        // fio's workers had exited by the time they were asked about: known by name.
        assert_eq!(classify(12, &[], "fio", 1), Process::Workload);
        assert_eq!(classify(13, &[], "kworker/0:1", 1), Process::Other);
    }

    #[test]
    fn perf_script_lines_parse_from_the_right() {
        let l = "  kworker/u8:1-ev     81 1234.500000:  ffffffff815a4f21 ([kernel.kallsyms])";
        assert_eq!(
            parse_line(l),
            Some((
                "kworker/u8:1-ev".into(),
                81,
                1234.5,
                "[kernel.kallsyms]".into()
            ))
        );
        let l = "glfs_epoll000 4242 10.25: 7f154eab1158 (/usr/lib/x86_64-linux-gnu/libcrypto.so.3)";
        let (comm, pid, _, dso) = parse_line(l).unwrap();
        assert_eq!((comm.as_str(), pid), ("glfs_epoll000", 4242));
        assert_eq!(code_of(&dso), Code::Tls);
        assert_eq!(code_of("/usr/lib/x86_64-linux-gnu/libssl.so.3"), Code::Tls);
        assert_eq!(code_of("/usr/sbin/glusterfsd"), Code::Other);
        assert_eq!(parse_line("garbage"), None);
    }

    #[test]
    fn samples_add_up_to_seconds_by_process_and_code() {
        let text = "\
glfs_epoll000 100 1.000: 1 (/usr/lib/libcrypto.so.3)
glfs_epoll000 100 1.500: 1 (/usr/lib/libcrypto.so.3)
glfs_epoll000 100 1.750: 1 ([kernel.kallsyms])
glfs_iotwr000 200 2.000: 1 (/usr/sbin/glusterfsd)
swapper 0 2.999: 0 ([kernel.kallsyms])
";
        let mut asked = Vec::new();
        let (s, wall) = tally(text, 4, |pid, _| {
            asked.push(pid);
            match pid {
                100 => Process::Client,
                200 => Process::Brick,
                _ => Process::Idle,
            }
        });
        // Each pid is looked up once.
        assert_eq!(asked, vec![100, 200, 0]);
        assert_eq!(s[&Process::Client][&Code::Tls], 0.5);
        assert_eq!(s[&Process::Client][&Code::Kernel], 0.25);
        assert_eq!(s[&Process::Brick][&Code::Other], 0.25);
        assert_eq!(s[&Process::Idle][&Code::Kernel], 0.25);
        assert!((wall - 2.249).abs() < 1e-9, "{wall}");
    }

    #[test]
    fn the_table_sums_repetitions_and_leaves_idle_out_of_busy() {
        let profile = |rep| Profile {
            row: "dd-1MiB".into(),
            case: "bt-r3".into(),
            rep,
            wall_s: 2.0,
            mb: 100.0,
            cpu_s: BTreeMap::from([
                (
                    Process::Client,
                    BTreeMap::from([(Code::Tls, 0.5), (Code::Other, 0.5)]),
                ),
                (Process::Brick, BTreeMap::from([(Code::Kernel, 1.0)])),
                (Process::Idle, BTreeMap::from([(Code::Kernel, 2.0)])),
            ]),
        };
        let md = render(&[profile(0), profile(1)], 2);
        assert!(
            md.contains("| dd-1MiB | `bt-r3` | 50.0 | 1.00 | 20.00 | 0.50 (50 %, 0 %) | 0.50 (0 %, 100 %) | 0.00 | 0.00 | 0.00 |"),
            "{md}"
        );
        assert_eq!(render(&[], 2), "");
    }
}
