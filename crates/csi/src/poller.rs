//! The shared state poller: every wait of a controller process (a volume becoming available,
//! attached, detached...) registers its key here, and one fetch per tick answers every key
//! that is due, so N concurrent waits cost one describe per tick instead of one per wait. A
//! key's first look comes at least `settle` after it registers (the cloud needs that long
//! anyway); fetches are at least `tick` apart; nothing is fetched while nothing waits.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::batch::FetchFn;

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waited<V> {
    /// The condition held on this value (`None`: the key does not exist).
    Done(Option<V>),
    /// The deadline passed; the last value seen, if any look happened.
    TimedOut(Option<Option<V>>),
}

struct Waiter<K, V, E> {
    key: K,
    due: Instant,
    tx: oneshot::Sender<Result<Option<V>, E>>,
}

struct State<K, V, E> {
    waiters: Vec<Waiter<K, V, E>>,
    running: bool,
    /// When the next fetch may happen (a tick after the last one), across idle spells.
    earliest: Instant,
}

struct Inner<K, V, E> {
    fetch: FetchFn<K, V, E>,
    settle: Duration,
    tick: Duration,
    max_batch: usize,
    state: Mutex<State<K, V, E>>,
}

/// One poller shared by every wait on keys of one kind.
pub struct Poller<K, V, E> {
    inner: Arc<Inner<K, V, E>>,
}

impl<K, V, E> Clone for Poller<K, V, E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<K, V, E> Poller<K, V, E>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: Clone + Send + From<String> + 'static,
{
    /// A poller whose looks come `settle` after a registration at the earliest, whose fetches
    /// are `tick` apart at the closest and name at most `max_batch` keys each.
    pub fn new(
        settle: Duration,
        tick: Duration,
        max_batch: usize,
        fetch: FetchFn<K, V, E>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                fetch,
                settle,
                tick,
                max_batch: max_batch.max(1),
                state: Mutex::new(State {
                    waiters: Vec::new(),
                    running: false,
                    earliest: Instant::now(),
                }),
            }),
        }
    }

    /// The value of `key` (`None`: it does not exist) as the first fetch at least `settle`
    /// from now answers it.
    pub async fn look(&self, key: K) -> Result<Option<V>, E> {
        let (tx, rx) = oneshot::channel();
        let start = {
            let mut state = self.inner.state.lock().expect("poller lock");
            state.waiters.push(Waiter {
                key,
                due: Instant::now() + self.inner.settle,
                tx,
            });
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            tokio::spawn(run(self.inner.clone()));
        }
        rx.await
            .unwrap_or_else(|_| Err(E::from("volume poller stopped".to_string())))
    }

    /// Looks at `key` tick after tick until `done` holds (or fails) or `deadline` passes.
    pub async fn wait(
        &self,
        key: K,
        deadline: Instant,
        done: impl Fn(Option<&V>) -> Result<bool, E>,
    ) -> Result<Waited<V>, E> {
        let mut last = None;
        loop {
            match tokio::time::timeout_at(deadline, self.look(key.clone())).await {
                Err(_) => return Ok(Waited::TimedOut(last)),
                Ok(value) => {
                    let value = value?;
                    if done(value.as_ref())? {
                        return Ok(Waited::Done(value));
                    }
                    last = Some(value);
                }
            }
        }
    }
}

