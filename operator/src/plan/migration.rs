//! Reading gluster's status of a rebalance or remove-brick migration.

use std::time::Duration;

use gk_api::crd::{MigrationPhase, ResizeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// What to do next with a migration, from gluster's status of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Migration {
    /// Gluster never ran it: start it.
    Start,
    Running,
    /// Every file moved: for a shrink, commit now.
    Done,
    /// It ended without moving every file; the reason says what is left where.
    Failed(String),
}

/// Reads gluster's status of a rebalance or remove-brick migration. A migration that
/// "completed" with failures is a failure: heketi reported such runs as success. For a
/// shrink, skipped files (gluster skips a file when the remaining bricks lack space) are a
/// failure too: they are still only on the bricks being removed.
pub fn migration(status: &str, failures: u64, skipped: u64, shrink: bool) -> Migration {
    let what = if shrink {
        "moving data off the bricks being removed"
    } else {
        "rebalance"
    };
    // What a shrink that did not move every file means, whichever way it ended.
    let refused = "those files are still only on the bricks being removed, so the commit is \
                   refused";
    match status {
        "not started" => Migration::Start,
        "completed" if failures == 0 && (!shrink || skipped == 0) => Migration::Done,
        "completed" => Migration::Failed(format!(
            "gluster finished {what} with {failures} failed and {skipped} skipped files{}",
            if shrink {
                format!(
                    "; {refused}. Gluster's rebalance log says why per file (lack of room on \
                     the remaining bricks counts as a failure here): fix that, then set the \
                     brick count again (or back)"
                )
            } else {
                "; the files stay readable where they are".to_string()
            }
        )),
        s if s.contains("failed") || s.contains("stopped") => Migration::Failed(format!(
            "gluster reports {what} as {s:?} with {failures} failed and {skipped} skipped \
             files; {}",
            if shrink {
                format!(
                    "{refused}. See the remove-brick rebalance log under /var/log/glusterfs \
                     on the brick nodes, fix what it reports, then set the brick count again \
                     (or back)"
                )
            } else {
                "see the rebalance log under /var/log/glusterfs on the brick nodes".to_string()
            }
        )),
        _ => Migration::Running,
    }
}

/// Gluster's status of a run as a whole, read once no node is still at it. Gluster reports
/// the run `failed` as soon as one node's process fails, while the others still move files
/// (seen in CI: one node's process failed at its start, two others were in progress): until
/// every node has ended, the run is in progress, so its counts are final when it is judged
/// and a rerun never starts beside processes still running.
pub fn overall<'a>(aggregate: &'a str, nodes: impl IntoIterator<Item = &'a str>) -> &'a str {
    let mut nodes = nodes.into_iter();
    if aggregate != "not started" && nodes.any(|n| n == "in progress") {
        "in progress"
    } else {
        aggregate
    }
}

/// Whether a migration step is under way: pending, running or being checked.
pub fn migrating(resize: Option<&ResizeStatus>) -> bool {
    resize.is_some_and(|r| {
        matches!(
            r.phase,
            MigrationPhase::Pending | MigrationPhase::InProgress | MigrationPhase::Verifying
        )
    })
}

/// Runs of one migration in all: gluster counts a file it could not look up, lock or open
/// at that moment as failed, and a later run moves what an earlier one left.
pub const MIGRATION_RUNS: u32 = 3;

/// Whether a migration gluster ended with `failures`, already run again `reruns` times, is
/// run once more. A run with skipped files only is not: a skip means a lack of room or a
/// hard link, which another run does not change.
pub fn rerun(failures: u64, reruns: u32) -> bool {
    failures > 0 && reruns + 1 < MIGRATION_RUNS
}

/// What a finished run left for [`rerun`] to weigh: its failed files, or at least one when
/// gluster reports the run as a whole `failed` or `stopped` (its process died part way, say)
/// rather than `completed`.
pub fn unmoved(status: &str, failures: u64) -> u64 {
    if status == "completed" {
        failures
    } else {
        failures.max(1)
    }
}

