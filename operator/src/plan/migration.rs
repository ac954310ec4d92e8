//! Reading gluster's status of a rebalance or remove-brick migration.

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
    match status {
        "not started" => Migration::Start,
        "completed" if failures == 0 && (!shrink || skipped == 0) => Migration::Done,
        "completed" => Migration::Failed(format!(
            "gluster finished {what} with {failures} failed and {skipped} skipped files{}",
            if shrink {
                "; those files are still only on the bricks being removed, so the commit \
                 is refused: free space on the remaining bricks, then set the brick count \
                 again (or back)"
            } else {
                "; the files stay readable where they are"
            }
        )),
        s if s.contains("failed") || s.contains("stopped") => Migration::Failed(format!(
            "gluster reports {what} as {s:?} with {failures} failed and {skipped} skipped \
             files; see the {}rebalance log under /var/log/glusterfs on the brick nodes",
            if shrink { "remove-brick " } else { "" }
        )),
        _ => Migration::Running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_succeed_only_when_every_file_moved() {
        assert_eq!(migration("not started", 0, 0, false), Migration::Start);
        assert_eq!(migration("in progress", 3, 0, true), Migration::Running);
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
        assert!(matches!(
            migration("stopped", 0, 0, true),
            Migration::Failed(_)
        ));
    }
}