/// The poll loop: runs while keys wait, one fetch per tick for the due ones.
async fn run<K, V, E>(inner: Arc<Inner<K, V, E>>)
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: Clone + Send + From<String> + 'static,
{
    loop {
        let (due, earliest) = {
            let mut state = inner.state.lock().expect("poller lock");
            state.waiters.retain(|w| !w.tx.is_closed());
            match state.waiters.iter().map(|w| w.due).min() {
                Some(due) => (due, state.earliest),
                None => {
                    state.running = false;
                    return;
                }
            }
        };
        tokio::time::sleep_until(due.max(earliest)).await;
        let now = Instant::now();
        let batch: Vec<Waiter<K, V, E>> = {
            let mut state = inner.state.lock().expect("poller lock");
            let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut state.waiters)
                .into_iter()
                .partition(|w| w.due <= now);
            state.waiters = later;
            if !ready.is_empty() {
                state.earliest = now + inner.tick;
            }
            ready
        };
        if batch.is_empty() {
            continue;
        }
        let mut seen = HashSet::new();
        let keys: Vec<K> = batch
            .iter()
            .filter(|w| seen.insert(w.key.clone()))
            .map(|w| w.key.clone())
            .collect();
        let mut answers: HashMap<K, Result<Option<V>, E>> = HashMap::new();
        let mut rest = keys;
        while !rest.is_empty() {
            let tail = rest.split_off(rest.len().min(inner.max_batch));
            let chunk = std::mem::replace(&mut rest, tail);
            let answer = (inner.fetch)(chunk.clone()).await;
            for key in chunk {
                let value = match &answer {
                    Ok(found) => Ok(found.get(&key).cloned()),
                    Err(e) => Err(e.clone()),
                };
                answers.insert(key, value);
            }
        }
        for waiter in batch {
            let answer = answers
                .get(&waiter.key)
                .cloned()
                .unwrap_or_else(|| Ok(None));
            let _ = waiter.tx.send(answer);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A poller over a map the test changes; counts fetches and the keys they named.
    fn poller(
        values: Arc<Mutex<HashMap<String, u32>>>,
        calls: Arc<AtomicUsize>,
    ) -> Poller<String, u32, String> {
        let fetch: FetchFn<String, u32, String> = Arc::new(move |keys: Vec<String>| {
            let (values, calls) = (values.clone(), calls.clone());
            Box::pin(async move {
                calls.fetch_add(1, Ordering::SeqCst);
                let values = values.lock().unwrap();
                Ok(keys
                    .into_iter()
                    .filter_map(|k| values.get(&k).map(|v| (k, *v)))
                    .collect())
            })
        });
        Poller::new(Duration::from_secs(1), Duration::from_secs(2), 100, fetch)
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waits_share_one_fetch_per_tick() {
        let values = Arc::new(Mutex::new(HashMap::new()));
        let calls = Arc::new(AtomicUsize::new(0));
        let p = poller(values.clone(), calls.clone());
        for i in 0..50 {
            values.lock().unwrap().insert(format!("k{i}"), 0);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let waits: Vec<_> = (0..50)
            .map(|i| {
                let p = p.clone();
                tokio::spawn(async move {
                    p.wait(format!("k{i}"), deadline, |v| Ok(v == Some(&1)))
                        .await
                })
            })
            .collect();
        // Nothing is ready at the first look; every key turns ready before the second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one fetch for 50 waits");
        for v in values.lock().unwrap().values_mut() {
            *v = 1;
        }
        for w in waits {
            assert_eq!(w.await.unwrap(), Ok(Waited::Done(Some(1))));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // Nothing waits: no more fetches.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn fetches_are_a_tick_apart_and_the_first_look_waits_to_settle() {
        let values = Arc::new(Mutex::new(HashMap::from([("a".to_string(), 0)])));
        let calls = Arc::new(AtomicUsize::new(0));
        let p = poller(values.clone(), calls.clone());
        let started = Instant::now();
        assert_eq!(p.look("a".into()).await, Ok(Some(0)));
        assert_eq!(started.elapsed(), Duration::from_secs(1), "settle");
        // A second look right after the first fetch waits for the tick, not only the settle.
        assert_eq!(p.look("missing".into()).await, Ok(None));
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(3),
            "tick after the first fetch"
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_past_its_deadline_times_out_with_the_last_value() {
        let values = Arc::new(Mutex::new(HashMap::from([("a".to_string(), 7)])));
        let calls = Arc::new(AtomicUsize::new(0));
        let p = poller(values, calls.clone());
        let deadline = Instant::now() + Duration::from_secs(4);
        let waited = p.wait("a".into(), deadline, |v| Ok(v == Some(&1))).await;
        assert_eq!(waited, Ok(Waited::TimedOut(Some(Some(7)))));
        // The abandoned registration is dropped, not fetched forever.
        tokio::time::sleep(Duration::from_secs(30)).await;
        let after = calls.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(calls.load(Ordering::SeqCst), after);
        // A condition that fails ends the wait with its error.
        let failed = p
            .wait("a".into(), Instant::now() + Duration::from_secs(9), |_| {
                Err("broken".to_string())
            })
            .await;
        assert_eq!(failed, Err("broken".to_string()));
    }
}
