//! Settling a migration: check runs after every file has moved, and how lookups behave
//! meanwhile.
//!
//! Each node's rebalance process fixes a directory's layout on its own. In gluster 10.3
//! they can disagree on which set gets which hash range, and a process that disagrees
//! moves files to a set the final layout does not name for them, leaving no link file
//! behind. With `cluster.lookup-optimize` on (gluster's default), a lookup that misses on
//! the set a name hashes to answers ENOENT: those files vanish for clients, fresh mounts
//! included, although their data is intact. Seen in 4 of 9 expansions on four nodes
//! here. So while a migration runs, has failed or is being checked, lookups search
//! every set; once every file has moved, rebalance runs again until a run moves nothing,
//! and only then are lookups optimised again.

use gk_api::crd::{MigrationPhase, ResizeStatus};

/// Gluster's option that trusts a directory's layout for lookups that miss.
pub const LOOKUP_OPTIMIZE: &str = "cluster.lookup-optimize";

/// Check runs in all before a migration whose runs keep moving files is given up.
pub const CHECK_RUNS: u32 = 5;

/// What to do after a check run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// It moved nothing: every file sits where gluster looks first.
    Settled,
    /// It moved or failed to move files: run another.
    Again,
    /// The last check run still moved files; lookups keep searching every set.
    Unsettled(String),
}

/// Reads a finished check run, the `checks`-th: one that moved, failed or skipped nothing
/// settles the migration; otherwise another runs, up to [`CHECK_RUNS`].
pub fn after_check(moved: u64, failures: u64, skipped: u64, checks: u32) -> Check {
    if moved == 0 && failures == 0 && skipped == 0 {
        return Check::Settled;
    }
    if checks < CHECK_RUNS {
        return Check::Again;
    }
    Check::Unsettled(format!(
        "check run {checks} of {CHECK_RUNS} still moved {moved} files ({failures} failed, \
         {skipped} skipped): gluster's rebalance processes keep disagreeing on where files \
         belong. Every file stays readable: lookups keep searching every set \
         ({LOOKUP_OPTIMIZE} off), which costs a lookup per set for names that do not exist. \
         The rebalance logs under /var/log/glusterfs on the nodes say which files moved; set \
         the brick count again to run the migration anew"
    ))
}

/// What to set `cluster.lookup-optimize` to on a volume whose latest resize is `resize` and
/// whose own options set it to `own`: off while files may sit off the set gluster looks up
/// first (a migration pending, in progress, being checked, or failed part way), otherwise
/// the volume's own value, or gluster's default, on. It is always set (the agent sets
/// only what differs, so a settled volume is set once).
pub fn lookup_optimize(resize: Option<&ResizeStatus>, own: Option<&str>) -> String {
    let unsettled = resize.is_some_and(|r| {
        matches!(
            r.phase,
            MigrationPhase::Pending
                | MigrationPhase::InProgress
                | MigrationPhase::Verifying
                | MigrationPhase::Failed
        )
    });
    if unsettled {
        "off".into()
    } else {
        own.unwrap_or("on").into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resize(phase: MigrationPhase) -> ResizeStatus {
        ResizeStatus {
            phase,
            ..super::super::migration::tests::run(0)
        }
    }

    #[test]
    fn lookups_search_every_set_until_a_migration_settles() {
        for phase in [
            MigrationPhase::Pending,
            MigrationPhase::InProgress,
            MigrationPhase::Verifying,
            MigrationPhase::Failed,
        ] {
            let r = resize(phase);
            assert_eq!(lookup_optimize(Some(&r), None), "off", "{phase:?}");
            assert_eq!(
                lookup_optimize(Some(&r), Some("on")),
                "off",
                "the volume's own value waits for the migration: {phase:?}"
            );
        }
        for phase in [MigrationPhase::Completed, MigrationPhase::Refused] {
            assert_eq!(
                lookup_optimize(Some(&resize(phase)), None),
                "on",
                "{phase:?}"
            );
        }
        assert_eq!(lookup_optimize(None, None), "on");
        assert_eq!(lookup_optimize(None, Some("off")), "off");
        let done = resize(MigrationPhase::Completed);
        assert_eq!(lookup_optimize(Some(&done), Some("off")), "off");
    }

    #[test]
    fn check_runs_repeat_until_one_moves_nothing() {
        assert_eq!(after_check(0, 0, 0, 1), Check::Settled);
        assert_eq!(after_check(0, 0, 0, CHECK_RUNS), Check::Settled);
        assert_eq!(after_check(22, 0, 0, 1), Check::Again);
        assert_eq!(
            after_check(0, 1, 0, 2),
            Check::Again,
            "a failure is not settled"
        );
        assert_eq!(after_check(0, 0, 1, 2), Check::Again, "nor a skip");
        let Check::Unsettled(why) = after_check(3, 0, 0, CHECK_RUNS) else {
            panic!("the last check run still moved files")
        };
        assert!(
            why.contains("check run 5 of 5 still moved 3 files")
                && why.contains("cluster.lookup-optimize off")
                && why.contains("set the brick count again"),
            "{why}"
        );
    }
}
