//! Per-volume operation locks: a second operation on a volume while one runs is answered with
//! Aborted at once (the CO retries), so a retried CreateVolume or NodeStage never races itself.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tonic::Status;

/// The set of keys (volume IDs or names) with an operation in flight.
#[derive(Debug, Default, Clone)]
pub struct OperationLocks {
    held: Arc<Mutex<HashSet<String>>>,
}

/// Releases its key when dropped.
#[derive(Debug)]
pub struct Guard {
    held: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl OperationLocks {
    /// Takes the lock on `key` or answers Aborted naming it.
    pub fn try_lock(&self, key: &str) -> Result<Guard, Status> {
        let mut held = self.held.lock().expect("locks");
        if !held.insert(key.to_string()) {
            return Err(Status::aborted(format!(
                "an operation on {key} is already in progress"
            )));
        }
        Ok(Guard {
            held: self.held.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.held.lock().expect("locks").remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_is_aborted_until_release() {
        let locks = OperationLocks::default();
        let g = locks.try_lock("vol-1").unwrap();
        assert_eq!(
            locks.try_lock("vol-1").unwrap_err().code(),
            tonic::Code::Aborted
        );
        assert!(locks.try_lock("vol-2").is_ok());
        drop(g);
        assert!(locks.try_lock("vol-1").is_ok());
    }
}
