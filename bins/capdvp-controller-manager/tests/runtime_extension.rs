//! capdvp's runtime extension under the real Cluster API manager (RuntimeSDK on): an
//! ExtensionConfig pointing at capdvp's extension server on 127.0.0.1 (certificate of a test
//! CA, the CA as caBundle) is discovered by Cluster API, which lists capdvp's three handlers in
//! its status. Then the in-place hooks are called as Cluster API calls them, with the objects of
//! a running machine: CanUpdateMachineSet covers a run-policy change and leaves a memory change to
//! a rollout; UpdateMachine patches the running VM in the parent (same VM, new policy) and then
//! reports done. A rotated certificate is served without a restart. The calls are counted on plain-HTTP `/metrics` (`--metrics-secure=false`); a
//! second replica's default secure `/metrics` refuses a request without a token.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{Bed, TestCa, CLUSTER, HANDLERS, NS};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use stratus_capdvp::extension::hooks::{Patch, API_VERSION};
use stratus_dvp_api::VirtualMachine;
use stratus_testenv::core::https::{self, Trust};

const WAIT: Duration = Duration::from_secs(90);
const BASE: &str = "/hooks.runtime.cluster.x-k8s.io/v1alpha1";

fn templates() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1alpha1",
            "DeckhouseMachineTemplate",
        ),
        "deckhousemachinetemplates",
    )
}

