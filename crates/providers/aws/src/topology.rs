//! Network-topology labels `topology.k8s.aws/network-node-layer-N` from EC2's
//! DescribeInstanceTopology, as upstream sets them: asked only for instance types that may have a
//! topology (`SupportedTopologyInstanceTypePattern`), batched (up to 100 instance IDs per call),
//! with unsupported types, instances without an answer, and a region without the API remembered
//! for a day. A failed call never blocks a node: it is initialised without these labels.
//!
//! [`TopologyMemory`] is the pure part (what to ask, what an answer means); [`Topology`] batches
//! the questions of concurrent node initialisations into few calls.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;
use stratus_cloud::CloudError;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::instance::{Instance, InstanceState};
use stratus_aws_api::ec2::Ec2;
use stratus_aws_api::provider_id::InstanceId;

/// Prefix of the labels; the layers are numbered from 1 (farthest from the instance).
pub const NETWORK_NODE_LABEL_PREFIX: &str = "topology.k8s.aws/network-node-layer-";

/// Instance types asked about unless the cloud config sets `SupportedTopologyInstanceTypePattern`
/// (upstream's default: the hpc, trn and p families).
pub const DEFAULT_SUPPORTED_PATTERN: &str = r"^(hpc|trn|p)[0-9]+[a-z]*(-[a-z0-9]+)?(\.[0-9a-z]*)$";

/// Most instance IDs in one DescribeInstanceTopology call (EC2's limit).
pub const MAX_IDS_PER_CALL: usize = 100;

/// How long a negative answer (unsupported type, region or permission; an instance without a
/// topology) is believed, as upstream.
pub const FORGET_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The network nodes of one instance, farthest first.
pub type NetworkNodes = Arc<[String]>;

/// The labels for `nodes`: layer 1 is the first network node.
pub fn labels(nodes: &[String]) -> impl Iterator<Item = (String, String)> + '_ {
    nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("{NETWORK_NODE_LABEL_PREFIX}{}", i + 1), n.clone()))
}

/// What to do about one instance's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The answer is known.
    Known(NetworkNodes),
    /// No labels, and no call: the type has no topology (by the pattern or by EC2's answer),
    /// the region or the credentials cannot ask, or EC2 answered nothing for this instance.
    Skip,
    /// Ask EC2.
    Ask,
}

/// One instance a DescribeInstanceTopology call asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// Its ID.
    pub id: InstanceId,
    /// Its instance type.
    pub instance_type: String,
    /// Whether it was running (EC2 answers topology only for running instances).
    pub running: bool,
}

/// What EC2 has answered so far. Pure: time is an argument.
#[derive(Debug)]
pub struct TopologyMemory {
    pattern: Regex,
    known: HashMap<InstanceId, (NetworkNodes, Instant)>,
    no_answer: HashMap<InstanceId, Instant>,
    unsupported_types: HashMap<String, Instant>,
    supported_types: HashSet<String>,
    switched_off: Option<Instant>,
}

impl TopologyMemory {
    /// A memory asking about the types `pattern` matches.
    pub fn new(pattern: Regex) -> Self {
        Self {
            pattern,
            known: HashMap::new(),
            no_answer: HashMap::new(),
            unsupported_types: HashMap::new(),
            supported_types: HashSet::new(),
            switched_off: None,
        }
    }

    /// What to do about `instance` at `now`.
    pub fn decide(&self, id: &InstanceId, instance_type: &str, now: Instant) -> Decision {
        let young = |at: &Instant| now.duration_since(*at) < FORGET_AFTER;
        if instance_type.is_empty()
            || self.switched_off.as_ref().is_some_and(young)
            || !self.pattern.is_match(instance_type)
            || self.unsupported_types.get(instance_type).is_some_and(young)
            || self.no_answer.get(id).is_some_and(young)
        {
            return Decision::Skip;
        }
        match self.known.get(id) {
            Some((nodes, at)) if young(at) => Decision::Known(nodes.clone()),
            _ => Decision::Ask,
        }
    }