/// Keeps `now.progressed_at` as it was in `before` while gluster's counts stay the same
/// (a new run, or changed counts, start the clock again at `now_at`), and says for how long
/// they have stayed still once that reaches `limit`. Gluster counts a file when it has
/// moved, so one large file can hold the counts still as long as it takes to copy; a
/// request gluster never answers holds them until its frame timeout (30 min by default).
pub fn stalled(
    before: Option<&ResizeStatus>,
    now: &mut ResizeStatus,
    now_at: Timestamp,
    limit: Duration,
) -> Option<Duration> {
    let counts = |r: &ResizeStatus| {
        (
            r.operation,
            r.reruns,
            r.files_moved,
            r.bytes_moved,
            r.failures,
            r.skipped,
        )
    };
    let since = before
        .filter(|b| counts(b) == counts(now))
        .and_then(|b| b.progressed_at.clone())
        .unwrap_or(Time(now_at));
    let still = still_for(&since, now_at);
    now.progressed_at = Some(since);
    (still >= limit).then_some(still)
}

/// Whether `r` is a run in progress whose counts last changed at least `limit` before
/// `now` (what [`stalled`] recorded): the volume's stalled gauge.
pub fn stalled_since(r: &ResizeStatus, now: Timestamp, limit: Duration) -> bool {
    r.phase == MigrationPhase::InProgress
        && r.progressed_at
            .as_ref()
            .is_some_and(|at| still_for(at, now) >= limit)
}

/// How far a node's run time may fall behind the time since the operator started the run
/// before the node counts as lost: a rebalance process starts a few seconds after the
/// command (glusterd took 10 s for one start in CI), and each status query reads its
/// run time afresh while it runs.
pub const LOST_AFTER: Duration = Duration::from_secs(60);

/// Why a run is to be stopped and started again, if it is: the nodes (host, gluster's status,
/// run time in seconds) that gluster reports still in progress although their run time lags
/// the time since the run was started at `started` by more than [`LOST_AFTER`]. Their
/// glusterd lost track of a rebalance process that has ended (seen on gluster 10.3: the
/// process logged "Rebalance is completed" and exited, and its node reported "in progress"
/// with the run time frozen from then on).
pub fn lost<'a>(
    nodes: impl IntoIterator<Item = (&'a str, &'a str, f64)>,
    started: Option<&Time>,
    now: Timestamp,
) -> Option<String> {
    let elapsed = still_for(started?, now);
    let lost: Vec<&str> = nodes
        .into_iter()
        .filter(|(_, status, run)| {
            *status == "in progress" && Duration::from_secs_f64(run.max(0.0)) + LOST_AFTER < elapsed
        })
        .map(|(host, _, _)| host)
        .collect();
    (!lost.is_empty()).then(|| {
        format!(
            "gluster on {} reports the run in progress, {} s after it started, while the run \
             time it gives stopped more than {} s before: that node's glusterd lost track of a \
             rebalance process that has ended. Stopped the run to start it again",
            lost.join(", "),
            elapsed.as_secs(),
            LOST_AFTER.as_secs()
        )
    })
}

/// Whole seconds from `since` to `now`; none when the clock went back.
fn still_for(since: &Time, now: Timestamp) -> Duration {
    Duration::from_secs(now.duration_since(since.0).as_secs().max(0) as u64)
}

