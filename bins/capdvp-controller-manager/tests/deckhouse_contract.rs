//! capdvp started as Deckhouse's DVP module starts it (`tests/data/deckhouse-container.yaml`:
//! `--leader-elect` alone, the parent from `DVP_KUBERNETES_CONFIG_BASE64`/`DVP_NAMESPACE`, the
//! webhook Secret in the cert dir, Leases granted only in `d8-cloud-provider-dvp`) under the real
//! Cluster API manager. Only what a test must not do is changed: every listener is moved to
//! 127.0.0.1 (probes, the extension), the cert dir is a temporary directory, the kubeconfig
//! stands in for the in-cluster config, and `POD_NAMESPACE` for the service-account namespace
//! file a pod has. It stays up, answers the probes as Deckhouse probes them, elects on the
//! Lease Deckhouse's capdvp uses, reconciles a DeckhouseMachine and answers extension
//! discovery through the ExtensionConfig.

mod common;

use std::time::Duration;

use common::{Bed, TestCa, HANDLERS};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde::Deserialize;
use stratus_scenarios::ccm::CcmProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Container {
    namespace: String,
    args: Vec<String>,
    env: Vec<Env>,
    probes: Vec<Probe>,
    webhook: Webhook,
    lease: LeaseSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Env {
    name: String,
    secret_key: String,
}

#[derive(Deserialize)]
struct Probe {
    kind: String,
    scheme: String,
    port: u16,
    path: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Webhook {
    cert_dir: String,
    port: u16,
    extension_config: String,
}

#[derive(Deserialize)]
struct LeaseSpec {
    namespace: String,
    name: String,
}

/// `GET http://{address}{path}` (HTTP/1.0, as a kubelet probe): the status code.
async fn http_get(address: &str, path: &str) -> anyhow::Result<u16> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("not an HTTP answer: {answer:?}"))?;
    Ok(code)
}

/// `text` without terminal colour sequences.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The loopback port capdvp's probe server bound (its log names it).
fn probe_address(log: &str) -> Option<String> {
    plain(log)
        .lines()
        .find(|l| l.contains("serving probes over HTTP"))
        .and_then(|l| l.split("address=").nth(1))
        .map(|a| a.split_whitespace().next().unwrap_or_default().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capdvp_runs_under_deckhouses_container_spec() {
    let spec: Container =
        serde_yaml::from_str(include_str!("data/deckhouse-container.yaml")).expect("test data");
    let bed = Bed::start(true, common::capdvp_binary())
        .await
        .expect("test bed");

    // RBAC as Deckhouse grants it: Leases only in the module namespace.
    Api::<Namespace>::all(bed.mgmt.clone())
        .create(
            &PostParams::default(),
            &Namespace {
                metadata: ObjectMeta {
                    name: Some(spec.namespace.clone()),
                    ..ObjectMeta::default()
                },
                ..Namespace::default()
            },
        )
        .await
        .unwrap();
    common::bind_role(
        &bed.mgmt,
        &spec.lease.namespace,
        "capdvp-controller-manager-leader-election-role",
        common::lease_rules(),
        common::mgmt_subject(),
    )
    .await
    .unwrap();
    Api::<RoleBinding>::namespaced(bed.mgmt.clone(), "kube-system")
        .delete("capdvp-leader-election", &DeleteParams::default())
        .await
        .unwrap();

    // The environment from the Secret's keys (the bed holds their values).
    let secret = |key: &str| match key {
        "kubernetesConfigBase64" => "DVP_KUBERNETES_CONFIG_BASE64",
        "namespace" => "DVP_NAMESPACE",
        other => panic!("no value for the Secret key {other}"),
    };
    let mut vars: Vec<(String, String)> = spec
        .env
        .iter()
        .map(|e| {
            let from = secret(&e.secret_key);
            let value = bed
                .vars
                .iter()
                .find(|(k, _)| k == from)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("the bed has no {from}"));
            (e.name.clone(), value)
        })
        .collect();
    vars.push(("POD_NAMESPACE".into(), spec.namespace.clone()));

    // Deckhouse's arguments; listeners on loopback, the mounted cert dir in a temporary place.
    let ca = TestCa::write(&bed.env.tenant.dir().join("deckhouse-webhook-certs")).unwrap();
    assert_eq!(
        spec.webhook.cert_dir,
        "/tmp/k8s-webhook-server/serving-certs"
    );
    assert_eq!(spec.webhook.port, 9443);
    let webhook_port = common::free_port();
    let mut args = spec.args.clone();
    args.extend([
        "--health-probe-bind-address=127.0.0.1:0".to_string(),
        "--webhook-host=127.0.0.1".to_string(),
        format!("--webhook-port={webhook_port}"),
        format!("--webhook-cert-dir={}", ca.dir.display()),
    ]);
    let mut capdvp =
        CcmProcess::start_on(&bed.binary, &bed.env.tenant, vars, &args).expect("start capdvp");
    let capi = bed.capi.as_ref().unwrap();
    let log = |p: &CcmProcess| format!("{}\n--- cluster-api ---\n{}", p.log(), capi.log_tail(30));

    // The probes, over plain HTTP on the probed paths.
    let address = common::wait("the probe server's address in the log", WAIT, || {
        let text = capdvp.log();
        async move { Ok(probe_address(&text)) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&capdvp)));
    for probe in &spec.probes {
        assert_eq!(probe.scheme, "HTTP");
        assert_eq!(probe.port, 8081, "Deckhouse probes :8081, our default");
        let code = common::wait(
            &format!("{} {} answers 200", probe.kind, probe.path),
            WAIT,
            || {
                let address = address.clone();
                let path = probe.path.clone();
                async move { Ok((http_get(&address, &path).await? == 200).then_some(200)) }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&capdvp)));
        assert_eq!(code, 200);
    }

    // Leader on Deckhouse's Lease in the module namespace.
    let leases = Api::<Lease>::namespaced(bed.mgmt.clone(), &spec.lease.namespace);
    common::wait("the Lease held", WAIT, || async {
        let lease = leases.get_opt(&spec.lease.name).await?;
        Ok(lease
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&capdvp)));

    // It reconciles a DeckhouseMachine.
    bed.create_cluster(common::CLASS, 1).await.unwrap();
    common::wait("a ready DeckhouseMachine", WAIT, || async {
        let list = bed.deckhouse_machines().await?;
        Ok(list
            .iter()
            .any(|dm| dm.status.as_ref().is_some_and(|s| s.ready))
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&capdvp)));

    // Cluster API discovers the extension through the ExtensionConfig.
    let name = &spec.webhook.extension_config;
    common::create_extension_config(&bed.mgmt, name, webhook_port, &ca.ca_pem)
        .await
        .unwrap();
    let handlers = common::discovered_handlers(&bed.mgmt, name, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", log(&capdvp)));
    for handler in HANDLERS {
        assert!(
            handlers.contains(&format!("{handler}.{name}")),
            "{handlers:?}"
        );
    }

    // Still up, still ready.
    assert!(
        capdvp.try_exit().is_none(),
        "capdvp exited\n{}",
        log(&capdvp)
    );
    assert_eq!(http_get(&address, "/readyz").await.unwrap(), 200);
}
