//! Node-termination-handler scenarios: the handler under its shipped RBAC (a ServiceAccount
//! token from the real apiserver), nodes and pods created directly, a kubelet stand-in that
//! finishes terminating pods, the handler process, and the AWS side in moto (an SQS queue fed
//! by an EventBridge rule, tagged instances).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use aws_config::{BehaviorVersion, Region};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, Node, NodeCondition, NodeSpec, NodeStatus, Pod, PodSpec,
    ServiceAccount, Volume,
};
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::Client;
use stratus_testenv::{Identity, TestEnv};

use crate::kube_fixture::{apply_rbac_manifest, repo_root};

/// The shipped RBAC manifest.
pub const RBAC: &str = "deploy/node-termination-handler/rbac.yaml";
/// Annotation telling the kubelet stand-in how long after the delete request the pod is
/// reported gone, whatever its grace period (a slow or unreachable kubelet); default: its grace.
pub const STOP_SECONDS: &str = "stratus.test/stop-seconds";

/// The environment plus a kubeconfig of the handler's ServiceAccount.
pub struct NthCluster {
    /// The local control plane and emulated AWS.
    pub env: TestEnv,
    /// A cluster-admin client (the test's hands).
    pub admin: Client,
    /// A kubeconfig holding the handler ServiceAccount's token.
    pub kubeconfig: PathBuf,
}

impl NthCluster {
    /// Starts the environment, applies the shipped RBAC and issues the handler a token.
    pub async fn start() -> anyhow::Result<NthCluster> {
        let env = TestEnv::start().await?;
        let admin = env.kube_client(Identity::Admin).await?;
        apply_rbac_manifest(&admin, &repo_root().join(RBAC)).await?;
        let token =
            service_account_token(&admin, "kube-system", "aws-node-termination-handler").await?;
        let kubeconfig = env.dir().join("kubeconfig-nth.yaml");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
                env.apiserver_url()
            ),
        )?;
        Ok(NthCluster {
            env,
            admin,
            kubeconfig,
        })
    }
}

/// A token of ServiceAccount `namespace/name` (TokenRequest, one hour).
pub async fn service_account_token(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec!["https://kubernetes.default.svc".into()],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = Api::<ServiceAccount>::namespaced(admin.clone(), namespace)
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .context("TokenRequest")?;
    answer
        .status
        .map(|s| s.token)
        .context("TokenRequest without a token")
}

/// A Ready node with a providerID and the labels EKS nodes carry.
pub async fn create_node(admin: &Client, name: &str, provider_id: &str) -> anyhow::Result<Node> {
    let nodes: Api<Node> = Api::all(admin.clone());
    let node = Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".into(), name.into()),
                ("topology.kubernetes.io/zone".into(), "us-east-1a".into()),
                ("topology.kubernetes.io/region".into(), "us-east-1".into()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            ..NodeSpec::default()
        }),
        ..Node::default()
    };
    nodes.create(&PostParams::default(), &node).await?;
    set_ready(admin, name, true).await
}

/// Sets the node's Ready condition.
pub async fn set_ready(admin: &Client, name: &str, ready: bool) -> anyhow::Result<Node> {
    let status = NodeStatus {
        conditions: Some(vec![NodeCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..NodeCondition::default()
        }]),
        ..NodeStatus::default()
    };
    Ok(Api::<Node>::all(admin.clone())
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await?)
}

/// How a test pod looks.
#[derive(Debug, Clone, Default)]
pub struct PodOptions {
    /// `terminationGracePeriodSeconds`.
    pub grace_seconds: Option<i64>,
    /// How long the kubelet stand-in takes to report the pod gone once asked (default: the
    /// grace period).
    pub stop_seconds: Option<u64>,
    /// Kind of a controller owner reference (`DaemonSet`, `ReplicaSet`), if any.
    pub owner_kind: Option<&'static str>,
    /// Whether the pod mounts an emptyDir volume.
    pub empty_dir: bool,
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
}

