use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// One lock per volume name, so operations on one volume run one at a time while
/// different volumes proceed in parallel.
#[derive(Debug, Default, Clone)]
pub struct VolumeLocks {
    inner: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

impl VolumeLocks {
    pub async fn lock(&self, volume: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut map = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            // Drop entries nobody holds or waits on, so the map does not grow without bound.
            map.retain(|_, l| Arc::strong_count(l) > 1);
            map.entry(volume.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn same_volume_waits_other_volume_does_not() {
        let locks = VolumeLocks::default();
        let held = locks.lock("a").await;
        let other = tokio::time::timeout(Duration::from_millis(100), locks.lock("b")).await;
        assert!(other.is_ok(), "a different volume was blocked");
        let same = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(same.is_err(), "the same volume was not serialised");
        drop(held);
        let same = tokio::time::timeout(Duration::from_millis(100), locks.lock("a")).await;
        assert!(same.is_ok(), "the lock was not released");
    }
}
