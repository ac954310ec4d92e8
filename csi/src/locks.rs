//! One operation per volume at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tonic::Status;

/// Per-volume operation lock: a second call on a volume already being worked on is answered
/// with ABORTED, as the spec asks, instead of queuing behind it.
#[derive(Default, Clone)]
pub struct OpLocks(Arc<Mutex<HashSet<String>>>);

pub struct OpGuard(Arc<Mutex<HashSet<String>>>, String);

impl Drop for OpGuard {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}

impl OpLocks {
    pub fn try_lock(&self, key: &str) -> Result<OpGuard, Status> {
        let mut set = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if !set.insert(key.to_string()) {
            return Err(Status::aborted(format!(
                "an operation on {key} is already in progress"
            )));
        }
        Ok(OpGuard(self.0.clone(), key.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_lock_aborts_a_second_caller_and_frees_on_drop() {
        let locks = OpLocks::default();
        let g = locks.try_lock("v").unwrap();
        assert_eq!(
            locks.try_lock("v").err().unwrap().code(),
            tonic::Code::Aborted
        );
        locks.try_lock("w").unwrap();
        drop(g);
        locks.try_lock("v").unwrap();
    }
}