    /// Records EC2's answer at `now` to a call about `asked`: the instances it returned with
    /// network nodes, keyed by ID. A running instance left without nodes marks its type
    /// unsupported, unless EC2 has ever answered for that type (then only the instance is
    /// remembered, as one that is not running is).
    pub fn record(
        &mut self,
        asked: &[Asked],
        answered: &HashMap<InstanceId, Vec<String>>,
        now: Instant,
    ) {
        self.forget_old(now);
        for a in asked {
            if answered.get(&a.id).is_some_and(|n| !n.is_empty()) {
                self.supported_types.insert(a.instance_type.clone());
                self.unsupported_types.remove(&a.instance_type);
            }
        }
        for a in asked {
            match answered.get(&a.id).filter(|n| !n.is_empty()) {
                Some(nodes) => {
                    self.no_answer.remove(&a.id);
                    self.known
                        .insert(a.id.clone(), (Arc::from(nodes.as_slice()), now));
                }
                None if a.running && !self.supported_types.contains(&a.instance_type) => {
                    self.unsupported_types.insert(a.instance_type.clone(), now);
                }
                None => {
                    self.no_answer.insert(a.id.clone(), now);
                }
            }
        }
    }

    /// Records that this region or these credentials cannot ask (`UnsupportedOperation`,
    /// `UnauthorizedOperation`): nothing is asked for a day.
    pub fn switch_off(&mut self, now: Instant) {
        self.switched_off = Some(now);
    }

    fn forget_old(&mut self, now: Instant) {
        let young = |at: &Instant| now.duration_since(*at) < FORGET_AFTER;
        self.known.retain(|_, (_, at)| young(at));
        self.no_answer.retain(|_, at| young(at));
        self.unsupported_types.retain(|_, at| young(at));
    }
}

/// Whether an error means the API cannot be used here at all (region or permissions).
fn switches_off(e: &CloudError) -> bool {
    match e {
        CloudError::Unauthorized { .. } => true,
        CloudError::Rejected { code, .. } => code == "UnsupportedOperation",
        _ => false,
    }
}

struct Question {
    asked: Asked,
    reply: oneshot::Sender<Option<NetworkNodes>>,
}

/// Batches topology questions into DescribeInstanceTopology calls.
pub struct Topology {
    memory: Mutex<TopologyMemory>,
    questions: mpsc::UnboundedSender<Question>,
}

impl Topology {
    /// Starts the batcher on the current runtime; questions arriving within `window` of each
    /// other share calls.
    pub fn start(ec2: Ec2, pattern: Regex, window: Duration) -> Arc<Topology> {
        let (tx, rx) = mpsc::unbounded_channel();
        let topology = Arc::new(Topology {
            memory: Mutex::new(TopologyMemory::new(pattern)),
            questions: tx,
        });
        tokio::spawn(topology.clone().run(ec2, rx, window));
        topology
    }

    /// The network nodes of `instance`, or `None` when it has none or EC2 could not say.
    pub async fn network_nodes(&self, instance: &Instance) -> Option<NetworkNodes> {
        let decision = self.memory.lock().expect("topology memory").decide(
            &instance.id,
            &instance.instance_type,
            Instant::now(),
        );
        match decision {
            Decision::Known(nodes) => Some(nodes),
            Decision::Skip => None,
            Decision::Ask => {
                let (reply, rx) = oneshot::channel();
                let asked = Asked {
                    id: instance.id.clone(),
                    instance_type: instance.instance_type.clone(),
                    running: instance.state == InstanceState::Running,
                };
                self.questions.send(Question { asked, reply }).ok()?;
                rx.await.ok().flatten()
            }
        }
    }

