//! Instance facts for queue messages, cache first: looked-up instances are kept (10 min; 1 min
//! for instances EC2 does not know), the cluster's instances are prefetched from the Nodes'
//! providerIDs, and misses arriving together are batched into one DescribeInstances with an
//! `instance-id` filter (200 ids a call) — never one call per message (upstream makes one per
//! message).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use stratus_aws_api::ec2::{filter, Ec2};
use stratus_cloud::CloudError;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::time::Instant;

use super::messages::InstanceInfo;

const FOUND_TTL: Duration = Duration::from_secs(600);
const MISSING_TTL: Duration = Duration::from_secs(60);
/// How long a lookup waits for others to share its DescribeInstances.
const BATCH_WINDOW: Duration = Duration::from_millis(50);
/// Filter values per call.
const IDS_PER_CALL: usize = 200;

type Entry = (Option<InstanceInfo>, Instant);
type Reply = oneshot::Sender<Result<(), CloudError>>;

/// The shared instance cache.
#[derive(Clone)]
pub struct Instances {
    cache: Arc<Mutex<HashMap<String, Entry>>>,
    requests: mpsc::UnboundedSender<(Vec<String>, Reply)>,
}

impl Instances {
    /// Starts the batcher on the current runtime.
    pub fn start(ec2: Ec2) -> Instances {
        let cache: Arc<Mutex<HashMap<String, Entry>>> = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(batcher(ec2, cache.clone(), rx));
        Instances {
            cache,
            requests: tx,
        }
    }

    /// The facts of `ids` (None: EC2 does not know the instance).
    pub async fn lookup(
        &self,
        ids: &[String],
    ) -> Result<BTreeMap<String, Option<InstanceInfo>>, CloudError> {
        let misses: Vec<String> = {
            let cache = self.cache.lock().await;
            let now = Instant::now();
            ids.iter()
                .filter(|id| cache.get(*id).is_none_or(|(_, until)| *until <= now))
                .cloned()
                .collect()
        };
        if !misses.is_empty() {
            let (tx, rx) = oneshot::channel();
            self.requests
                .send((misses, tx))
                .map_err(|_| unavailable("the instance batcher stopped"))?;
            rx.await
                .map_err(|_| unavailable("the instance batcher stopped"))??;
        }
        let cache = self.cache.lock().await;
        Ok(ids
            .iter()
            .map(|id| (id.clone(), cache.get(id).and_then(|(i, _)| i.clone())))
            .collect())
    }

    /// Loads `ids` not cached yet (the cluster's instances, from the Nodes).
    pub async fn prefetch(&self, ids: Vec<String>) -> Result<(), CloudError> {
        self.lookup(&ids).await.map(drop)
    }

    /// Cached instances carrying `tag` (for `nth_tagged_instances`).
    pub async fn count_tagged(&self, tag: &str) -> usize {
        self.cache
            .lock()
            .await
            .values()
            .filter(|(i, _)| i.as_ref().is_some_and(|i| i.tags.contains_key(tag)))
            .count()
    }

    /// Whether `id` is cached with `tag`.
    pub async fn is_tagged(&self, id: &str, tag: &str) -> bool {
        self.cache
            .lock()
            .await
            .get(id)
            .and_then(|(i, _)| i.as_ref())
            .is_some_and(|i| i.tags.contains_key(tag))
    }
}

fn unavailable(message: &str) -> CloudError {
    CloudError::Unavailable {
        operation: "DescribeInstances".into(),
        message: message.into(),
    }
}

async fn batcher(
    ec2: Ec2,
    cache: Arc<Mutex<HashMap<String, Entry>>>,
    mut rx: mpsc::UnboundedReceiver<(Vec<String>, Reply)>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        let window = tokio::time::sleep(BATCH_WINDOW);
        tokio::pin!(window);
        loop {
            tokio::select! {
                _ = &mut window => break,
                next = rx.recv() => match next {
                    Some(r) => batch.push(r),
                    None => break,
                },
            }
        }
        let mut ids: Vec<String> = batch.iter().flat_map(|(ids, _)| ids.clone()).collect();
        ids.sort();
        ids.dedup();
        let result = describe(&ec2, &ids).await;
        match result {
            Ok(found) => {
                let now = Instant::now();
                let mut cache = cache.lock().await;
                for id in &ids {
                    match found.get(id) {
                        Some(info) => {
                            cache.insert(id.clone(), (Some(info.clone()), now + FOUND_TTL))
                        }
                        None => cache.insert(id.clone(), (None, now + MISSING_TTL)),
                    };
                }
                drop(cache);
                for (_, reply) in batch {
                    let _ = reply.send(Ok(()));
                }
            }
            Err(e) => {
                for (_, reply) in batch {
                    let _ = reply.send(Err(e.clone()));
                }
            }
        }
    }
}

async fn describe(ec2: &Ec2, ids: &[String]) -> Result<HashMap<String, InstanceInfo>, CloudError> {
    let mut found = HashMap::new();
    for chunk in ids.chunks(IDS_PER_CALL) {
        let infos = ec2
            .describe_instances(
                &[filter("instance-id", chunk.iter().cloned())],
                |instance| {
                    let id = instance.instance_id()?;
                    Some(InstanceInfo {
                        instance_id: id.to_owned(),
                        private_dns_name: instance
                            .private_dns_name()
                            .unwrap_or_default()
                            .to_owned(),
                        availability_zone: instance
                            .placement()
                            .and_then(|p| p.availability_zone())
                            .unwrap_or_default()
                            .to_owned(),
                        instance_type: instance
                            .instance_type()
                            .map(|t| t.as_str().to_owned())
                            .unwrap_or_default(),
                        state: instance
                            .state()
                            .and_then(|s| s.name())
                            .map(|n| n.as_str().to_owned())
                            .unwrap_or_default(),
                        tags: instance
                            .tags()
                            .iter()
                            .filter_map(|t| {
                                Some((
                                    t.key()?.to_owned(),
                                    t.value().unwrap_or_default().to_owned(),
                                ))
                            })
                            .collect(),
                    })
                },
            )
            .await?;
        found.extend(
            infos
                .into_iter()
                .map(|info| (info.instance_id.clone(), info)),
        );
    }
    Ok(found)
}