async fn call(address: SocketAddr, trust: &Trust, path: &str, body: Value) -> Value {
    let answer = https::post_json(address, &format!("{BASE}/{path}"), &body, trust)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e:#}"));
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    assert_eq!(answer.content_type, "application/json");
    serde_json::from_str(&answer.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_api_discovers_the_extension_and_the_in_place_hooks_answer() {
    let bed = Bed::start(true, common::capdvp_binary())
        .await
        .expect("test bed");
    let ca = TestCa::write(&bed.env.tenant.dir().join("capdvp-webhook-certs")).unwrap();
    let port = common::free_port();
    let metrics_port = common::free_port();
    let capdvp = bed.start_capdvp(&[
        "--webhook-host=127.0.0.1",
        &format!("--webhook-port={port}"),
        &format!("--webhook-cert-dir={}", ca.dir.display()),
        &format!("--metrics-bind-address=127.0.0.1:{metrics_port}"),
        "--metrics-secure=false",
    ]);
    let capi = bed.capi.as_ref().unwrap();
    let log = || {
        format!(
            "{}\n--- cluster-api ---\n{}",
            capdvp.log(),
            capi.log_tail(30)
        )
    };

    // Cluster API discovers the handlers through the ExtensionConfig.
    common::create_extension_config(&bed.mgmt, "capdvp-extension-config", port, &ca.ca_pem)
        .await
        .unwrap();
    let mut handlers = common::discovered_handlers(&bed.mgmt, "capdvp-extension-config", WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));
    handlers.sort();
    let mut want: Vec<String> = HANDLERS
        .iter()
        .map(|h| format!("{h}.capdvp-extension-config"))
        .collect();
    want.sort();
    assert_eq!(handlers, want);

    // A running machine.
    bed.create_cluster(common::CLASS, 1).await.unwrap();
    let dm = common::wait("a ready DeckhouseMachine", WAIT, || async {
        let list = bed.deckhouse_machines().await?;
        Ok(list
            .into_iter()
            .find(|dm| dm.status.as_ref().is_some_and(|s| s.ready)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));
    let vms = Api::<VirtualMachine>::namespaced(bed.parent.clone(), bed.env.namespace());
    let vm = vms.get(dm.name()).await.unwrap();
    assert_eq!(
        vm.spec.run_policy.as_deref(),
        Some("AlwaysOnUnlessStoppedManually")
    );

    let address: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let trust = Trust::Only(CertificateDer::from_pem_slice(ca.ca_pem.as_bytes()).unwrap());

    // CanUpdateMachineSet over the real template: the run policy in place, memory by rollout.
    let template = Api::<DynamicObject>::namespaced_with(bed.mgmt.clone(), NS, &templates())
        .get("workers")
        .await
        .unwrap();
    let current = serde_json::to_value(&template).unwrap();
    let mut desired = current.clone();
    desired["metadata"]["name"] = json!("workers-2");
    desired["spec"]["template"]["spec"]["runPolicy"] = json!("AlwaysOn");
    desired["spec"]["template"]["spec"]["memory"] = json!("4Gi");
    let answer = call(
        address,
        &trust,
        "canupdatemachineset/dvp-can-update-machineset",
        json!({
            "apiVersion": API_VERSION, "kind": "CanUpdateMachineSetRequest",
            "current": {"machineSet": {"metadata": {"name": "workers-a"}}, "infrastructureMachineTemplate": current},
            "desired": {"machineSet": {"metadata": {"name": "workers-b"}}, "infrastructureMachineTemplate": desired},
        }),
    )
    .await;
    assert_eq!(answer["status"], "Success", "{answer}");
    let patch: Patch =
        serde_json::from_value(answer["infrastructureMachineTemplatePatch"].clone()).unwrap();
    assert_eq!(
        patch.document(),
        Some(json!({"spec": {"template": {"spec": {"runPolicy": "AlwaysOn"}}}}))
    );
    assert!(
        answer["message"].as_str().unwrap().contains("memory"),
        "{answer}"
    );

    // UpdateMachine with the machine as Cluster API would have updated it: the VM is patched in
    // the parent (the same VM), then the hook reports done.
    let mut desired_dm = serde_json::to_value(&dm).unwrap();
    desired_dm["spec"]["runPolicy"] = json!("AlwaysOn");
    let request = json!({
        "apiVersion": API_VERSION, "kind": "UpdateMachineRequest",
        "desired": {
            "machine": {"metadata": {"name": dm.name(), "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": CLUSTER}}},
            "infrastructureMachine": desired_dm,
        },
    });
    let path = "updatemachine/dvp-update-machine";
    let first = call(address, &trust, path, request.clone()).await;
    assert_eq!(first["status"], "Success", "{first}");
    assert!(first["retryAfterSeconds"].as_i64().unwrap() > 0, "{first}");
    let patched = vms.get(dm.name()).await.unwrap();
    assert_eq!(patched.spec.run_policy.as_deref(), Some("AlwaysOn"));
    assert_eq!(patched.metadata.uid, vm.metadata.uid, "the same VM");
    let second = call(address, &trust, path, request).await;
    assert_eq!(second["status"], "Success", "{second}");
    assert_eq!(second["retryAfterSeconds"], 0, "{second}");

    // A machine whose VM is gone cannot be updated in place.
    let mut gone = desired_dm.clone();
    gone["metadata"]["name"] = json!("no-such-machine");
    let failed = call(
        address,
        &trust,
        path,
        json!({"apiVersion": API_VERSION, "kind": "UpdateMachineRequest",
               "desired": {"machine": {}, "infrastructureMachine": gone}}),
    )
    .await;
    assert_eq!(failed["status"], "Failure", "{failed}");

    // Not a hook, not a POST, not a request.
    let not_found = https::post_json(
        address,
        &format!("{BASE}/updatemachine/other"),
        &json!({}),
        &trust,
    )
    .await
    .unwrap();
    assert_eq!(not_found.status, 404);
    let get = https::get(address, &format!("{BASE}/discovery"), None, &trust)
        .await
        .unwrap();
    assert_eq!(get.status, 405);
    let bad = https::post_json(
        address,
        &format!("{BASE}/canupdatemachine/dvp-can-update-machine"),
        &json!({"current": "not an object"}),
        &trust,
    )
    .await
    .unwrap();
    assert_eq!(bad.status, 400, "{}", bad.body);

    // A rotated certificate (a new CA) is served without a restart.
    let rotated = TestCa::write(&ca.dir).unwrap();
    let new_trust = Trust::Only(CertificateDer::from_pem_slice(rotated.ca_pem.as_bytes()).unwrap());
    let discovery = format!("{BASE}/discovery");
    let status = common::wait("the rotated certificate served", WAIT, || {
        let (discovery, new_trust) = (&discovery, &new_trust);
        async move {
            Ok(https::post_json(address, discovery, &json!({}), new_trust)
                .await
                .ok()
                .map(|a| a.status))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", log()));
    assert_eq!(status, 200);

    // The calls are counted, on plain-HTTP /metrics (--metrics-secure=false).
    let metrics = plain_get(&format!("127.0.0.1:{metrics_port}"), "/metrics").await;
    assert!(metrics.starts_with("HTTP/1.1 200"), "{metrics}");
    for line in [
        r#"capdvp_extension_requests_total{hook="UpdateMachine",outcome="success"} 2"#,
        r#"capdvp_extension_requests_total{hook="UpdateMachine",outcome="failure"} 1"#,
        r#"capdvp_extension_requests_total{hook="CanUpdateMachine",outcome="error"} 1"#,
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }

    // A second replica (waiting for the lease) serves /metrics the secure way by default: no
    // token, no metrics.
    let secure_port = common::free_port();
    let _second = bed.start_capdvp(&[&format!("--metrics-bind-address=127.0.0.1:{secure_port}")]);
    let secure: SocketAddr = format!("127.0.0.1:{secure_port}").parse().unwrap();
    let status = common::wait("the second replica's HTTPS /metrics", WAIT, || async move {
        Ok(https::get(secure, "/metrics", None, &Trust::Any)
            .await
            .ok()
            .map(|a| a.status))
    })
    .await
    .unwrap();
    assert_eq!(status, 401);
}

/// `GET http://{address}{path}` over HTTP/1.1 (connection closed): the whole answer.
async fn plain_get(address: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}