    async fn run(
        self: Arc<Self>,
        ec2: Ec2,
        mut rx: mpsc::UnboundedReceiver<Question>,
        window: Duration,
    ) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            let deadline = tokio::time::sleep(window);
            tokio::pin!(deadline);
            while batch.len() < MAX_IDS_PER_CALL {
                tokio::select! {
                    _ = &mut deadline => break,
                    more = rx.recv() => match more {
                        Some(q) => batch.push(q),
                        None => break,
                    },
                }
            }
            self.answer(&ec2, batch).await;
        }
    }

    async fn answer(&self, ec2: &Ec2, batch: Vec<Question>) {
        // Questions that a previous call answered meanwhile, or duplicates, need no call.
        let now = Instant::now();
        let mut asked: Vec<Asked> = Vec::with_capacity(batch.len());
        {
            let memory = self.memory.lock().expect("topology memory");
            for q in &batch {
                let a = &q.asked;
                if memory.decide(&a.id, &a.instance_type, now) == Decision::Ask
                    && !asked.iter().any(|x| x.id == a.id)
                {
                    asked.push(a.clone());
                }
            }
        }
        if !asked.is_empty() {
            let ids: Vec<&str> = asked.iter().map(|a| a.id.as_str()).collect();
            match ec2.instance_topology(&ids).await {
                Ok(answer) => {
                    let answered: HashMap<InstanceId, Vec<String>> = answer
                        .into_iter()
                        .filter_map(|(id, nodes)| Some((InstanceId::parse(&id)?, nodes)))
                        .collect();
                    self.memory.lock().expect("topology memory").record(
                        &asked,
                        &answered,
                        Instant::now(),
                    );
                }
                Err(e) if switches_off(&e) => {
                    tracing::warn!(error = %e, "DescribeInstanceTopology cannot be used here; network-node labels are not set for a day");
                    self.memory
                        .lock()
                        .expect("topology memory")
                        .switch_off(Instant::now());
                }
                Err(e) => {
                    // Never blocks a node: it is initialised without the labels (as upstream).
                    tracing::warn!(error = %e, instances = asked.len(), "DescribeInstanceTopology failed; nodes initialised now get no network-node labels");
                }
            }
        }
        let now = Instant::now();
        let memory = self.memory.lock().expect("topology memory");
        for q in batch {
            let nodes = match memory.decide(&q.asked.id, &q.asked.instance_type, now) {
                Decision::Known(nodes) => Some(nodes),
                _ => None,
            };
            let _ = q.reply.send(nodes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(s: &str) -> InstanceId {
        InstanceId::parse(s).unwrap()
    }

    fn asked(i: &str, t: &str, running: bool) -> Asked {
        Asked {
            id: id(i),
            instance_type: t.into(),
            running,
        }
    }

    fn memory() -> TopologyMemory {
        TopologyMemory::new(Regex::new(DEFAULT_SUPPORTED_PATTERN).unwrap())
    }

    fn nodes(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_pattern_decides_which_types_are_asked_at_all() {
        let m = memory();
        let t0 = Instant::now();
        let cases = [
            ("p4d.24xlarge", Decision::Ask),
            ("p5e.48xlarge", Decision::Ask),
            ("p6-b200.48xlarge", Decision::Ask),
            ("trn1n.32xlarge", Decision::Ask),
            ("hpc7g.16xlarge", Decision::Ask),
            ("p3.2xlarge", Decision::Ask),
            ("m5.large", Decision::Skip),
            ("t3.large", Decision::Skip),
            ("c6gn.16xlarge", Decision::Skip),
            ("g5.48xlarge", Decision::Skip),
            ("", Decision::Skip),
        ];
        for (t, want) in cases {
            assert_eq!(m.decide(&id("i-01"), t, t0), want, "{t}");
        }
        let custom = TopologyMemory::new(Regex::new("^t3\\.large$").unwrap());
        assert_eq!(custom.decide(&id("i-01"), "t3.large", t0), Decision::Ask);
        assert_eq!(
            custom.decide(&id("i-01"), "p4d.24xlarge", t0),
            Decision::Skip
        );
    }

    #[test]
    fn answers_are_remembered_and_forgotten_after_a_day() {
        let mut m = memory();
        let t0 = Instant::now();
        let answered = HashMap::from([(id("i-01"), nodes(&["nn-1", "nn-2", "nn-3"]))]);
        m.record(
            &[
                asked("i-01", "p4d.24xlarge", true),
                asked("i-02", "p4d.24xlarge", false),
                asked("i-03", "p3.2xlarge", true),
            ],
            &answered,
            t0,
        );
        let known = m.decide(&id("i-01"), "p4d.24xlarge", t0);
        assert_eq!(
            known,
            Decision::Known(Arc::from(nodes(&["nn-1", "nn-2", "nn-3"]).as_slice()))
        );
        // Not running: only that instance is remembered.
        assert_eq!(m.decide(&id("i-02"), "p4d.24xlarge", t0), Decision::Skip);
        assert_eq!(m.decide(&id("i-09"), "p4d.24xlarge", t0), Decision::Ask);
        // Running without an answer, type never answered: the type is unsupported.
        assert_eq!(m.decide(&id("i-03"), "p3.2xlarge", t0), Decision::Skip);
        assert_eq!(m.decide(&id("i-04"), "p3.2xlarge", t0), Decision::Skip);
        let later = t0 + FORGET_AFTER;
        assert_eq!(m.decide(&id("i-04"), "p3.2xlarge", later), Decision::Ask);
        assert_eq!(m.decide(&id("i-01"), "p4d.24xlarge", later), Decision::Ask);
        assert_eq!(m.decide(&id("i-02"), "p4d.24xlarge", later), Decision::Ask);
    }

    #[test]
    fn a_type_ever_answered_is_never_marked_unsupported() {
        let mut m = memory();
        let t0 = Instant::now();
        // One of two running p5s answered: the other is only remembered itself.
        let answered = HashMap::from([(id("i-01"), nodes(&["a", "b", "c"]))]);
        m.record(
            &[
                asked("i-01", "p5.48xlarge", true),
                asked("i-02", "p5.48xlarge", true),
            ],
            &answered,
            t0,
        );
        assert_eq!(m.decide(&id("i-02"), "p5.48xlarge", t0), Decision::Skip);
        assert_eq!(m.decide(&id("i-03"), "p5.48xlarge", t0), Decision::Ask);
        // A later lone miss of that type does not mark it either.
        m.record(&[asked("i-03", "p5.48xlarge", true)], &HashMap::new(), t0);
        assert_eq!(m.decide(&id("i-04"), "p5.48xlarge", t0), Decision::Ask);
        // An empty node list counts as no answer.
        let empty = HashMap::from([(id("i-05"), Vec::new())]);
        m.record(&[asked("i-05", "trn1.2xlarge", true)], &empty, t0);
        assert_eq!(m.decide(&id("i-06"), "trn1.2xlarge", t0), Decision::Skip);
    }

    #[test]
    fn a_region_without_the_api_is_not_asked_for_a_day() {
        let mut m = memory();
        let t0 = Instant::now();
        m.switch_off(t0);
        assert_eq!(m.decide(&id("i-01"), "p4d.24xlarge", t0), Decision::Skip);
        assert_eq!(
            m.decide(&id("i-01"), "p4d.24xlarge", t0 + FORGET_AFTER),
            Decision::Ask
        );
        assert!(switches_off(&CloudError::Rejected {
            operation: "DescribeInstanceTopology".into(),
            code: "UnsupportedOperation".into(),
            message: String::new(),
        }));
        assert!(switches_off(&CloudError::Unauthorized {
            operation: "DescribeInstanceTopology".into(),
            message: String::new(),
        }));
        assert!(!switches_off(&CloudError::Throttled {
            operation: "DescribeInstanceTopology".into(),
            message: String::new(),
        }));
    }

    #[test]
    fn labels_number_layers_from_one() {
        let got: Vec<(String, String)> =
            labels(&nodes(&["nn-a", "nn-b", "nn-c", "nn-d"])).collect();
        assert_eq!(got[0].0, "topology.k8s.aws/network-node-layer-1");
        assert_eq!(
            got[3],
            (
                "topology.k8s.aws/network-node-layer-4".into(),
                "nn-d".into()
            )
        );
    }
}