/// Creates a running pod bound to `node`.
pub async fn create_pod(
    admin: &Client,
    namespace: &str,
    name: &str,
    node: &str,
    o: &PodOptions,
) -> anyhow::Result<Pod> {
    let mut annotations = BTreeMap::new();
    if let Some(s) = o.stop_seconds {
        annotations.insert(STOP_SECONDS.to_owned(), s.to_string());
    }
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(o.labels.clone()),
            annotations: Some(annotations),
            owner_references: o.owner_kind.map(|kind| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: kind.into(),
                    name: format!("{name}-owner"),
                    uid: format!("{name}-owner-uid"),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            termination_grace_period_seconds: o.grace_seconds,
            containers: vec![Container {
                name: "c".into(),
                image: Some("registry.k8s.io/pause:3.10".into()),
                ..Container::default()
            }],
            volumes: o.empty_dir.then(|| {
                vec![Volume {
                    name: "scratch".into(),
                    empty_dir: Some(EmptyDirVolumeSource::default()),
                    ..Volume::default()
                }]
            }),
            ..PodSpec::default()
        }),
        ..Pod::default()
    };
    let created = Api::<Pod>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("create pod {namespace}/{name}"))?;
    Api::<Pod>::namespaced(admin.clone(), namespace)
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": {
                "phase": "Running",
                "conditions": [{ "type": "Ready", "status": "True" }],
            } })),
        )
        .await?;
    Ok(created)
}

/// A PodDisruptionBudget over pods labelled `app=<app>`, with the status the disruption
/// controller would write (`disruptionsAllowed`), since no controller-manager runs here.
pub async fn create_pdb(
    admin: &Client,
    namespace: &str,
    app: &str,
    disruptions_allowed: i32,
) -> anyhow::Result<()> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(admin.clone(), namespace);
    let pdb = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(app.into()),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("app".into(), app.into())])),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    };
    let created = api.create(&PostParams::default(), &pdb).await?;
    let generation = created.metadata.generation.unwrap_or(1);
    api.patch_status(
        app,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": {
            "observedGeneration": generation,
            "disruptionsAllowed": disruptions_allowed,
            "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1,
        }})),
    )
    .await?;
    Ok(())
}

/// Plays the kubelet for terminating pods: a pod is removed when its grace period ends (its
/// deletion timestamp), or [`STOP_SECONDS`] after it started terminating. Runs until dropped.
pub struct KubeletSim {
    task: tokio::task::JoinHandle<()>,
}

