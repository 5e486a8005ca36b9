//! Shared helpers of the handler's integration tests: starting the shipped binary as its
//! ServiceAccount, a webhook receiver, and reads of nodes, pods, Events and metrics.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::{Api, ListParams};
use kube::Client;
use stratus_scenarios::nth_fixture::{NthCluster, NthProcess};
use stratus_scenarios::wait::wait_for;

pub const WAIT: Duration = Duration::from_secs(40);

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_node-termination-handler"))
}

/// A free 127.0.0.1 port (bound then released).
pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Starts the handler with upstream environment variables, logging into the env's dir.
pub fn start(cluster: &NthCluster, name: &str, vars: &[(&str, String)]) -> NthProcess {
    let log = cluster.env.dir().join(format!("nth-{name}.log"));
    NthProcess::start(&binary(), &cluster.kubeconfig, vars, &[], log).expect("start the handler")
}

pub async fn node(admin: &Client, name: &str) -> Node {
    Api::<Node>::all(admin.clone())
        .get(name)
        .await
        .expect("node")
}

pub fn unschedulable(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false)
}

pub fn taint(node: &Node, key: &str) -> Option<(String, String)> {
    node.spec
        .as_ref()?
        .taints
        .as_ref()?
        .iter()
        .find(|t| t.key == key)
        .map(|t| (t.value.clone().unwrap_or_default(), t.effect.clone()))
}

pub fn label(node: &Node, key: &str) -> Option<String> {
    node.metadata.labels.as_ref()?.get(key).cloned()
}

/// Waits until `name` is cordoned, naming `process` logs on a timeout.
pub async fn wait_cordoned(admin: &Client, name: &str, nth: &NthProcess) {
    let result = wait_for(&format!("node {name} to be cordoned"), WAIT, || async {
        Ok(unschedulable(&node(admin, name).await).then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!("{e:#}\nhandler log:\n{}", nth.log());
    }
}

/// Names of the pods on `node`.
pub async fn pods_on(admin: &Client, node: &str) -> Vec<String> {
    let list = Api::<Pod>::all(admin.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .expect("list pods");
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// Waits until exactly `want` pods remain on `node`.
pub async fn wait_pods(admin: &Client, node: &str, want: &[&str], nth: &NthProcess) {
    let result = wait_for(&format!("pods on {node} to be {want:?}"), WAIT, || async {
        let pods = pods_on(admin, node).await;
        Ok((pods == want).then_some(()))
    })
    .await;
    if let Err(e) = result {
        panic!(
            "{e:#} (now {:?})\nhandler log:\n{}",
            pods_on(admin, node).await,
            nth.log()
        );
    }
}

/// `(reason, message, annotations)` of the core Events about `name` (a node or pod).
pub async fn events_about(
    admin: &Client,
    namespace: &str,
    name: &str,
) -> Vec<(String, String, BTreeMap<String, String>)> {
    Api::<Event>::namespaced(admin.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("list events")
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name))
        .map(|e| {
            (
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
                e.metadata.annotations.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits for an Event with `reason` about `name`.
pub async fn wait_event(
    admin: &Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> (String, BTreeMap<String, String>) {
    wait_for(&format!("event {reason} about {name}"), WAIT, || async {
        Ok(events_about(admin, namespace, name)
            .await
            .into_iter()
            .find(|(r, _, _)| r == reason)
            .map(|(_, m, a)| (m, a)))
    })
    .await
    .unwrap()
}

/// GETs `url` and returns the body.
pub async fn http_get(url: &str) -> anyhow::Result<String> {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let response = client.get(url.parse()?).await?;
    let body = response.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A webhook receiver on 127.0.0.1 recording request bodies and request lines.
pub struct WebhookReceiver {
    pub url: String,
    pub received: Arc<Mutex<Vec<(String, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl WebhookReceiver {
    pub async fn start() -> WebhookReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let received: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let store = received.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let store = store.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: http::Request<hyper::body::Incoming>| {
                            let store = store.clone();
                            async move {
                                let line = format!("{} {}", req.method(), req.uri());
                                let body = req
                                    .into_body()
                                    .collect()
                                    .await
                                    .map(|c| c.to_bytes())
                                    .unwrap_or_default();
                                store
                                    .lock()
                                    .unwrap()
                                    .push((line, String::from_utf8_lossy(&body).into_owned()));
                                Ok::<_, std::convert::Infallible>(http::Response::new(Full::new(
                                    Bytes::from_static(b"ok"),
                                )))
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        WebhookReceiver {
            url,
            received,
            task,
        }
    }

    pub async fn wait_body(&self) -> (String, String) {
        wait_for("a webhook notification", WAIT, || async {
            Ok(self.received.lock().unwrap().first().cloned())
        })
        .await
        .unwrap()
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// RFC 3339 of now + `seconds`.
pub fn in_seconds(seconds: i64) -> String {
    (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
