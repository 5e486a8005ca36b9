//! A small bounded map whose entries expire: the memory of recent authentication and
//! authorization answers. Pure: the caller passes the clock.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;
use tokio::time::Instant;

/// At most `capacity` entries, each valid until its own deadline.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: HashMap<K, (V, Instant)>,
    capacity: usize,
}

impl<K: Hash + Eq + Clone, V: Clone> TtlCache<K, V> {
    /// An empty cache of at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            entries: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The value of `key` if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        self.entries
            .get(key)
            .filter(|(_, deadline)| now < *deadline)
            .map(|(value, _)| value.clone())
    }

    /// Remembers `value` for `ttl` from `now`; a zero `ttl` remembers nothing. When the cache is
    /// full, expired entries go first, then the one closest to expiring.
    pub fn insert(&mut self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, deadline)| now < *deadline);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, deadline))| *deadline)
                    .map(|(k, _)| k.clone());
                if let Some(k) = soonest {
                    self.entries.remove(&k);
                }
            }
        }
        self.entries.insert(key, (value, now + ttl));
    }

    /// Entries held (expired ones included until evicted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn entries_expire_at_their_deadline() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(4);
        c.insert("a", 1, 10 * S, t0);
        assert_eq!(c.get(&"a", t0), Some(1));
        assert_eq!(c.get(&"a", t0 + 9 * S), Some(1));
        assert_eq!(c.get(&"a", t0 + 10 * S), None);
        assert_eq!(c.get(&"b", t0), None);
    }

    #[test]
    fn zero_ttl_caches_nothing() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(4);
        c.insert("a", 1, Duration::ZERO, t0);
        assert!(c.is_empty());
    }

    #[test]
    fn stays_within_capacity_dropping_expired_then_soonest() {
        let t0 = Instant::now();
        let mut c = TtlCache::new(3);
        c.insert("short", 0, S, t0);
        c.insert("long", 1, 100 * S, t0);
        c.insert("mid", 2, 50 * S, t0);
        // Full: the expired entry makes room.
        c.insert("new", 3, 100 * S, t0 + 2 * S);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"short", t0), None);
        // Full and nothing expired: the entry closest to expiring goes.
        c.insert("newer", 4, 100 * S, t0 + 3 * S);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"mid", t0 + 3 * S), None);
        assert_eq!(c.get(&"long", t0 + 3 * S), Some(1));
        // Updating a present key never evicts another.
        c.insert("long", 5, 100 * S, t0 + 3 * S);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&"long", t0 + 3 * S), Some(5));
        let mut many = TtlCache::new(3);
        for i in 0..1000 {
            many.insert(i, i, 100 * S, t0 + Duration::from_millis(i));
        }
        assert_eq!(many.len(), 3);
        assert_eq!(many.get(&999, t0), Some(999));
    }
}