impl KubeletSim {
    /// Starts the stand-in watching pods with `admin`.
    pub fn start(admin: Client) -> KubeletSim {
        let task = tokio::spawn(async move {
            let pods: Api<Pod> = Api::all(admin.clone());
            // uid -> when the pod was first seen terminating
            let mut seen: BTreeMap<String, jiff::Timestamp> = BTreeMap::new();
            loop {
                if let Ok(list) = pods.list(&ListParams::default()).await {
                    for pod in list.items {
                        let Some(deleted_at) = pod.metadata.deletion_timestamp.as_ref() else {
                            continue;
                        };
                        let uid = pod.metadata.uid.clone().unwrap_or_default();
                        if !seen.contains_key(&uid)
                            && std::env::var_os("STRATUS_DEBUG_KUBELET").is_some()
                        {
                            eprintln!("kubelet-sim: {:?} terminating at {} deletionTimestamp={} dgps={:?}", pod.metadata.name, jiff::Timestamp::now(), deleted_at.0, pod.metadata.deletion_grace_period_seconds);
                        }
                        let first = *seen.entry(uid).or_insert_with(jiff::Timestamp::now);
                        // The deletion timestamp is when the grace period ends.
                        let done_at = match pod
                            .metadata
                            .annotations
                            .as_ref()
                            .and_then(|a| a.get(STOP_SECONDS))
                            .and_then(|v| v.parse::<i64>().ok())
                        {
                            Some(stop) => first + jiff::SignedDuration::from_secs(stop),
                            None => deleted_at.0,
                        };
                        if jiff::Timestamp::now() >= done_at {
                            let ns = pod.metadata.namespace.clone().unwrap_or_default();
                            let name = pod.metadata.name.clone().unwrap_or_default();
                            let result = Api::<Pod>::namespaced(admin.clone(), &ns)
                                .delete(
                                    &name,
                                    &DeleteParams {
                                        grace_period_seconds: Some(0),
                                        ..DeleteParams::default()
                                    },
                                )
                                .await;
                            if std::env::var_os("STRATUS_DEBUG_KUBELET").is_some() {
                                eprintln!("kubelet-sim: removed {ns}/{name} (deletion timestamp {}): {:?}", deleted_at.0, result.map(|_| ()));
                            }
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        KubeletSim { task }
    }
}

impl Drop for KubeletSim {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The handler binary built next to the test (`target/<profile>/node-termination-handler`).
pub fn nth_binary() -> anyhow::Result<PathBuf> {
    crate::ccm::sibling_binary("node-termination-handler")
}

/// A running handler process, killed on drop.
pub struct NthProcess {
    child: Child,
    log: PathBuf,
}

impl NthProcess {
    /// Starts the handler with `vars` (upstream's environment variables) and `args`, as the
    /// handler's ServiceAccount (`kubeconfig`).
    pub fn start(
        bin: &Path,
        kubeconfig: &Path,
        vars: &[(&str, String)],
        args: &[String],
        log: PathBuf,
    ) -> anyhow::Result<NthProcess> {
        let file = std::fs::File::create(&log)?;
        let mut cmd = Command::new(bin);
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("KUBECONFIG", kubeconfig)
            .env(
                "RUST_LOG",
                "warn,stratus_termination=debug,stratus_aws=info",
            )
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        Ok(NthProcess {
            child: cmd
                .spawn()
                .with_context(|| format!("starting {}", bin.display()))?,
            log,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The exit status if it has exited.
    pub fn try_exit(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Resident set size in KiB (from /proc).
    pub fn rss_kib(&self) -> Option<u64> {
        self.status_kib("VmRSS:")
    }

    /// A KiB field of /proc/PID/status (`VmRSS:`, `RssAnon:`, `RssFile:`...).
    pub fn status_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        status
            .lines()
            .find(|l| l.starts_with(field))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }
}

impl Drop for NthProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// AWS clients on the environment's endpoint (moto's test credentials, us-east-1).
pub async fn aws_config(endpoint: &str) -> aws_types::SdkConfig {
    let creds = aws_sdk_sqs::config::Credentials::new("testing", "testing", None, None, "scenario");
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(crate::ec2_fixture::REGION))
        .endpoint_url(endpoint)
        .credentials_provider(creds)
        .load()
        .await
}

/// An SQS queue fed by an EventBridge rule for the events the handler takes (the real
/// delivery path: PutEvents → rule → SQS target).
pub struct EventQueue {
    /// The SQS queue URL.
    pub url: String,
    /// An SQS client on the emulator.
    pub sqs: aws_sdk_sqs::Client,
    /// An EventBridge client on the emulator.
    pub events: aws_sdk_eventbridge::Client,
}

impl EventQueue {
    /// Creates the queue `name` and the EventBridge rules feeding it.
    pub async fn create(conf: &aws_types::SdkConfig, name: &str) -> anyhow::Result<EventQueue> {
        let sqs = aws_sdk_sqs::Client::new(conf);
        let events = aws_sdk_eventbridge::Client::new(conf);
        let url = sqs
            .create_queue()
            .queue_name(name)
            .send()
            .await?
            .queue_url
            .context("queue url")?;
        let attrs = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
            .send()
            .await?;
        let arn = attrs
            .attributes()
            .and_then(|a| a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn))
            .context("queue arn")?
            .clone();
        let pattern = serde_json::json!({ "source": ["aws.ec2", "aws.autoscaling", "aws.health"] });
        events
            .put_rule()
            .name(format!("{name}-rule"))
            .event_pattern(pattern.to_string())
            .send()
            .await?;
        events
            .put_targets()
            .rule(format!("{name}-rule"))
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("sqs")
                    .arn(arn)
                    .build()?,
            )
            .send()
            .await?;
        Ok(EventQueue { url, sqs, events })
    }

    /// Puts an event as AWS would emit it (`detail` as JSON).
    pub async fn put(
        &self,
        source: &str,
        detail_type: &str,
        detail: serde_json::Value,
    ) -> anyhow::Result<()> {
        let out = self
            .events
            .put_events()
            .entries(
                aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                    .source(source)
                    .detail_type(detail_type)
                    .detail(detail.to_string())
                    .build(),
            )
            .send()
            .await?;
        anyhow::ensure!(out.failed_entry_count() == 0, "PutEvents failed: {out:?}");
        Ok(())
    }

    /// Messages visible plus in flight.
    pub async fn depth(&self) -> anyhow::Result<u64> {
        use aws_sdk_sqs::types::QueueAttributeName as A;
        let attrs = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.url)
            .attribute_names(A::ApproximateNumberOfMessages)
            .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await?;
        let get = |name: A| {
            attrs
                .attributes()
                .and_then(|a| a.get(&name))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Ok(get(A::ApproximateNumberOfMessages) + get(A::ApproximateNumberOfMessagesNotVisible))
    }
}

/// Tags instances (e.g. with the managed tag).
pub async fn tag_instances(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
    key: &str,
    value: &str,
) -> anyhow::Result<()> {
    for chunk in ids.chunks(500) {
        ec2.create_tags()
            .set_resources(Some(chunk.to_vec()))
            .tags(
                aws_sdk_ec2::types::Tag::builder()
                    .key(key)
                    .value(value)
                    .build(),
            )
            .send()
            .await?;
    }
    Ok(())
}
