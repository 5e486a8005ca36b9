//! One shared view of the cluster's EC2 instances: listed on the server side by the cluster tag,
//! refreshed periodically, with lookups of unknown instances batched into few calls.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::time::Instant;

use aws_sdk_ec2::types::Filter;
use futures::future::join_all;
use stratus_cloud::{CloudError, NodeInfo};
use tokio::sync::{mpsc, oneshot, watch};

use crate::instance::Instance;
use stratus_aws_api::ec2::{filter, Ec2};
use stratus_aws_api::provider_id::{instance_id_from_node_name, AwsProviderId, InstanceId};

/// Which instances the periodic listing covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Instances tagged `kubernetes.io/cluster/<id>` (and, when `legacy`, `KubernetesCluster=<id>`).
    ClusterTag {
        /// The cluster ID.
        id: String,
        /// Also the legacy `KubernetesCluster=<id>` tag.
        legacy: bool,
    },
    /// Every instance of one VPC (untagged clusters with a configured VPC).
    Vpc(String),
    /// No listing: only batched lookups of the instances nodes name.
    Unscoped,
}

impl Scope {
    /// The server-side filter sets, one DescribeInstances listing each.
    fn listings(&self) -> Vec<Vec<Filter>> {
        match self {
            Scope::ClusterTag { id, legacy } => {
                let mut l = vec![vec![filter(
                    "tag-key",
                    [stratus_cloud::tags::cluster_tag_key(id)],
                )]];
                if *legacy {
                    l.push(vec![filter("tag:KubernetesCluster", [id.clone()])]);
                }
                l
            }
            Scope::Vpc(vpc) => vec![vec![filter("vpc-id", [vpc.clone()])]],
            Scope::Unscoped => vec![],
        }
    }
}

/// A way to find one instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LookupKey {
    /// By instance ID.
    Id(InstanceId),
    /// By private DNS name.
    PrivateDnsName(String),
    /// By private IP address.
    PrivateIp(String),
}

impl LookupKey {
    fn filter_name(&self) -> &'static str {
        match self {
            LookupKey::Id(_) => "instance-id",
            LookupKey::PrivateDnsName(_) => "private-dns-name",
            LookupKey::PrivateIp(_) => "private-ip-address",
        }
    }

    fn value(&self) -> &str {
        match self {
            LookupKey::Id(id) => id.as_str(),
            LookupKey::PrivateDnsName(s) | LookupKey::PrivateIp(s) => s,
        }
    }
}

/// The keys that may identify the instance behind a node, strongest first.
///
/// A provider ID is authoritative: when present, it is the only key.
pub fn lookup_keys(node: &NodeInfo) -> Result<Vec<LookupKey>, CloudError> {
    if let Some(pid) = node.provider_id.as_deref().filter(|p| !p.is_empty()) {
        let parsed =
            AwsProviderId::parse(pid).map_err(|e| CloudError::InvalidInput(e.to_string()))?;
        return Ok(vec![LookupKey::Id(parsed.instance)]);
    }
    let mut keys = Vec::new();
    if let Some(id) = instance_id_from_node_name(&node.name) {
        keys.push(LookupKey::Id(id));
        return Ok(keys);
    }
    keys.push(LookupKey::PrivateDnsName(node.name.clone()));
    // Kubelet-reported addresses are not validated by the apiserver: only real IP addresses, in
    // their canonical spelling (as EC2 reports them), and only the first few, become keys.
    for ip in node.known_ips() {
        let Ok(ip) = ip.trim().parse::<std::net::IpAddr>() else {
            continue;
        };
        let key = LookupKey::PrivateIp(ip.to_string());
        if !keys.contains(&key) {
            keys.push(key);
        }
        if keys.len() > MAX_IP_KEYS {
            break;
        }
    }
    Ok(keys)
}

/// Most node IPs looked up for one node (a node has one or two; a hostile one may list thousands).
pub const MAX_IP_KEYS: usize = 16;

struct Entry {
    instance: Arc<Instance>,
    /// Whether the scoped listing holds it (otherwise it was looked up and expires).
    listed: bool,
    /// When EC2 last described it (a listing counts from the moment it was sent).
    fetched_at: Instant,
    /// The listing that last returned it.
    generation: u64,
}

