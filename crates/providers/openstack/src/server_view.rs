//! The shared view of the project's servers: one paged Nova listing and one Neutron ports
//! listing per refresh, indexed by ID, name and IP, read by every controller. A node the view
//! does not hold is looked up once: by ID (`GET /servers/{id}`) when it has a providerID, else by
//! one coalesced re-list; an answer of "no such server" is remembered for a refresh period.
//! Nothing is listed until the view is first used (a standby replica makes no call).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use stratus_cloud::{CloudError, NodeInfo};
use tokio::sync::{watch, Mutex};
use tokio::time::Instant;

use crate::compute::{Nova, Server};
use crate::network::{Neutron, Port};
use crate::provider_id::OpenStackProviderId;

/// A server and the ports attached to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The server.
    pub server: Server,
    /// Its ports.
    pub ports: Vec<Port>,
}

/// Tunables.
#[derive(Debug, Clone, Copy)]
pub struct ViewOptions {
    /// How often the project is listed again.
    pub refresh_period: Duration,
    /// The least time between two re-lists caused by lookups.
    pub relist_min_interval: Duration,
    /// How long callers wait for the first listing before answering "unavailable".
    pub sync_timeout: Duration,
}

impl Default for ViewOptions {
    fn default() -> Self {
        Self {
            refresh_period: Duration::from_secs(60),
            relist_min_interval: Duration::from_secs(2),
            sync_timeout: Duration::from_secs(30),
        }
    }
}

/// How a node is looked up, strongest first.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Key {
    /// By server ID (from the providerID).
    Id(String),
    /// By server name = node name.
    Name(String),
    /// By an IP the kubelet reported.
    Ip(String),
}

/// The keys of a node; an unusable providerID (another cloud, another region) is refused.
pub fn keys(node: &NodeInfo, region: Option<&str>) -> Result<Vec<Key>, CloudError> {
    if let Some(pid) = node.provider_id.as_deref().filter(|p| !p.is_empty()) {
        let parsed =
            OpenStackProviderId::parse(pid).map_err(|e| CloudError::InvalidInput(e.to_string()))?;
        if let (Some(theirs), Some(ours)) = (parsed.region.as_deref(), region) {
            if theirs != ours {
                return Err(CloudError::InvalidInput(format!(
                    "provider ID {pid:?} names region {theirs:?}; this cloud-controller-manager serves {ours:?}"
                )));
            }
        }
        return Ok(vec![Key::Id(parsed.server)]);
    }
    let mut keys = vec![Key::Name(node.name.clone())];
    for ip in node.known_ips().into_iter().take(16) {
        if let Ok(ip) = ip.trim().parse::<std::net::IpAddr>() {
            keys.push(Key::Ip(ip.to_string()));
        }
    }
    Ok(keys)
}

/// How far before a complete listing's first answer its changes are asked for again: Nova's
/// times have whole seconds and a listing's pages are read one after another.
pub const CHANGES_MARGIN: Duration = Duration::from_secs(5);

/// Without a `Date` header, how far before our own clock at the listing changes are asked for
/// (room for the clocks of Nova and this host to disagree).
pub const UNDATED_MARGIN: Duration = Duration::from_secs(120);

/// Servers and indexes.
#[derive(Debug, Default)]
struct Snapshot {
    by_id: HashMap<String, Arc<Entry>>,
    by_name: HashMap<String, Vec<String>>,
    by_ip: HashMap<String, Vec<String>>,
    /// Nova's time from which a change may be missing from this snapshot (`None` before the
    /// first listing).
    changes_since: Option<jiff::Timestamp>,
}

