//! The service controller with `--cloud-provider=dvp`: a tenant LoadBalancer Service becomes a
//! LoadBalancer Service in the parent namespace (Deckhouse's name rule, ports to the tenant
//! NodePorts, settings copied) selecting the target nodes' VMs by a per-LB label; the tenant
//! ingress is written within a second of the parent Service getting one (a watch, not a poll);
//! target changes move the labels; under `externalTrafficPolicy: Local` an EndpointSlice change
//! moves them to the nodes whose health check passes; deleting the Service leaves no parent object and no label.
//! Where the platform offers ServiceWithHealthchecks (its CRD, the ModuleConfig on, the shipped
//! ClusterRole to read it), one of those stands in for the parent Service.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, ListParams};
use kube::Client;
use stratus_dvp_api::VirtualMachine;
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::{bind_parent_cluster_role, parent_role_rules};
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::{service_fixture, wait_for};
use stratus_testenv::{DvpEnv, Identity};

const WAIT: Duration = Duration::from_secs(60);
/// How long the parent's load-balancer implementation takes to assign an address.
const PARENT_LB_DELAY: Duration = Duration::from_secs(3);

fn ccm_binary() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_cloud-controller-manager"))
}

fn labelled_with(vms: &[VirtualMachine], key: &str) -> Vec<String> {
    let mut names: Vec<String> = vms
        .iter()
        .filter(|vm| vm.label(key) == Some("loadbalancer"))
        .map(|vm| vm.name().to_string())
        .collect();
    names.sort();
    names
}