/// Instances plus indexes by private DNS name and private IP. DNS names and IPs are unique only
/// within a VPC, so an index key may name several instances.
///
/// Updates are made in place: an instance EC2 describes again unchanged keeps its `Arc` and its
/// index entries, so a periodic listing of an idle cluster allocates nothing that outlives it
/// (no second copy of the view, no new long-lived allocations between the listing's temporary
/// ones).
#[derive(Default)]
struct Snapshot {
    by_id: HashMap<InstanceId, Entry>,
    by_dns: HashMap<String, Vec<InstanceId>>,
    by_ip: HashMap<String, Vec<InstanceId>>,
    /// Number of listings applied so far.
    generation: u64,
}

fn add_to_index(index: &mut HashMap<String, Vec<InstanceId>>, key: &str, id: &InstanceId) {
    if let Some(ids) = index.get_mut(key) {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
        return;
    }
    index.insert(key.to_string(), vec![id.clone()]);
}

fn remove_from_index(index: &mut HashMap<String, Vec<InstanceId>>, key: &str, id: &InstanceId) {
    if let Some(ids) = index.get_mut(key) {
        ids.retain(|i| i != id);
        if ids.is_empty() {
            index.remove(key);
        }
    }
}

/// The index maps of a snapshot, borrowed apart from `by_id`.
struct Indexes<'a> {
    by_dns: &'a mut HashMap<String, Vec<InstanceId>>,
    by_ip: &'a mut HashMap<String, Vec<InstanceId>>,
}

impl Indexes<'_> {
    fn add(&mut self, i: &Instance) {
        if !i.private_dns_name.is_empty() {
            add_to_index(self.by_dns, &i.private_dns_name, &i.id);
        }
        for ip in i.private_ipv4s() {
            add_to_index(self.by_ip, ip, &i.id);
        }
    }

    fn remove(&mut self, i: &Instance) {
        if !i.private_dns_name.is_empty() {
            remove_from_index(self.by_dns, &i.private_dns_name, &i.id);
        }
        for ip in i.private_ipv4s() {
            remove_from_index(self.by_ip, ip, &i.id);
        }
    }

    /// Points the indexes at `new` instead of `old` (same instance ID).
    fn replace(&mut self, old: &Instance, new: &Instance) {
        if old.private_dns_name != new.private_dns_name
            || !old.private_ipv4s().eq(new.private_ipv4s())
        {
            self.remove(old);
            self.add(new);
        }
    }
}

impl Snapshot {
    fn split(&mut self) -> (&mut HashMap<InstanceId, Entry>, Indexes<'_>) {
        (
            &mut self.by_id,
            Indexes {
                by_dns: &mut self.by_dns,
                by_ip: &mut self.by_ip,
            },
        )
    }

    /// Puts what EC2 said about one instance at `at`; whether it is listed stays as it was
    /// (`listed` only for a new entry).
    fn put(&mut self, instance: Instance, listed: bool, at: Instant) {
        let generation = self.generation;
        let (by_id, mut indexes) = self.split();
        match by_id.get_mut(&instance.id) {
            Some(e) => {
                if *e.instance != instance {
                    indexes.replace(&e.instance, &instance);
                    e.instance = Arc::new(instance);
                }
                e.fetched_at = at;
            }
            None => {
                indexes.add(&instance);
                by_id.insert(
                    instance.id.clone(),
                    Entry {
                        instance: Arc::new(instance),
                        listed,
                        fetched_at: at,
                        generation,
                    },
                );
            }
        }
    }

    /// Applies a listing sent at `started`: it becomes the set of listed instances. Listed
    /// instances it lacks are dropped, unless EC2 described them by ID after the listing was
    /// sent (that answer is newer; they stay as looked-up extras); looked-up extras stay while
    /// younger than `extra_ttl`. A by-ID answer newer than the listing also wins over the
    /// listing's copy of the same instance.
    fn replace_listed(
        &mut self,
        listed: impl IntoIterator<Item = Instance>,
        extra_ttl: Duration,
        started: Instant,
        now: Instant,
    ) {
        self.generation += 1;
        let generation = self.generation;
        let (by_id, mut indexes) = self.split();
        for instance in listed {
            match by_id.get_mut(&instance.id) {
                Some(e) => {
                    e.listed = true;
                    e.generation = generation;
                    if e.fetched_at > started {
                        continue;
                    }
                    if *e.instance != instance {
                        indexes.replace(&e.instance, &instance);
                        e.instance = Arc::new(instance);
                    }
                    e.fetched_at = started;
                }
                None => {
                    indexes.add(&instance);
                    by_id.insert(
                        instance.id.clone(),
                        Entry {
                            instance: Arc::new(instance),
                            listed: true,
                            fetched_at: started,
                            generation,
                        },
                    );
                }
            }
        }
        by_id.retain(|_, e| {
            let keep = if e.generation == generation {
                true
            } else if e.fetched_at > started {
                e.listed = false;
                true
            } else {
                !e.listed && now.duration_since(e.fetched_at) < extra_ttl
            };
            if !keep {
                indexes.remove(&e.instance);
            }
            keep
        });
    }

