//! Heal counts without holding up status. glfsheal asks every brick itself: a brick host
//! that dropped off the network (no reset) keeps it waiting on the connection, and a long
//! heal list takes minutes under load. So a count runs on its own task, one per volume at
//! a time. A reconcile waits a while for it, then goes on with the last count it has, and
//! a later reconcile picks up the finished one. Abandoning the call would leave its
//! glfsheal running, and a new one each refresh would pile up.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

struct Slot<T> {
    running: Option<watch::Receiver<Option<Option<T>>>>,
    last: Option<T>,
}

/// One count at a time per key, and the last that finished.
pub struct SingleFlight<T> {
    slots: Arc<Mutex<HashMap<String, Slot<T>>>>,
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        Self {
            slots: Arc::default(),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> SingleFlight<T> {
    /// Starts `count` for `key` unless one runs, and waits up to `wait` for the running one.
    /// Its result when it ends in time (None when the count failed), else the last result
    /// that came in for `key`.
    pub async fn get<F>(&self, key: &str, wait: Duration, count: impl FnOnce() -> F) -> Option<T>
    where
        F: Future<Output = Option<T>> + Send + 'static,
    {
        let mut rx = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let slot = slots.entry(key.to_string()).or_insert_with(|| Slot {
                running: None,
                last: None,
            });
            match &slot.running {
                Some(rx) => rx.clone(),
                None => {
                    let (tx, rx) = watch::channel(None);
                    slot.running = Some(rx.clone());
                    let (slots, key, job) = (self.slots.clone(), key.to_string(), count());
                    tokio::spawn(async move {
                        let result = job.await;
                        let mut all = slots.lock().unwrap_or_else(|p| p.into_inner());
                        if let Some(slot) = all.get_mut(&key) {
                            slot.running = None;
                            if result.is_some() {
                                slot.last = result.clone();
                            }
                        }
                        drop(all);
                        let _ = tx.send(Some(result));
                    });
                    rx
                }
            }
        };
        let done = match tokio::time::timeout(wait, rx.wait_for(Option::is_some)).await {
            Ok(Ok(r)) => r.clone().flatten(),
            _ => None,
        };
        if done.is_some() {
            return done;
        }
        self.last(key)
    }

    /// The last result that came in for `key`.
    pub fn last(&self, key: &str) -> Option<T> {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .and_then(|s| s.last.clone())
    }

    /// Drops the last result of `key`, keeping a count that runs: counts from before a brick
    /// went offline say nothing about what it must heal once back.
    pub fn clear_last(&self, key: &str) {
        if let Some(s) = self
            .slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(key)
        {
            s.last = None;
        }
    }

    /// Forgets `key` (its volume is gone).
    pub fn forget(&self, key: &str) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_slow_count_gives_the_last_one_and_is_not_started_twice() {
        let f = SingleFlight::<u32>::default();
        assert_eq!(
            f.get("v", Duration::from_secs(1), || async { Some(1) })
                .await,
            Some(1)
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let started = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let s = started.clone();
        let slow = move || async move {
            s.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = rx.await;
            Some(2)
        };
        // Still counting: the last count stands in.
        assert_eq!(f.get("v", Duration::from_millis(50), slow).await, Some(1));
        // A second reconcile joins the running count instead of starting one.
        let joined = f
            .get("v", Duration::from_millis(50), || async { Some(99) })
            .await;
        assert_eq!(joined, Some(1));
        assert_eq!(started.load(std::sync::atomic::Ordering::SeqCst), 1);
        tx.send(()).unwrap();
        // The current-thread test runtime lets the count finish here.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(f.last("v"), Some(2));
        assert_eq!(
            f.get("v", Duration::from_secs(1), || async { Some(99) })
                .await,
            Some(99),
            "once the slow count ended, a new one runs"
        );
        assert_eq!(f.last("v"), Some(99));
        // A failed count keeps the last good one.
        assert_eq!(
            f.get("v", Duration::from_secs(1), || async { None }).await,
            Some(99)
        );
        f.clear_last("v");
        assert_eq!(
            f.get("v", Duration::from_secs(1), || async { None }).await,
            None
        );
        f.forget("v");
        assert_eq!(f.last("v"), None);
    }
}