fn tenant_ingress(svc: &Service) -> Option<String> {
    svc.status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

async fn node_ready(admin: &Client, name: &str, ccm: &CcmProcess) {
    wait_for(&format!("{name} initialised"), WAIT, || async {
        Ok(get_node(admin, name)
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    service_fixture::set_ready(admin, name, true).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_load_balancer_follows_its_service() {
    let env = DvpEnv::start().await.expect("DVP environment");
    env.sim().set_knobs(|k| k.lb_delay = PARENT_LB_DELAY);
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let parent = env.parent_admin().await.unwrap();
    let fixture = DvpFixture::new(parent.clone(), env.namespace(), "lb");
    for n in ["a", "b"] {
        fixture
            .create_vm(&format!("vm-{n}"), &format!("node-{n}"))
            .await
            .unwrap();
    }
    for n in ["a", "b"] {
        fixture.running_ip(&format!("vm-{n}")).await.unwrap();
        kube_fixture::create_uninitialized_node(&admin, &format!("node-{n}"), &[], BTreeMap::new())
            .await
            .unwrap();
    }
    let args: Vec<String> = [
        "--cloud-provider=dvp",
        "--controllers=cloud-node,cloud-node-lifecycle,service",
        "--node-monitor-period=500ms",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=500ms",
        "--v=4",
    ]
    .map(String::from)
    .to_vec();
    // The CCM runs under the shipped least-privilege parent Role.
    let vars = env
        .bound_account_env(
            "stratus-dvp-cloud-controller-manager",
            parent_role_rules().unwrap(),
        )
        .await
        .expect("the shipped parent Role");
    let ccm = CcmProcess::start_on(&ccm_binary(), &env.tenant, vars, &args).expect("start ccm");
    node_ready(&admin, "node-a", &ccm).await;
    node_ready(&admin, "node-b", &ccm).await;

    let annotations = BTreeMap::from([("example.com/team".to_string(), "web".to_string())]);
    let svc =
        service_fixture::create_lb_service(&admin, "default", "front", &[80, 443], annotations)
            .await
            .unwrap();
    let uid = svc.metadata.uid.clone().unwrap();
    let lb_name: String = std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect();
    let label_key = format!("dvp.deckhouse.io/{lb_name}");
    let parent_services = Api::<Service>::namespaced(parent.clone(), env.namespace());
    let tenant_services = Api::<Service>::namespaced(admin.clone(), "default");
    let vms = Api::<VirtualMachine>::namespaced(parent.clone(), env.namespace());

    // The parent Service: Deckhouse's name, ports to the tenant NodePorts, settings copied.
    let parent_svc = wait_for("the parent Service", WAIT, || async {
        Ok(parent_services.get_opt(&lb_name).await?)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    let tenant_svc = tenant_services.get("front").await.unwrap();
    let node_ports: Vec<(i32, i32)> = tenant_svc
        .spec
        .unwrap()
        .ports
        .unwrap()
        .iter()
        .map(|p| (p.port, p.node_port.unwrap()))
        .collect();
    let spec = parent_svc.spec.clone().unwrap();
    let forwarded: Vec<(i32, i32)> = spec
        .ports
        .unwrap()
        .iter()
        .map(|p| match p.target_port {
            Some(IntOrString::Int(t)) => (p.port, t),
            ref other => panic!("targetPort {other:?}"),
        })
        .collect();
    assert_eq!(forwarded, node_ports);
    assert_eq!(
        spec.selector.unwrap(),
        BTreeMap::from([(label_key.clone(), "loadbalancer".to_string())])
    );
    assert_eq!(
        parent_svc.metadata.annotations.unwrap()["example.com/team"],
        "web"
    );
    wait_for("both VMs labelled", WAIT, || async {
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((labelled_with(&all, &label_key) == ["vm-a", "vm-b"]).then_some(()))
    })
    .await
    .unwrap();

    // The tenant ingress follows the parent's within a second (the parent takes seconds).
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut parent_seen = None;
    let lag = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no ingress\n{}",
            ccm.log()
        );
        let now = tokio::time::Instant::now();
        if parent_seen.is_none()
            && tenant_ingress(&parent_services.get(&lb_name).await.unwrap()).is_some()
        {
            parent_seen = Some(now);
        }
        if let Some(ip) = tenant_ingress(&tenant_services.get("front").await.unwrap()) {
            let parent_ip = tenant_ingress(&parent_services.get(&lb_name).await.unwrap());
            assert_eq!(Some(ip), parent_ip);
            break now - parent_seen.unwrap_or(now);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        lag < Duration::from_secs(1),
        "tenant ingress {lag:?} after the parent's\n--- ccm log ---\n{}",
        ccm.log()
    );

    // A node leaves the targets: its VM loses the label.
    service_fixture::set_label(
        &admin,
        "node-b",
        "node.kubernetes.io/exclude-from-external-load-balancers",
        Some(""),
    )
    .await
    .unwrap();
    wait_for("vm-b unlabelled", WAIT, || async {
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((labelled_with(&all, &label_key) == ["vm-a"]).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));

    // Deleting the Service leaves nothing in the parent.
    service_fixture::delete_service(&admin, "default", "front")
        .await
        .unwrap();
    wait_for("no parent Service and no label", WAIT, || async {
        let gone = parent_services.get_opt(&lb_name).await?.is_none();
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((gone && labelled_with(&all, &label_key).is_empty()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
}

/// Answers every connection on `listener` with `200 OK`, as kube-proxy's health check does for a
/// node with a local endpoint.
/// Plays kube-proxy's health check on `listener`: 200 while `healthy` holds, else 503.
async fn serve_health(listener: tokio::net::TcpListener, healthy: Arc<AtomicBool>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let answer: &[u8] = if healthy.load(Ordering::SeqCst) {
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
        } else {
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
        };
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let _ = stream.read(&mut buf).await;
            let _ = stream.write_all(answer).await;
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_local_traffic_policy_targets_only_nodes_with_local_endpoints() {
    let env = DvpEnv::start().await.expect("DVP environment");
    // VMs on loopback addresses, so the test can play kube-proxy's health check on them.
    env.sim().set_knobs(|k| k.vm_ip_prefix = "127.66".into());
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let parent = env.parent_admin().await.unwrap();
    let fixture = DvpFixture::new(parent.clone(), env.namespace(), "etp");
    let mut ips = Vec::new();
    for n in ["a", "b"] {
        fixture
            .create_vm(&format!("vm-{n}"), &format!("node-{n}"))
            .await
            .unwrap();
        ips.push(fixture.running_ip(&format!("vm-{n}")).await.unwrap());
        kube_fixture::create_uninitialized_node(&admin, &format!("node-{n}"), &[], BTreeMap::new())
            .await
            .unwrap();
    }
    // Only vm-a's "kube-proxy" reports a local endpoint; vm-b's answers 503.
    let mut bound = None;
    for port in 31500..31600u16 {
        let (Ok(a), Ok(b)) = (
            tokio::net::TcpListener::bind((ips[0].as_str(), port)).await,
            tokio::net::TcpListener::bind((ips[1].as_str(), port)).await,
        ) else {
            continue;
        };
        bound = Some((port, a, b));
        break;
    }
    let (hc_port, listener_a, listener_b) =
        bound.expect("a free health-check port on both VMs' addresses");
    let (a_healthy, b_healthy) = (
        Arc::new(AtomicBool::new(true)),
        Arc::new(AtomicBool::new(false)),
    );
    tokio::spawn(serve_health(listener_a, a_healthy.clone()));
    tokio::spawn(serve_health(listener_b, b_healthy.clone()));

    let vars = env
        .bound_account_env(
            "stratus-dvp-cloud-controller-manager",
            parent_role_rules().unwrap(),
        )
        .await
        .expect("the shipped parent Role");
    let args: Vec<String> = [
        "--cloud-provider=dvp",
        "--controllers=cloud-node,cloud-node-lifecycle,service",
        "--node-monitor-period=500ms",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=500ms",
        "--v=4",
    ]
    .map(String::from)
    .to_vec();
    let ccm = CcmProcess::start_on(&ccm_binary(), &env.tenant, vars, &args).expect("start ccm");
    node_ready(&admin, "node-a", &ccm).await;
    node_ready(&admin, "node-b", &ccm).await;

    let mut svc = Service::default();
    svc.metadata.name = Some("local".into());
    svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
        type_: Some("LoadBalancer".into()),
        external_traffic_policy: Some("Local".into()),
        health_check_node_port: Some(i32::from(hc_port)),
        selector: Some(BTreeMap::from([("app".to_string(), "local".to_string())])),
        ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
            name: Some("http".into()),
            port: 80,
            ..Default::default()
        }]),
        ..Default::default()
    });
    let created = Api::<Service>::namespaced(admin.clone(), "default")
        .create(&kube::api::PostParams::default(), &svc)
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    let lb_name: String = std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect();
    let label_key = format!("dvp.deckhouse.io/{lb_name}");
    let vms = Api::<VirtualMachine>::namespaced(parent.clone(), env.namespace());
    wait_for("only vm-a labelled", WAIT, || async {
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((labelled_with(&all, &label_key) == ["vm-a"]).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    let parent_svc = Api::<Service>::namespaced(parent, env.namespace())
        .get(&lb_name)
        .await
        .unwrap();
    assert_eq!(
        parent_svc.spec.unwrap().external_traffic_policy.as_deref(),
        Some("Local")
    );
    let tenant_services = Api::<Service>::namespaced(admin.clone(), "default");
    wait_for("the tenant ingress", WAIT, || async {
        Ok(tenant_ingress(&tenant_services.get("local").await?))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));

    // The ingress write comes back through the watch and syncs the Service once more (targets
    // only); wait for that sync, so that what follows sees no sync but the ones it causes.
    // A sync that found the parent's load balancer not ready yet requeues itself: a later sync
    // with no outside trigger. Settled means the last sync left the targets unchanged.
    wait_for("the follow-up sync of the ingress write", WAIT, || async {
        let log = ccm.log();
        let unchanged = log.rfind("load balancer targets unchanged");
        let pending = log.rfind("load balancer not ready yet");
        Ok(unchanged
            .is_some_and(|u| pending.is_none_or(|p| p < u))
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    // And the service controller quiet: no load-balancer line for two seconds (under load a
    // sync queued before the ingress write could still be running).
    let mut seen = load_balancer_lines(&ccm.log());
    let mut quiet_since = tokio::time::Instant::now();
    wait_for("the service controller to go quiet", WAIT, || {
        let now_seen = load_balancer_lines(&ccm.log());
        if now_seen != seen {
            seen = now_seen;
            quiet_since = tokio::time::Instant::now();
        }
        let quiet = quiet_since.elapsed() >= Duration::from_secs(2);
        async move { Ok(quiet.then_some(())) }
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));

    // The endpoint moves from node-a to node-b. Until its EndpointSlice changes, nothing makes
    // the CCM look again (the periodic pass is minutes away): vm-a keeps the label.
    a_healthy.store(false, Ordering::SeqCst);
    b_healthy.store(true, Ordering::SeqCst);
    let still = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < still {
        let all = vms.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(
            labelled_with(&all, &label_key),
            ["vm-a"],
            "moved without a trigger\n--- ccm log ---\n{}",
            ccm.log()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The EndpointSlice change wakes the service controller: the label follows within seconds.
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "local-x1", "namespace": "default",
                     "labels": {"kubernetes.io/service-name": "local"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.7"], "nodeName": "node-b"}],
        "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]
    }))
    .unwrap();
    let moved_from = tokio::time::Instant::now();
    Api::<EndpointSlice>::namespaced(admin.clone(), "default")
        .create(&kube::api::PostParams::default(), &slice)
        .await
        .unwrap();
    wait_for("only vm-b labelled", Duration::from_secs(15), || async {
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((labelled_with(&all, &label_key) == ["vm-b"]).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    eprintln!(
        "label followed the endpoint in {:.1} s",
        moved_from.elapsed().as_secs_f32()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_service_with_healthchecks_where_the_platform_offers_it() {
    use kube::api::{ApiResource, DynamicObject, PostParams};
    use kube::core::GroupVersionKind;
    let env = DvpEnv::start().await.expect("DVP environment");
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let parent = env.parent_admin().await.unwrap();
    // The platform's ServiceWithHealthchecks module is on.
    let module_configs: Api<DynamicObject> = Api::all_with(
        parent.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleConfig"),
            "moduleconfigs",
        ),
    );
    let config: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "deckhouse.io/v1alpha1", "kind": "ModuleConfig",
        "metadata": {"name": "service-with-healthchecks"}, "spec": {"enabled": true, "version": 1}}))
    .unwrap();
    module_configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let fixture = DvpFixture::new(parent.clone(), env.namespace(), "swhc");
    fixture.create_vm("vm-a", "node-a").await.unwrap();
    fixture.running_ip("vm-a").await.unwrap();
    kube_fixture::create_uninitialized_node(&admin, "node-a", &[], BTreeMap::new())
        .await
        .unwrap();
    let account = "stratus-dvp-cloud-controller-manager";
    let vars = env
        .bound_account_env(account, parent_role_rules().unwrap())
        .await
        .expect("the shipped parent Role");
    bind_parent_cluster_role(&parent, env.namespace(), account)
        .await
        .expect("the shipped parent ClusterRole");
    let args: Vec<String> = [
        "--cloud-provider=dvp",
        "--controllers=cloud-node,cloud-node-lifecycle,service",
        "--node-monitor-period=500ms",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=1500ms",
        "--leader-elect-retry-period=500ms",
        "--v=4",
    ]
    .map(String::from)
    .to_vec();
    let ccm = CcmProcess::start_on(&ccm_binary(), &env.tenant, vars, &args).expect("start ccm");
    node_ready(&admin, "node-a", &ccm).await;

    let svc = service_fixture::create_lb_service(&admin, "default", "hc", &[80], BTreeMap::new())
        .await
        .unwrap();
    let uid = svc.metadata.uid.clone().unwrap();
    let node_port = svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap();
    let lb_name: String = std::iter::once('a')
        .chain(uid.chars().filter(char::is_ascii_alphanumeric))
        .take(32)
        .collect();
    let swhcs: Api<DynamicObject> = Api::namespaced_with(
        parent.clone(),
        env.namespace(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(
                "network.deckhouse.io",
                "v1alpha1",
                "ServiceWithHealthchecks",
            ),
            "servicewithhealthchecks",
        ),
    );
    let parent_services = Api::<Service>::namespaced(parent.clone(), env.namespace());
    let tenant_services = Api::<Service>::namespaced(admin.clone(), "default");

    // A ServiceWithHealthchecks, not a Service of ours: the platform makes the Service.
    let swhc = wait_for("the ServiceWithHealthchecks", WAIT, || async {
        Ok(swhcs.get_opt(&lb_name).await?)
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    let spec = &swhc.data["spec"];
    assert_eq!(spec["type"], "LoadBalancer");
    assert_eq!(spec["ports"][0]["targetPort"], node_port);
    assert_eq!(
        spec["healthcheck"]["probes"][0]["tcp"]["targetPort"],
        node_port
    );
    assert_eq!(
        spec["selector"][format!("dvp.deckhouse.io/{lb_name}")],
        "loadbalancer"
    );
    let ip = wait_for(
        "the tenant ingress from the ServiceWithHealthchecks",
        WAIT,
        || async { Ok(tenant_ingress(&tenant_services.get("hc").await?)) },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    let child = parent_services.get(&lb_name).await.unwrap();
    assert_eq!(tenant_ingress(&child), Some(ip));
    let owners = child.metadata.owner_references.unwrap_or_default();
    assert!(
        owners.iter().any(|o| o.kind == "ServiceWithHealthchecks"),
        "the parent Service is the platform's, owned by the ServiceWithHealthchecks: {owners:?}"
    );

    // Deleting the Service removes the ServiceWithHealthchecks, its Service and the labels.
    service_fixture::delete_service(&admin, "default", "hc")
        .await
        .unwrap();
    let vms = Api::<VirtualMachine>::namespaced(parent.clone(), env.namespace());
    let label_key = format!("dvp.deckhouse.io/{lb_name}");
    wait_for("nothing left in the parent", WAIT, || async {
        let gone = swhcs.get_opt(&lb_name).await?.is_none()
            && parent_services.get_opt(&lb_name).await?.is_none();
        let all = vms.list(&ListParams::default()).await?.items;
        Ok((gone && labelled_with(&all, &label_key).is_empty()).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
}

/// The CCM's log lines about load balancers (each sync writes at least one).
fn load_balancer_lines(log: &str) -> usize {
    log.lines().filter(|l| l.contains("load balancer")).count()
}
