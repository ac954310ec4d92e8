//! Whether the operator's watches deliver: /healthz fails once a watch has kept failing for
//! [`FAILING_FOR`], so the kubelet restarts an operator that no longer sees changes (an
//! expired token, a lost connection the watcher does not recover from). The watchers retry
//! with backoff (at most 30 s apart), so a failure still going on keeps producing errors;
//! one not seen for [`RECOVERED_AFTER`] is taken as over even when no reconcile followed (an
//! operator with nothing to reconcile gets none).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a watch may keep failing before /healthz does.
pub const FAILING_FOR: Duration = Duration::from_secs(300);
/// How long after its last error a failing watch is taken as recovered.
pub const RECOVERED_AFTER: Duration = Duration::from_secs(90);

/// What the controllers reported, shared with the /healthz handler.
#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<WatchState>,
}

/// The current run of watch errors, if any.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WatchState {
    /// The first error of the run, and the latest with what it said.
    pub failing: Option<(Instant, Instant, String)>,
}

impl Health {
    /// A controller's watch failed with `error`.
    pub fn watch_failed(&self, controller: &str, error: &str, now: Instant) {
        let mut s = self.state.lock().expect("health lock");
        let first = s.failing.as_ref().map_or(now, |f| f.0);
        s.failing = Some((first, now, format!("{controller}: {error}")));
    }

    /// A controller delivered an object to reconcile: its watches work.
    pub fn delivered(&self) {
        self.state.lock().expect("health lock").failing = None;
    }

    /// What /healthz answers now.
    pub fn verdict(&self, now: Instant) -> Result<(), WatchesStalled> {
        verdict(&self.state.lock().expect("health lock"), now)
    }
}

/// Why /healthz fails: the watches have kept failing; the message says what failed and what
/// to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the operator's watches have failed for {seconds} s (latest: {latest}); it sees no \
     changes to GlusterClusters, GlusterVolumes or their pods. Restarting it; if this \
     repeats, check its RBAC and its connection to the API server"
)]
pub struct WatchesStalled {
    pub seconds: u64,
    /// The latest error, with the controller that saw it.
    pub latest: String,
}

/// Unhealthy when the current run of watch errors started [`FAILING_FOR`] ago and its latest
/// error is less than [`RECOVERED_AFTER`] old.
pub fn verdict(state: &WatchState, now: Instant) -> Result<(), WatchesStalled> {
    match &state.failing {
        Some((first, last, error))
            if now.duration_since(*first) >= FAILING_FOR
                && now.duration_since(*last) < RECOVERED_AFTER =>
        {
            Err(WatchesStalled {
                seconds: now.duration_since(*first).as_secs(),
                latest: error.clone(),
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_watch_failing_on_and_on_is_unhealthy() {
        let h = Health::default();
        let t0 = Instant::now();
        assert_eq!(h.verdict(t0), Ok(()));
        // Errors every 30 s (the watcher's backoff at most).
        let mut t = t0;
        while t.duration_since(t0) < FAILING_FOR {
            h.watch_failed("GlusterVolume", "403 Forbidden", t);
            assert_eq!(
                h.verdict(t),
                Ok(()),
                "not yet at {:?}",
                t.duration_since(t0)
            );
            t += Duration::from_secs(30);
        }
        h.watch_failed("GlusterVolume", "403 Forbidden", t);
        let why = h.verdict(t).unwrap_err();
        assert_eq!(why.latest, "GlusterVolume: 403 Forbidden");
        assert_eq!(why.seconds, FAILING_FOR.as_secs());
        let said = why.to_string();
        assert!(said.contains("GlusterVolume: 403 Forbidden"), "{said}");
        assert!(said.contains("RBAC"), "{said}");
        // A delivered object ends the run.
        h.delivered();
        assert_eq!(h.verdict(t), Ok(()));
    }

    #[test]
    fn errors_that_stopped_are_a_recovered_watch() {
        let h = Health::default();
        let t0 = Instant::now();
        h.watch_failed("GlusterCluster", "connection reset", t0);
        h.watch_failed(
            "GlusterCluster",
            "connection reset",
            t0 + Duration::from_secs(20),
        );
        // Nothing to reconcile after the watch came back: no delivery, no more errors.
        assert_eq!(h.verdict(t0 + FAILING_FOR + Duration::from_secs(1)), Ok(()));
        // A later run counts from its own first error.
        let t1 = t0 + Duration::from_secs(1000);
        h.delivered();
        h.watch_failed("GlusterCluster", "again", t1);
        assert_eq!(h.verdict(t1 + Duration::from_secs(60)), Ok(()));
    }
}