/// Nova's time from which changes must be asked for after a listing Nova answered at
/// `answered_at` (its clock) and we started at `started` (ours).
pub fn changes_since(
    answered_at: Option<jiff::Timestamp>,
    started: std::time::SystemTime,
) -> jiff::Timestamp {
    let (at, margin) = match answered_at {
        Some(at) => (at, CHANGES_MARGIN),
        None => (
            jiff::Timestamp::try_from(started).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            UNDATED_MARGIN,
        ),
    };
    let margin = jiff::SignedDuration::try_from(margin).unwrap_or(jiff::SignedDuration::ZERO);
    at.checked_sub(margin)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
}

impl Snapshot {
    fn build(servers: Vec<Server>, ports: Vec<Port>) -> Snapshot {
        let mut by_device: HashMap<String, Vec<Port>> = HashMap::new();
        for p in ports {
            by_device.entry(p.device_id.clone()).or_default().push(p);
        }
        let mut snap = Snapshot::default();
        for s in servers {
            let ports = by_device.remove(&s.id).unwrap_or_default();
            snap.insert(Entry { server: s, ports });
        }
        snap
    }

    /// Folds servers that changed into the snapshot: a server it holds takes its new state (its
    /// ports stay as listed); a server it does not hold is left to the lookups, which read its
    /// ports too. Returns how many held servers changed.
    fn update(&mut self, changed: Vec<Server>) -> usize {
        let mut updated = 0;
        for server in changed {
            let Some(old) = self.by_id.get(&server.id) else {
                continue;
            };
            if old.server == server {
                continue;
            }
            let ports = old.ports.clone();
            if old.server.name != server.name {
                if let Some(ids) = self.by_name.get_mut(&old.server.name) {
                    ids.retain(|id| *id != server.id);
                }
            }
            self.insert(Entry { server, ports });
            updated += 1;
        }
        updated
    }

    fn insert(&mut self, entry: Entry) {
        let id = entry.server.id.clone();
        self.by_name
            .entry(entry.server.name.clone())
            .or_default()
            .push(id.clone());
        let ips = entry
            .ports
            .iter()
            .flat_map(|p| p.fixed_ips.iter().map(|f| f.ip_address.clone()))
            .chain(
                entry
                    .server
                    .addresses
                    .values()
                    .flatten()
                    .map(|a| a.addr.clone()),
            );
        for ip in ips {
            let ids = self.by_ip.entry(ip).or_default();
            if !ids.contains(&id) {
                ids.push(id.clone());
            }
        }
        self.by_id.insert(id, Arc::new(entry));
    }