    /// Applies EC2's answer at `at` to a lookup of `asked` by instance ID: the instances found
    /// replace their entries, the IDs EC2 did not return leave the view. Returns those IDs.
    fn apply_by_id(
        &mut self,
        asked: &[InstanceId],
        found: impl IntoIterator<Item = Instance>,
        at: Instant,
    ) -> Vec<InstanceId> {
        let mut missing: std::collections::HashSet<&InstanceId> = asked.iter().collect();
        for instance in found {
            missing.remove(&instance.id);
            self.put(instance, false, at);
        }
        let missing: Vec<InstanceId> = asked
            .iter()
            .filter(|id| missing.contains(id))
            .cloned()
            .collect();
        let (by_id, mut indexes) = self.split();
        for id in &missing {
            if let Some(e) = by_id.remove(id) {
                indexes.remove(&e.instance);
            }
        }
        missing
    }

    fn fresh(&self, id: &InstanceId, extra_ttl: Duration) -> Option<Arc<Instance>> {
        let e = self.by_id.get(id)?;
        (e.listed || e.fetched_at.elapsed() < extra_ttl).then(|| e.instance.clone())
    }

    /// The instance a key names. A DNS name or IP shared by several live instances (e.g. in
    /// two VPCs) is refused rather than guessed; gone instances give way to live ones.
    fn get(
        &self,
        key: &LookupKey,
        extra_ttl: Duration,
    ) -> Result<Option<Arc<Instance>>, CloudError> {
        let ids = match key {
            LookupKey::Id(id) => return Ok(self.fresh(id, extra_ttl)),
            LookupKey::PrivateDnsName(n) => self.by_dns.get(n),
            LookupKey::PrivateIp(ip) => self.by_ip.get(ip),
        };
        let found: Vec<Arc<Instance>> = ids
            .into_iter()
            .flatten()
            .filter_map(|id| self.fresh(id, extra_ttl))
            .collect();
        let live: Vec<&Arc<Instance>> = found.iter().filter(|i| !i.state.is_gone()).collect();
        match (live.as_slice(), found.first()) {
            ([one], _) => Ok(Some(Arc::clone(one))),
            ([], first) => Ok(first.cloned()),
            (many, _) => Err(CloudError::InvalidInput(format!(
                "{} {:?} matches several instances ({}); set the node's providerID or scope the cluster to one VPC",
                match key {
                    LookupKey::PrivateIp(_) => "private IP",
                    _ => "private DNS name",
                },
                key.value(),
                many.iter().map(|i| i.id.to_string()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// Keys AWS recently answered "no such instance" for: not asked again until `ttl` has passed,
/// so a node whose instance is gone costs one lookup per refresh period, not one per pass.
#[derive(Default)]
struct Misses {
    at: HashMap<LookupKey, Instant>,
}

impl Misses {
    /// Keys worth asking AWS about now.
    fn due(&self, keys: &[LookupKey], now: Instant, ttl: Duration) -> Vec<LookupKey> {
        keys.iter()
            .filter(|k| {
                self.at
                    .get(*k)
                    .is_none_or(|t| now.duration_since(*t) >= ttl)
            })
            .cloned()
            .collect()
    }

    fn record(&mut self, keys: &[LookupKey], now: Instant, ttl: Duration) {
        if self.at.len() > 10_000 {
            self.at.retain(|_, t| now.duration_since(*t) < ttl);
        }
        for k in keys {
            self.at.insert(k.clone(), now);
        }
    }

    fn clear(&mut self, keys: &[LookupKey]) {
        for k in keys {
            self.at.remove(k);
        }
    }
}

struct Lookup {
    key: LookupKey,
    reply: oneshot::Sender<Result<(), CloudError>>,
}

/// Tunables of the cache.
#[derive(Debug, Clone, Copy)]
pub struct CacheOptions {
    /// How often the scoped listing is refreshed.
    pub refresh_period: Duration,
    /// How long lookups wait to be batched together.
    pub batch_window: Duration,
    /// Most values in one DescribeInstances filter.
    pub batch_size: usize,
    /// How long callers wait for the first listing before answering "unavailable".
    pub sync_timeout: Duration,
    /// How long an answer "no such instance" is believed before the key is asked again.
    pub miss_ttl: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        Self {
            refresh_period: DEFAULT_REFRESH_PERIOD,
            batch_window: Duration::from_millis(50),
            batch_size: 200,
            sync_timeout: Duration::from_secs(30),
            miss_ttl: MAX_MISS_TTL,
        }
    }
}

impl CacheOptions {
    /// Options for a listing every `refresh_period`; misses are believed for that long, but
    /// never longer than [`MAX_MISS_TTL`] (a node whose instance EC2 did not know yet, e.g. just
    /// after launch, is looked up again within a minute).
    pub fn with_refresh_period(refresh_period: Duration) -> Self {
        Self {
            refresh_period,
            miss_ttl: refresh_period.min(MAX_MISS_TTL),
            ..Self::default()
        }
    }
}

/// Default period of the full listing (`--instance-cache-refresh-period`). Shutdown and
/// termination of NotReady nodes are seen by the node-lifecycle controller's batched look
/// ([`InstanceCache::refresh_ids`]) every monitor period, so the full listing only keeps
/// addresses and Ready nodes' instances current.
pub const DEFAULT_REFRESH_PERIOD: Duration = Duration::from_secs(300);

/// Longest time a "no such instance" answer is believed.
pub const MAX_MISS_TTL: Duration = Duration::from_secs(60);

/// The shared instance view. Clone the `Arc`, not the cache.
pub struct InstanceCache {
    ec2: Ec2,
    scope: Scope,
    options: CacheOptions,
    snapshot: RwLock<Snapshot>,
    synced: watch::Sender<bool>,
    /// Set on first use: until then nothing is listed (a standby replica makes no EC2 calls).
    active: watch::Sender<bool>,
    last_error: RwLock<Option<CloudError>>,
    lookups: mpsc::UnboundedSender<Lookup>,
    misses: std::sync::Mutex<Misses>,
}

impl InstanceCache {
    /// Creates the cache and starts its refresher and batcher tasks on the current runtime. The
    /// refresher lists nothing until the cache is first used (see [`InstanceCache::activate`]).
    pub fn start(ec2: Ec2, scope: Scope, options: CacheOptions) -> Arc<InstanceCache> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (synced, _) = watch::channel(scope == Scope::Unscoped);
        let cache = Arc::new(InstanceCache {
            ec2,
            scope,
            options,
            snapshot: RwLock::new(Snapshot::default()),
            synced,
            active: watch::channel(false).0,
            last_error: RwLock::new(None),
            lookups: tx,
            misses: std::sync::Mutex::new(Misses::default()),
        });
        tokio::spawn(cache.clone().run_batcher(rx));
        if cache.scope != Scope::Unscoped {
            tokio::spawn(cache.clone().run_refresher());
        }
        cache
    }

    /// Starts the periodic listing (idempotent). Waiting for the cache or looking an instance up
    /// activates it too.
    pub fn activate(&self) {
        self.active
            .send_if_modified(|active| !std::mem::replace(active, true));
    }

    /// Whether the first listing has completed.
    pub fn has_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// Completes once the first listing has completed (however long that takes).
    pub async fn wait_until_synced(&self) {
        self.activate();
        let mut synced = self.synced.subscribe();
        // The sender lives as long as `self`, so waiting cannot fail.
        let _ = synced.wait_for(|s| *s).await;
    }

    /// Number of instances currently known.
    pub fn len(&self) -> usize {
        self.snapshot.read().expect("snapshot lock").by_id.len()
    }

    /// Every security group of the known instances (where load-balancer node rules can live).
    pub fn security_groups(&self) -> std::collections::BTreeSet<String> {
        let snap = self.snapshot.read().expect("snapshot lock");
        snap.by_id
            .values()
            .flat_map(|e| e.instance.security_groups.iter().cloned())
            .collect()
    }

    /// Whether no instance is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Finds the instance behind a node: from the view first, then by one batched lookup.
    ///
    /// `Ok(None)` means AWS answered that no such instance exists.
    pub async fn find(&self, node: &NodeInfo) -> Result<Option<Arc<Instance>>, CloudError> {
        self.wait_synced().await?;
        let keys = lookup_keys(node)?;
        if let Some(i) = self.get_local(&keys)? {
            return Ok(Some(i));
        }
        let ttl = self.options.miss_ttl;
        let due = self
            .misses
            .lock()
            .expect("misses lock")
            .due(&keys, Instant::now(), ttl);
        if due.is_empty() {
            return Ok(None);
        }
        let replies = join_all(due.iter().map(|k| self.fetch(k.clone()))).await;
        for r in replies {
            r?;
        }
        let found = self.get_local(&keys)?;
        let mut misses = self.misses.lock().expect("misses lock");
        match found {
            Some(_) => misses.clear(&keys),
            None => misses.record(&due, Instant::now(), ttl),
        }
        Ok(found)
    }

    /// The first key, strongest first, that names an instance in the view.
    fn get_local(&self, keys: &[LookupKey]) -> Result<Option<Arc<Instance>>, CloudError> {
        let snap = self.snapshot.read().expect("snapshot lock");
        let ttl = self.options.refresh_period;
        for k in keys {
            if let Some(i) = snap.get(k, ttl)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    async fn wait_synced(&self) -> Result<(), CloudError> {
        self.activate();
        let mut rx = self.synced.subscribe();
        let waited = tokio::time::timeout(self.options.sync_timeout, rx.wait_for(|s| *s)).await;
        match waited {
            Ok(Ok(_)) => Ok(()),
            _ => Err(self
                .last_error
                .read()
                .expect("error lock")
                .clone()
                .unwrap_or_else(|| CloudError::Unavailable {
                    operation: "DescribeInstances".into(),
                    message: "the instance cache has not completed its first listing".into(),
                })),
        }
    }

    async fn fetch(&self, key: LookupKey) -> Result<(), CloudError> {
        let (reply, rx) = oneshot::channel();
        self.lookups
            .send(Lookup { key, reply })
            .map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    /// Lists the scoped instances now and replaces the view.
    pub async fn refresh(&self) -> Result<usize, CloudError> {
        let started = Instant::now();
        let mut all = Vec::new();
        for filters in self.scope.listings() {
            all.extend(
                self.ec2
                    .describe_instances(&filters, Instance::from_sdk)
                    .await?,
            );
        }
        let n = all.len();
        self.snapshot
            .write()
            .expect("snapshot lock")
            .replace_listed(all, self.options.refresh_period, started, Instant::now());
        // The answer's body and its parsed form (several MiB of small objects at 1000
        // instances) are free now; without this they stay resident, and the next listing
        // may parse into the other arena (see `release_free_memory`).
        stratus_runtime::memory::release_free_memory();
        Ok(n)
    }

    /// Asks EC2 about these instances now, by instance ID, in one DescribeInstances per
    /// `batch_size` IDs, and puts the answer in the view: the instances found replace their
    /// entries (a stopped or terminated instance is seen as such at once), and the IDs EC2 does
    /// not know leave the view and are remembered as misses (so the questions that follow cost
    /// no further call). Duplicate IDs are asked once.
    pub async fn refresh_ids(&self, ids: &[InstanceId]) -> Result<(), CloudError> {
        self.activate();
        let mut seen = std::collections::HashSet::with_capacity(ids.len());
        let unique: Vec<InstanceId> = ids.iter().filter(|id| seen.insert(*id)).cloned().collect();
        for chunk in unique.chunks(self.options.batch_size.max(1)) {
            let found = self
                .ec2
                .describe_instances(
                    &[filter("instance-id", chunk.iter().map(|i| i.as_str()))],
                    Instance::from_sdk,
                )
                .await?;
            let now = Instant::now();
            let missing = self
                .snapshot
                .write()
                .expect("snapshot lock")
                .apply_by_id(chunk, found, now);
            let mut misses = self.misses.lock().expect("misses lock");
            let keys: Vec<LookupKey> = chunk.iter().cloned().map(LookupKey::Id).collect();
            misses.clear(&keys);
            let missing: Vec<LookupKey> = missing.into_iter().map(LookupKey::Id).collect();
            misses.record(&missing, now, self.options.miss_ttl);
        }
        Ok(())
    }

    async fn run_refresher(self: Arc<Self>) {
        let mut active = self.active.subscribe();
        // The sender lives as long as `self`.
        let _ = active.wait_for(|a| *a).await;
        let mut failures = 0u32;
        loop {
            let wait = match self.refresh().await {
                Ok(n) => {
                    failures = 0;
                    *self.last_error.write().expect("error lock") = None;
                    self.synced.send_replace(true);
                    tracing::debug!(instances = n, "instance cache refreshed");
                    self.options.refresh_period
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, failures, "instance cache refresh failed");
                    *self.last_error.write().expect("error lock") = Some(e);
                    let backoff = Duration::from_secs(1u64 << failures.min(5));
                    backoff.min(self.options.refresh_period)
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn run_batcher(self: Arc<Self>, mut rx: mpsc::UnboundedReceiver<Lookup>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            let deadline = tokio::time::sleep(self.options.batch_window);
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    _ = &mut deadline => break,
                    more = rx.recv() => match more {
                        Some(l) => batch.push(l),
                        None => break,
                    },
                }
            }
            self.resolve_batch(batch).await;
        }
    }

    /// One DescribeInstances per key kind (and per `batch_size` values) for the whole batch.
    async fn resolve_batch(&self, batch: Vec<Lookup>) {
        let mut by_kind: HashMap<&'static str, Vec<String>> = HashMap::new();
        for l in &batch {
            let values = by_kind.entry(l.key.filter_name()).or_default();
            if !values.iter().any(|v| v == l.key.value()) {
                values.push(l.key.value().to_string());
            }
        }
        let mut failures: HashMap<&'static str, CloudError> = HashMap::new();
        for (kind, values) in by_kind {
            for chunk in values.chunks(self.options.batch_size) {
                match self
                    .ec2
                    .describe_instances(&[filter(kind, chunk.to_vec())], Instance::from_sdk)
                    .await
                {
                    Ok(found) => {
                        let now = Instant::now();
                        let mut snap = self.snapshot.write().expect("snapshot lock");
                        for i in found {
                            snap.put(i, false, now);
                        }
                    }
                    Err(e) => {
                        failures.insert(kind, e);
                    }
                }
            }
        }
        for l in batch {
            let result = match failures.get(l.key.filter_name()) {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            };
            let _ = l.reply.send(result);
        }
    }
}

fn stopped() -> CloudError {
    CloudError::Unavailable {
        operation: "DescribeInstances".into(),
        message: "instance cache stopped".into(),
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instance::InstanceState;
    use stratus_cloud::{NodeAddress, NodeAddressType};

    fn inst(id: &str, dns: &str, ip: &str) -> Instance {
        Instance {
            id: InstanceId::parse(id).unwrap(),
            state: InstanceState::Running,
            zone: "us-east-1a".into(),
            instance_type: "t3.small".into(),
            private_dns_name: dns.into(),
            public_dns_name: String::new(),
            private_ip: ip.into(),
            public_ip: String::new(),
            interfaces: vec![],
            vpc_id: String::new(),
            security_groups: vec![],
        }
    }

    #[test]
    fn provider_id_is_the_only_key_when_present() {
        let mut n = NodeInfo::named("ip-10-0-0-1.ec2.internal");
        n.provider_id = Some("aws:///us-east-1a/i-0abc".into());
        assert_eq!(
            lookup_keys(&n).unwrap(),
            vec![LookupKey::Id(InstanceId::parse("i-0abc").unwrap())]
        );
        n.provider_id = Some("gce://x/y/z".into());
        assert!(matches!(lookup_keys(&n), Err(CloudError::InvalidInput(_))));
    }

    #[test]
    fn only_real_ips_become_keys_and_only_a_few() {
        let mut n = NodeInfo::named("worker-7");
        n.addresses = vec![
            NodeAddress::new(NodeAddressType::InternalIP, "not-an-ip"),
            NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.1 "),
            NodeAddress::new(NodeAddressType::InternalIP, "10.0.0.1"),
            NodeAddress::new(NodeAddressType::InternalIP, "FD00::1"),
        ];
        assert_eq!(
            lookup_keys(&n).unwrap(),
            vec![
                LookupKey::PrivateDnsName("worker-7".into()),
                LookupKey::PrivateIp("10.0.0.1".into()),
                LookupKey::PrivateIp("fd00::1".into()),
            ]
        );
        n.addresses = (0..5000u32)
            .map(|i| {
                NodeAddress::new(
                    NodeAddressType::InternalIP,
                    std::net::Ipv4Addr::from(i).to_string(),
                )
            })
            .collect();
        assert_eq!(lookup_keys(&n).unwrap().len(), 1 + MAX_IP_KEYS);
    }

    #[test]
    fn names_and_ips_are_keys_for_unrelated_names() {
        let mut n = NodeInfo::named("worker-7");
        n.addresses = vec![NodeAddress::new(NodeAddressType::InternalIP, "10.1.2.3")];
        n.provided_node_ip = Some("10.1.2.4".into());
        assert_eq!(
            lookup_keys(&n).unwrap(),
            vec![
                LookupKey::PrivateDnsName("worker-7".into()),
                LookupKey::PrivateIp("10.1.2.4".into()),
                LookupKey::PrivateIp("10.1.2.3".into()),
            ]
        );
        let rbn = NodeInfo::named("i-0abc.us-east-1.compute.internal");
        assert_eq!(
            lookup_keys(&rbn).unwrap(),
            vec![LookupKey::Id(InstanceId::parse("i-0abc").unwrap())]
        );
    }

    #[test]
    fn snapshot_indexes_and_expires_extras() {
        let ttl = Duration::from_secs(60);
        let mut s = Snapshot::default();
        s.put(inst("i-01", "ip-a", "10.0.0.1"), false, Instant::now());
        let now = Instant::now();
        s.replace_listed(vec![inst("i-02", "ip-b", "10.0.0.2")], ttl, now, now);
        assert!(s
            .get(&LookupKey::PrivateDnsName("ip-a".into()), ttl)
            .unwrap()
            .is_some());
        assert!(s
            .get(&LookupKey::PrivateIp("10.0.0.2".into()), ttl)
            .unwrap()
            .is_some());
        assert!(s
            .get(&LookupKey::PrivateDnsName("ip-a".into()), Duration::ZERO)
            .unwrap()
            .is_none());
        let now = Instant::now();
        s.replace_listed(vec![], Duration::ZERO, now, now);
        assert!(s.by_id.is_empty() && s.by_dns.is_empty() && s.by_ip.is_empty());
    }

    #[test]
    fn a_listing_updates_the_view_in_place() {
        let ttl = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut s = Snapshot::default();
        s.replace_listed(
            vec![
                inst("i-01", "ip-a", "10.0.0.1"),
                inst("i-02", "ip-b", "10.0.0.2"),
                inst("i-03", "ip-c", "10.0.0.3"),
            ],
            ttl,
            t0,
            t0,
        );
        let a_before = s.by_id[&InstanceId::parse("i-01").unwrap()]
            .instance
            .clone();
        let t1 = t0 + Duration::from_secs(300);
        s.replace_listed(
            vec![
                inst("i-01", "ip-a", "10.0.0.1"),
                inst("i-02", "ip-b", "10.0.9.9"),
            ],
            ttl,
            t1,
            t1,
        );
        let a_after = &s.by_id[&InstanceId::parse("i-01").unwrap()].instance;
        assert!(
            Arc::ptr_eq(&a_before, a_after),
            "an unchanged instance keeps its allocation"
        );
        let ip = |s: &Snapshot, ip: &str| s.get(&LookupKey::PrivateIp(ip.into()), ttl).unwrap();
        assert_eq!(ip(&s, "10.0.9.9").unwrap().id.as_str(), "i-02");
        assert!(ip(&s, "10.0.0.2").is_none(), "the old IP is unindexed");
        assert!(
            ip(&s, "10.0.0.3").is_none(),
            "an unlisted instance leaves the view"
        );
        assert!(!s.by_dns.contains_key("ip-c"));
        assert_eq!((s.by_id.len(), s.by_dns.len(), s.by_ip.len()), (2, 2, 2));
    }

    #[test]
    fn by_id_answers_replace_entries_and_drop_unknown_ids() {
        let ttl = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut s = Snapshot::default();
        s.replace_listed(
            vec![
                inst("i-01", "ip-a", "10.0.0.1"),
                inst("i-02", "ip-b", "10.0.0.2"),
            ],
            ttl,
            t0,
            t0,
        );
        let mut stopped = inst("i-01", "ip-a", "10.0.0.1");
        stopped.state = InstanceState::Stopped;
        let ids = [
            InstanceId::parse("i-01").unwrap(),
            InstanceId::parse("i-02").unwrap(),
        ];
        let missing = s.apply_by_id(&ids, vec![stopped], t0 + Duration::from_secs(1));
        assert_eq!(missing, vec![ids[1].clone()]);
        let a = &s.by_id[&ids[0]];
        assert_eq!(a.instance.state, InstanceState::Stopped);
        assert!(a.listed, "a by-ID answer keeps a listed instance listed");
        assert!(!s.by_id.contains_key(&ids[1]));
        assert!(!s.by_dns.contains_key("ip-b") && !s.by_ip.contains_key("10.0.0.2"));
    }

    #[test]
    fn a_by_id_answer_newer_than_a_listing_wins() {
        let ttl = Duration::from_secs(60);
        let t0 = Instant::now();
        let mut s = Snapshot::default();
        s.replace_listed(vec![inst("i-01", "ip-a", "10.0.0.1")], ttl, t0, t0);
        // A listing is sent at t1; while it runs, i-01 is seen stopped by ID and i-02 is
        // looked up; the listing then answers with what it saw at t1.
        let t1 = t0 + Duration::from_secs(300);
        let mut stopped = inst("i-01", "ip-a", "10.0.0.1");
        stopped.state = InstanceState::Stopped;
        let ids = [
            InstanceId::parse("i-01").unwrap(),
            InstanceId::parse("i-02").unwrap(),
        ];
        let t2 = t1 + Duration::from_millis(200);
        s.apply_by_id(&ids, vec![stopped, inst("i-02", "ip-b", "10.0.0.2")], t2);
        let t3 = t2 + Duration::from_millis(200);
        s.replace_listed(vec![inst("i-01", "ip-a", "10.0.0.1")], ttl, t1, t3);
        assert_eq!(s.by_id[&ids[0]].instance.state, InstanceState::Stopped);
        assert!(s.by_id[&ids[0]].listed);
        assert!(
            s.by_id.contains_key(&ids[1]) && !s.by_id[&ids[1]].listed,
            "an instance described after the listing was sent stays, as a looked-up extra"
        );
        // The next listing is newer than both answers.
        let t4 = t3 + Duration::from_secs(300);
        s.replace_listed(vec![inst("i-01", "ip-a", "10.0.0.1")], ttl, t4, t4);
        assert_eq!(s.by_id[&ids[0]].instance.state, InstanceState::Running);
        assert!(!s.by_id.contains_key(&ids[1]), "the extra expired");
    }

    #[test]
    fn misses_are_not_asked_again_within_the_ttl() {
        let ttl = Duration::from_secs(60);
        let t0 = Instant::now();
        let a = LookupKey::PrivateIp("10.0.0.9".into());
        let b = LookupKey::PrivateDnsName("worker".into());
        let mut m = Misses::default();
        assert_eq!(m.due(&[a.clone(), b.clone()], t0, ttl).len(), 2);
        m.record(std::slice::from_ref(&a), t0, ttl);
        assert_eq!(
            m.due(&[a.clone(), b.clone()], t0 + Duration::from_secs(1), ttl),
            vec![b.clone()]
        );
        assert_eq!(
            m.due(std::slice::from_ref(&a), t0 + ttl, ttl),
            vec![a.clone()]
        );
        m.clear(std::slice::from_ref(&a));
        assert_eq!(m.due(std::slice::from_ref(&a), t0, ttl), vec![a]);
    }

    #[test]
    fn shared_dns_names_are_refused_unless_only_one_instance_lives() {
        let ttl = Duration::from_secs(60);
        let mut s = Snapshot::default();
        let mut gone = inst("i-01", "ip-10-0-0-4.ec2.internal", "10.0.0.4");
        gone.state = InstanceState::Terminated;
        let now = Instant::now();
        s.replace_listed(
            vec![gone, inst("i-02", "ip-10-0-0-4.ec2.internal", "10.0.0.4")],
            ttl,
            now,
            now,
        );
        let key = LookupKey::PrivateDnsName("ip-10-0-0-4.ec2.internal".into());
        assert_eq!(s.get(&key, ttl).unwrap().unwrap().id.as_str(), "i-02");
        s.put(
            inst("i-03", "ip-10-0-0-4.ec2.internal", "10.0.0.4"),
            true,
            Instant::now(),
        );
        let err = s.get(&key, ttl).unwrap_err();
        assert!(err.to_string().contains("i-02, i-03"), "{err}");
        assert!(matches!(
            s.get(&LookupKey::PrivateIp("10.0.0.4".into()), ttl),
            Err(CloudError::InvalidInput(_))
        ));
    }
}