/// Why files failed to move, from the text of a `<volume>-rebalance.log`: the errors of the
/// latest run of the process (after its last "Started running" line), gluster's message
/// without time, level and source, the last `keep` distinct ones.
pub fn migration_errors(log: &str, keep: usize) -> Vec<String> {
    let latest = log
        .lines()
        .rev()
        .take_while(|l| !l.contains("Started running"))
        .collect::<Vec<_>>();
    let mut out: Vec<String> = Vec::new();
    for line in latest.into_iter().rev() {
        let Some((_, rest)) = line.split_once("] E [") else {
            continue;
        };
        // `[MSGID: n] [file:line:function] 0-xlator: message`, the MSGID part optional.
        let mut rest = format!("[{rest}");
        while let Some(after) = rest
            .strip_prefix('[')
            .and_then(|r| r.split_once("] "))
            .map(|(_, after)| after.to_string())
        {
            rest = after;
        }
        let message = match rest.split_once(": ") {
            Some((xlator, m)) if !xlator.contains(' ') => m,
            _ => rest.as_str(),
        };
        let message = message.trim().to_string();
        out.retain(|m| m != &message);
        out.push(message);
    }
    let skip = out.len().saturating_sub(keep);
    out.split_off(skip)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A shrink run in progress that moved `files`.
    pub(crate) fn run(files: i64) -> ResizeStatus {
        ResizeStatus {
            operation: gk_api::crd::ResizeOperation::Shrink,
            phase: gk_api::crd::MigrationPhase::InProgress,
            bricks: vec![],
            files_moved: files,
            bytes_moved: files << 10,
            failures: 0,
            skipped: 0,
            message: None,
            reruns: 0,
            progressed_at: None,
            checks: 0,
            run_started_at: None,
            run_replaces: None,
        }
    }

    #[test]
    fn a_migration_is_stalled_once_its_counts_stay_still_for_the_limit() {
        let t0: Timestamp = "2026-12-06T05:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + k8s_openapi::jiff::SignedDuration::from_secs(s);
        let limit = Duration::from_secs(600);
        // A run just started: the clock starts now.
        let mut r = run(0);
        assert_eq!(stalled(None, &mut r, t0, limit), None);
        assert_eq!(r.progressed_at, Some(Time(t0)));
        // Files moved: the clock starts again.
        let mut moved = run(5);
        assert_eq!(stalled(Some(&r), &mut moved, at(300), limit), None);
        assert_eq!(moved.progressed_at, Some(Time(at(300))));
        // Still five files 599 s later: not yet; at 600 s: stalled for 600 s.
        let mut same = run(5);
        assert_eq!(stalled(Some(&moved), &mut same, at(899), limit), None);
        assert_eq!(same.progressed_at, Some(Time(at(300))));
        let before = same.clone();
        assert_eq!(
            stalled(Some(&before), &mut same, at(900), limit),
            Some(Duration::from_secs(600))
        );
        // A failure counted is a change, and so is a new run with the same counts.
        let mut failed = run(5);
        failed.failures = 1;
        assert_eq!(stalled(Some(&same), &mut failed, at(1000), limit), None);
        let mut rerun = run(5);
        rerun.reruns = 1;
        assert_eq!(stalled(Some(&same), &mut rerun, at(1000), limit), None);
        assert_eq!(rerun.progressed_at, Some(Time(at(1000))));
        // A clock that went back never reads as stalled.
        let mut back = run(5);
        assert_eq!(stalled(Some(&same), &mut back, at(0), limit), None);
        // The gauge: a run in progress whose counts last changed a limit ago.
        assert!(!stalled_since(&same, at(899), limit));
        assert!(stalled_since(&same, at(900), limit));
        let mut done = same.clone();
        done.phase = gk_api::crd::MigrationPhase::Completed;
        assert!(!stalled_since(&done, at(900), limit));
        assert!(!stalled_since(&run(5), at(900), limit), "never timed");
    }

    #[test]
    fn a_node_in_progress_whose_run_time_stopped_is_lost() {
        let t0: Timestamp = "2026-12-06T05:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + k8s_openapi::jiff::SignedDuration::from_secs(s);
        let started = Time(t0);
        let nodes = [
            ("10.0.0.1", "completed", 2.0),
            ("10.0.0.2", "in progress", 1.0),
            ("10.0.0.3", "in progress", 85.0),
        ];
        // Within the grace every node may still be starting.
        assert_eq!(lost(nodes, Some(&started), at(61)), None);
        // 90 s after the start: one node's run time stands at 1 s, another's kept up.
        let why = lost(nodes, Some(&started), at(90)).unwrap();
        assert!(
            why.starts_with("gluster on 10.0.0.2 reports the run in progress, 90 s after")
                && why.contains("more than 60 s before")
                && !why.contains("10.0.0.3"),
            "{why}"
        );
        // A finished node is never lost, and nothing is without a start time.
        assert_eq!(
            lost([("h", "completed", 0.0)], Some(&started), at(900)),
            None
        );
        assert_eq!(lost(nodes, None, at(900)), None);
        // A clock that went back reads as no time passed.
        assert_eq!(lost(nodes, Some(&Time(at(900))), t0), None);
    }

    #[test]
    fn a_migration_is_under_way_until_it_completes_fails_or_is_refused() {
        use gk_api::crd::MigrationPhase::*;
        for (phase, under_way) in [
            (Pending, true),
            (InProgress, true),
            (Verifying, true),
            (Completed, false),
            (Failed, false),
            (Refused, false),
        ] {
            let r = ResizeStatus { phase, ..run(0) };
            assert_eq!(migrating(Some(&r)), under_way, "{phase:?}");
        }
        assert!(!migrating(None));
    }

    #[test]
    fn failed_files_are_moved_again_twice_at_most() {
        assert!(rerun(4, 0));
        assert!(rerun(1, 1));
        assert!(!rerun(1, 2), "three runs in all");
        assert!(!rerun(0, 0), "skips only: another run changes nothing");
        // A run that failed as a whole runs again even with no file counted failed.
        assert!(rerun(unmoved("failed", 0), 0));
        assert!(rerun(unmoved("stopped", 0), 1));
        assert_eq!(unmoved("completed", 0), 0);
        assert_eq!(unmoved("completed", 3), 3);
    }

    #[test]
    fn errors_of_the_latest_run_without_time_and_source() {
        let log = "\
[2026-12-05 12:40:01.1 +0000] I [MSGID: 100030] [glusterfsd.c:2767:main] 0-/usr/sbin/glusterfs: Started running version 10.3
[2026-12-05 12:40:02.1 +0000] E [MSGID: 109023] [dht-rebalance.c:2700:gf_defrag_migrate_single_file] 0-v-dht: from an earlier run
[2026-12-05 12:44:01.1 +0000] I [MSGID: 100030] [glusterfsd.c:2767:main] 0-/usr/sbin/glusterfs: Started running version 10.3
[2026-12-05 12:44:02.1 +0000] E [MSGID: 109023] [dht-rebalance.c:2700:gf_defrag_migrate_single_file] 0-v-dht: Migrate file failed: /a lookup failed [Stale file handle]
[2026-12-05 12:44:02.2 +0000] W [MSGID: 109023] [dht-rebalance.c:900:__dht_check_free_space] 0-v-dht: a warning
[2026-12-05 12:44:03.1 +0000] E [dht-rebalance.c:2800:gf_defrag_migrate_single_file] 0-v-dht: migrate-data failed for /b [No space left on device]
[2026-12-05 12:44:04.1 +0000] E [MSGID: 109023] [dht-rebalance.c:2700:gf_defrag_migrate_single_file] 0-v-dht: Migrate file failed: /a lookup failed [Stale file handle]
";
        assert_eq!(
            migration_errors(log, 5),
            [
                "migrate-data failed for /b [No space left on device]",
                "Migrate file failed: /a lookup failed [Stale file handle]",
            ]
        );
        assert_eq!(migration_errors(log, 1).len(), 1);
        assert!(migration_errors("no error here\n", 3).is_empty());
    }

    #[test]
    fn migrations_succeed_only_when_every_file_moved() {
        assert_eq!(migration("not started", 0, 0, false), Migration::Start);
        assert_eq!(migration("in progress", 3, 0, true), Migration::Running);
        // The agent's answer to a start whose status gluster could not give yet.
        assert_eq!(migration("started", 0, 0, true), Migration::Running);
        assert_eq!(
            migration("fix-layout in progress", 0, 0, false),
            Migration::Running
        );
        assert_eq!(migration("completed", 0, 0, true), Migration::Done);
        // Skipped files are fine for a rebalance (they stay put), not for a shrink.
        assert_eq!(migration("completed", 0, 4, false), Migration::Done);
        let Migration::Failed(why) = migration("completed", 0, 4, true) else {
            panic!("a shrink with skipped files must not commit")
        };
        assert!(why.contains("4 skipped") && why.contains("commit"), "{why}");
        let Migration::Failed(why) = migration("completed", 2, 0, false) else {
            panic!("failures are never success")
        };
        assert!(why.contains("2 failed"), "{why}");
        assert!(matches!(
            migration("failed", 0, 0, false),
            Migration::Failed(w) if w.contains("\"failed\"")
        ));
        // A shrink that ended as a whole without moving every file is never committed,
        // and says so.
        let Migration::Failed(why) = migration("failed", 17, 0, true) else {
            panic!("a failed shrink must not commit")
        };
        assert!(
            why.contains("\"failed\" with 17 failed")
                && why.contains("the commit is refused")
                && why.contains("remove-brick rebalance log"),
            "{why}"
        );
        assert!(matches!(
            migration("stopped", 0, 0, true),
            Migration::Failed(w) if w.contains("the commit is refused")
        ));
    }

    #[test]
    fn a_run_is_judged_only_once_no_node_is_still_at_it() {
        // As seen in CI: one node failed at its start, two still moved files.
        let nodes = ["in progress", "in progress", "failed", "completed"];
        assert_eq!(overall("failed", nodes), "in progress");
        assert_eq!(
            overall("failed", ["completed", "failed", "completed"]),
            "failed"
        );
        assert_eq!(overall("completed", ["completed"]), "completed");
        assert_eq!(overall("in progress", ["in progress"]), "in progress");
        assert_eq!(overall("not started", []), "not started");
    }
}
