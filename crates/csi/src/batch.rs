//! The shared describe batcher: lookups of single IDs that arrive within a short window are
//! answered by one call naming them all (up to a batch size), so 200 volumes attaching at once
//! cost a handful of describes instead of 200.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

/// Fetches many keys in one call; keys missing from the answer do not exist.
pub type FetchFn<K, V, E> = Arc<
    dyn Fn(Vec<K>) -> Pin<Box<dyn Future<Output = Result<HashMap<K, V>, E>> + Send>> + Send + Sync,
>;

type Waiters<V, E> = Vec<oneshot::Sender<Result<Option<V>, E>>>;

struct Pending<K, V, E> {
    keys: HashMap<K, Waiters<V, E>>,
    flush_scheduled: bool,
}

/// Coalesces single-key lookups into batched fetches.
pub struct Batcher<K, V, E> {
    window: Duration,
    max_batch: usize,
    fetch: FetchFn<K, V, E>,
    pending: Arc<Mutex<Pending<K, V, E>>>,
}

impl<K, V, E> Clone for Batcher<K, V, E> {
    fn clone(&self) -> Self {
        Self {
            window: self.window,
            max_batch: self.max_batch,
            fetch: self.fetch.clone(),
            pending: self.pending.clone(),
        }
    }
}

impl<K, V, E> Batcher<K, V, E>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: Clone + Send + From<String> + 'static,
{
    /// A batcher that waits `window` after the first key and sends at most `max_batch` keys per
    /// fetch.
    pub fn new(window: Duration, max_batch: usize, fetch: FetchFn<K, V, E>) -> Self {
        Self {
            window,
            max_batch: max_batch.max(1),
            fetch,
            pending: Arc::new(Mutex::new(Pending {
                keys: HashMap::new(),
                flush_scheduled: false,
            })),
        }
    }

    /// The value for `key` (`None`: it does not exist), fetched with the other keys asked for
    /// in the same window.
    pub async fn get(&self, key: K) -> Result<Option<V>, E> {
        let (tx, rx) = oneshot::channel();
        let flush_now = {
            let mut pending = self.pending.lock().expect("batcher lock");
            pending.keys.entry(key).or_default().push(tx);
            if pending.keys.len() >= self.max_batch {
                true
            } else if !pending.flush_scheduled {
                pending.flush_scheduled = true;
                let me = self.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(me.window).await;
                    me.flush().await;
                });
                false
            } else {
                false
            }
        };
        if flush_now {
            let me = self.clone();
            tokio::spawn(async move { me.flush().await });
        }
        rx.await
            .unwrap_or_else(|_| Err(E::from("describe batch dropped".to_string())))
    }

    async fn flush(&self) {
        let batch: HashMap<K, Waiters<V, E>> = {
            let mut pending = self.pending.lock().expect("batcher lock");
            pending.flush_scheduled = false;
            std::mem::take(&mut pending.keys)
        };
        if batch.is_empty() {
            return;
        }
        let mut batch: Vec<(K, Waiters<V, E>)> = batch.into_iter().collect();
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(self.max_batch));
            let keys: Vec<K> = batch.iter().map(|(k, _)| k.clone()).collect();
            let answer = (self.fetch)(keys).await;
            for (key, waiters) in batch {
                let value = match &answer {
                    Ok(found) => Ok(found.get(&key).cloned()),
                    Err(e) => Err(e.clone()),
                };
                for waiter in waiters {
                    let _ = waiter.send(value.clone());
                }
            }
            batch = rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting_batcher(calls: Arc<AtomicUsize>, max: usize) -> Batcher<String, usize, String> {
        let fetch: FetchFn<String, usize, String> = Arc::new(move |keys: Vec<String>| {
            let calls = calls.clone();
            Box::pin(async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(keys
                    .into_iter()
                    .filter(|k| k != "missing")
                    .map(|k| {
                        let n = k.len();
                        (k, n)
                    })
                    .collect())
            })
        });
        Batcher::new(Duration::from_millis(50), max, fetch)
    }

    #[tokio::test(start_paused = true)]
    async fn lookups_in_one_window_share_one_fetch() {
        let calls = Arc::new(AtomicUsize::new(0));
        let b = counting_batcher(calls.clone(), 100);
        let keys = ["a", "bb", "ccc", "missing", "a"];
        let answers = futures_join(
            keys.iter()
                .map(|k| b.get(k.to_string()))
                .collect::<Vec<_>>(),
        )
        .await;
        assert_eq!(
            answers,
            vec![Ok(Some(1)), Ok(Some(2)), Ok(Some(3)), Ok(None), Ok(Some(1))]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_split() {
        let calls = Arc::new(AtomicUsize::new(0));
        let b = counting_batcher(calls.clone(), 2);
        let keys: Vec<String> = (0..5).map(|i| format!("k{i}")).collect();
        let answers = futures_join(keys.iter().map(|k| b.get(k.clone())).collect()).await;
        assert!(answers.iter().all(|a| a == &Ok(Some(2))));
        assert!(calls.load(Ordering::SeqCst) >= 3, "5 keys, batches of 2");
    }

    async fn futures_join<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
        futures::future::join_all(futs).await
    }
}