    /// The server a key names; a name or IP naming several live servers is refused.
    fn get(&self, key: &Key) -> Result<Option<Arc<Entry>>, CloudError> {
        let ids = match key {
            Key::Id(id) => return Ok(self.by_id.get(id).cloned()),
            Key::Name(n) => self.by_name.get(n),
            Key::Ip(ip) => self.by_ip.get(ip),
        };
        let live: Vec<&Arc<Entry>> = ids
            .into_iter()
            .flatten()
            .filter_map(|id| self.by_id.get(id))
            .filter(|e| !e.server.is_gone())
            .collect();
        match live.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(Arc::clone(one))),
            many => Err(CloudError::InvalidInput(format!(
                "{key:?} matches {} servers ({}); set the node's providerID",
                many.len(),
                many.iter()
                    .map(|e| e.server.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

/// The view. Clone the `Arc`.
pub struct ServerView {
    nova: Nova,
    neutron: Neutron,
    options: ViewOptions,
    snapshot: RwLock<Snapshot>,
    synced: watch::Sender<bool>,
    active: watch::Sender<bool>,
    last_error: RwLock<Option<CloudError>>,
    /// When the last listing finished; held while one runs (single flight).
    last_list: Mutex<Option<Instant>>,
    misses: std::sync::Mutex<HashMap<Key, Instant>>,
}

impl ServerView {
    /// Creates the view and its refresher (which lists nothing until the view is first used).
    pub fn start(nova: Nova, neutron: Neutron, options: ViewOptions) -> Arc<ServerView> {
        let view = Arc::new(ServerView {
            nova,
            neutron,
            options,
            snapshot: RwLock::new(Snapshot::default()),
            synced: watch::channel(false).0,
            active: watch::channel(false).0,
            last_error: RwLock::new(None),
            last_list: Mutex::new(None),
            misses: std::sync::Mutex::new(HashMap::new()),
        });
        tokio::spawn(view.clone().refresh_forever());
        view
    }

    /// Starts the periodic listing (idempotent).
    pub fn activate(&self) {
        self.active
            .send_if_modified(|a| !std::mem::replace(a, true));
    }

    /// Completes once the first listing has completed.
    pub async fn wait_until_synced(&self) {
        self.activate();
        let _ = self.synced.subscribe().wait_for(|s| *s).await;
    }

    async fn refresh_forever(self: Arc<Self>) {
        let mut active = self.active.subscribe();
        if active.wait_for(|a| *a).await.is_err() {
            return;
        }
        let mut failures = 0u32;
        let backoff = stratus_runtime::backoff::Backoff::new(
            Duration::from_secs(1),
            self.options.refresh_period,
        );
        loop {
            let delay = match self.list(Duration::ZERO).await {
                Ok(()) => {
                    failures = 0;
                    self.options.refresh_period
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(error = %e, "listing the project's servers failed; the view keeps its last listing");
                    backoff.jittered(failures)
                }
            };
            tokio::time::sleep(delay).await;
        }
    }

    /// Lists the project unless a listing finished less than `min_age` ago (single flight: a
    /// caller arriving during a listing waits for it instead of starting another).
    async fn list(&self, min_age: Duration) -> Result<(), CloudError> {
        let mut last = self.last_list.lock().await;
        if last.is_some_and(|t| t.elapsed() < min_age) {
            return Ok(());
        }
        let started = std::time::SystemTime::now();
        let result = tokio::try_join!(self.nova.list_servers(), self.neutron.list_server_ports());
        match result {
            Ok((servers, ports)) => {
                let mut fresh = Snapshot::build(servers.items, ports);
                fresh.changes_since = Some(changes_since(servers.answered_at, started));
                let count = fresh.by_id.len();
                // The old snapshot is dropped here, before the next listing allocates.
                *self.snapshot.write().expect("snapshot") = fresh;
                *self.last_error.write().expect("error") = None;
                *last = Some(Instant::now());
                self.synced
                    .send_if_modified(|s| !std::mem::replace(s, true));
                tracing::debug!(servers = count, "server view refreshed");
                Ok(())
            }
            Err(e) => {
                *self.last_error.write().expect("error") = Some(e.clone());
                Err(e)
            }
        }
    }

    /// Asks Nova once for the servers that changed since the last complete listing (stopped,
    /// started, deleted: deleted ones come back with status `DELETED`) and folds them into the
    /// view, so the answers that follow are current. One request (one page for up to
    /// [`crate::compute::PAGE_SIZE`] changed servers) however many nodes the caller asks about;
    /// the node-lifecycle controller calls it once per pass while some node is NotReady.
    pub async fn refresh_changed(&self) -> Result<(), CloudError> {
        self.wait_synced().await?;
        // One at a time with the complete listings, which replace the snapshot and its time.
        let _listing = self.last_list.lock().await;
        let Some(since) = self.snapshot.read().expect("snapshot").changes_since else {
            return Ok(());
        };
        let changed = self.nova.servers_changed_since(since).await?;
        let count = changed.items.len();
        let updated = self
            .snapshot
            .write()
            .expect("snapshot")
            .update(changed.items);
        tracing::debug!(changed = count, updated, %since, "server view caught up with Nova's changes");
        Ok(())
    }

    async fn wait_synced(&self) -> Result<(), CloudError> {
        self.activate();
        let mut rx = self.synced.subscribe();
        let synced = tokio::time::timeout(self.options.sync_timeout, rx.wait_for(|s| *s))
            .await
            .is_ok_and(|r| r.is_ok());
        if synced {
            return Ok(());
        }
        Err(self
            .last_error
            .read()
            .expect("error")
            .clone()
            .unwrap_or_else(|| CloudError::Unavailable {
                operation: "ListServers".into(),
                message: "the server view has not completed its first listing".into(),
            }))
    }

    fn local(&self, keys: &[Key]) -> Result<Option<Arc<Entry>>, CloudError> {
        let snap = self.snapshot.read().expect("snapshot");
        for k in keys {
            if let Some(e) = snap.get(k)? {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }

    fn missed_recently(&self, keys: &[Key]) -> bool {
        let misses = self.misses.lock().expect("misses");
        keys.iter().all(|k| {
            misses
                .get(k)
                .is_some_and(|t| t.elapsed() < self.options.refresh_period)
        })
    }

    fn record_miss(&self, keys: &[Key], found: bool) {
        let mut misses = self.misses.lock().expect("misses");
        misses.retain(|_, t| t.elapsed() < self.options.refresh_period);
        for k in keys {
            if found {
                misses.remove(k);
            } else {
                misses.insert(k.clone(), Instant::now());
            }
        }
    }

    /// The server behind a node, from the view first. `Ok(None)`: the cloud says no server
    /// matches (a 404 for its ID, or absent from a complete listing).
    pub async fn find(
        &self,
        node: &NodeInfo,
        region: Option<&str>,
    ) -> Result<Option<Arc<Entry>>, CloudError> {
        self.wait_synced().await?;
        let keys = keys(node, region)?;
        if let Some(e) = self.local(&keys)? {
            return Ok(Some(e));
        }
        if self.missed_recently(&keys) {
            return Ok(None);
        }
        let found = match &keys[0] {
            Key::Id(id) => match self.nova.get_server(id).await? {
                Some(server) => {
                    let ports = self.neutron.ports_of(&server.id).await?;
                    let entry = Entry { server, ports };
                    self.snapshot
                        .write()
                        .expect("snapshot")
                        .insert(entry.clone());
                    Some(Arc::new(entry))
                }
                None => None,
            },
            _ => {
                self.list(self.options.relist_min_interval).await?;
                self.local(&keys)?
            }
        };
        self.record_miss(&keys, found.is_some());
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{ServerAddress, ServerFlavor};
    use crate::network::FixedIp;
    use std::collections::BTreeMap;

    fn server(id: &str, name: &str, ip: &str, status: &str) -> Server {
        Server {
            id: id.into(),
            name: name.into(),
            status: status.into(),
            flavor: ServerFlavor::default(),
            availability_zone: String::new(),
            addresses: BTreeMap::from([(
                "net".to_string(),
                vec![ServerAddress {
                    addr: ip.into(),
                    ip_type: "fixed".into(),
                }],
            )]),
            access_ipv4: String::new(),
            access_ipv6: String::new(),
            metadata: BTreeMap::new(),
            host_id: String::new(),
        }
    }

    #[test]
    fn nodes_are_found_by_id_name_or_ip() {
        let ports = vec![Port {
            id: "p1".into(),
            device_id: "s1".into(),
            device_owner: "compute:nova".into(),
            status: "ACTIVE".into(),
            fixed_ips: vec![FixedIp {
                ip_address: "10.0.0.9".into(),
            }],
        }];
        let snap = Snapshot::build(
            vec![
                server("s1", "w1", "10.0.0.1", "ACTIVE"),
                server("s2", "twin", "10.0.0.2", "ACTIVE"),
                server("s3", "twin", "10.0.0.3", "ACTIVE"),
                server("s4", "old", "10.0.0.4", "DELETED"),
            ],
            ports,
        );
        assert_eq!(
            snap.get(&Key::Id("s1".into()))
                .unwrap()
                .unwrap()
                .ports
                .len(),
            1
        );
        assert_eq!(
            snap.get(&Key::Name("w1".into()))
                .unwrap()
                .unwrap()
                .server
                .id,
            "s1"
        );
        assert_eq!(
            snap.get(&Key::Ip("10.0.0.9".into()))
                .unwrap()
                .unwrap()
                .server
                .id,
            "s1"
        );
        assert!(
            snap.get(&Key::Name("twin".into())).is_err(),
            "ambiguous names are refused"
        );
        assert!(
            snap.get(&Key::Name("old".into())).unwrap().is_none(),
            "gone servers give way"
        );
        assert!(snap.get(&Key::Name("nope".into())).unwrap().is_none());
    }

    #[test]
    fn changes_fold_into_held_servers_and_keep_their_ports() {
        let ports = vec![Port {
            id: "p1".into(),
            device_id: "s1".into(),
            device_owner: "compute:nova".into(),
            status: "ACTIVE".into(),
            fixed_ips: vec![FixedIp {
                ip_address: "10.0.0.9".into(),
            }],
        }];
        let mut snap = Snapshot::build(
            vec![
                server("s1", "w1", "10.0.0.1", "ACTIVE"),
                server("s2", "w2", "10.0.0.2", "ACTIVE"),
            ],
            ports,
        );
        let updated = snap.update(vec![
            server("s1", "w1", "10.0.0.1", "SHUTOFF"),
            server("s2", "w2-renamed", "10.0.0.2", "DELETED"),
            server("s9", "new", "10.0.0.99", "ACTIVE"),
            server("s1", "w1", "10.0.0.1", "SHUTOFF"),
        ]);
        assert_eq!(
            updated, 2,
            "s1 once, s2; the repeat and the unknown s9 change nothing"
        );
        let s1 = snap.get(&Key::Id("s1".into())).unwrap().unwrap();
        assert!(s1.server.is_shutdown());
        assert_eq!(s1.ports.len(), 1, "the listed ports stay");
        assert!(snap
            .get(&Key::Id("s2".into()))
            .unwrap()
            .unwrap()
            .server
            .is_gone());
        assert!(
            snap.get(&Key::Name("w2".into())).unwrap().is_none(),
            "the old name no longer finds the renamed server"
        );
        assert!(
            snap.get(&Key::Id("s9".into())).unwrap().is_none(),
            "a server the listing did not hold is left to the lookups (which read its ports)"
        );
    }

    #[test]
    fn changes_are_asked_for_in_novas_time_with_a_margin() {
        let nova: jiff::Timestamp = "2026-11-27T10:00:00Z".parse().unwrap();
        // Our clock is an hour behind Nova's: Nova's Date wins.
        let ours =
            std::time::SystemTime::from("2026-11-27T09:00:00Z".parse::<jiff::Timestamp>().unwrap());
        assert_eq!(
            changes_since(Some(nova), ours).to_string(),
            "2026-11-27T09:59:55Z"
        );
        assert_eq!(
            changes_since(None, ours).to_string(),
            "2026-11-27T08:58:00Z",
            "without a Date header, our clock with a wide margin"
        );
    }

    #[test]
    fn keys_follow_the_provider_id_or_the_name_and_ips() {
        let mut node = NodeInfo::named("w1");
        node.provided_node_ip = Some("10.0.0.1".into());
        assert_eq!(
            keys(&node, None).unwrap(),
            vec![Key::Name("w1".into()), Key::Ip("10.0.0.1".into())]
        );
        node.provider_id = Some("openstack:///s1".into());
        assert_eq!(keys(&node, Some("R1")).unwrap(), vec![Key::Id("s1".into())]);
        node.provider_id = Some("openstack://R2/s1".into());
        assert!(
            keys(&node, Some("R1")).is_err(),
            "another region's node is not ours"
        );
        node.provider_id = Some("aws:///z/i-1".into());
        assert!(matches!(
            keys(&node, None),
            Err(CloudError::InvalidInput(_))
        ));
    }
}
