//! The node and node-lifecycle controllers against a real kube-apiserver and moto, with the CCM
//! running as the shipped RBAC identity.

mod common;

use std::collections::BTreeMap;

use common::{setup, WAIT, ZONE};
use stratus_scenarios::kube_fixture::{self, addresses, get_node, has_taint, label, UNINITIALIZED};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::Identity;

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

async fn wait_initialized(s: &common::Setup, name: &str) -> k8s_openapi::api::core::v1::Node {
    wait_for(&format!("node {name} initialized"), WAIT, || async {
        Ok(get_node(&s.admin, name)
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializes_nodes_named_in_every_scheme() {
    let s = setup("naming", true).await;
    let inst = s.launch(4).await;
    let by_id = inst[0].id.clone();
    let by_dns = inst[1].private_dns.clone();
    let by_ip = "worker-by-ip".to_string();
    let by_rbn = format!("{}.us-east-1.compute.internal", inst[3].id);
    let none = BTreeMap::new();
    kube_fixture::create_uninitialized_node(&s.admin, &by_id, &[], none.clone())
        .await
        .unwrap();
    kube_fixture::create_uninitialized_node(&s.admin, &by_dns, &[], none.clone())
        .await
        .unwrap();
    kube_fixture::create_uninitialized_node(&s.admin, &by_ip, &[&inst[2].private_ip], none.clone())
        .await
        .unwrap();
    kube_fixture::create_uninitialized_node(&s.admin, &by_rbn, &[], none)
        .await
        .unwrap();
    let ccm = s.start_ccm(&[]);

    for (name, i) in [
        (&by_id, &inst[0]),
        (&by_dns, &inst[1]),
        (&by_ip, &inst[2]),
        (&by_rbn, &inst[3]),
    ] {
        let node = wait_initialized(&s, name).await;
        let spec = node.spec.as_ref().unwrap();
        assert_eq!(
            spec.provider_id.as_deref(),
            Some(format!("aws:///{ZONE}/{}", i.id).as_str()),
            "{name}"
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/zone"),
            Some(ZONE),
            "{name}"
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/region"),
            Some("us-east-1"),
            "{name}"
        );
        assert_eq!(
            label(&node, "node.kubernetes.io/instance-type"),
            Some("m5.large"),
            "{name}"
        );
        assert!(
            label(&node, "topology.k8s.aws/zone-id").is_some_and(|z| !z.is_empty()),
            "{name}: zone-id label"
        );
        let addrs = addresses(&node);
        assert!(
            addrs.contains(&("InternalIP".into(), i.private_ip.clone())),
            "{name}: {addrs:?}"
        );
        assert!(
            addrs.contains(&("InternalDNS".into(), i.private_dns.clone())),
            "{name}: {addrs:?}"
        );
        assert!(
            addrs.contains(&("Hostname".into(), i.private_dns.clone())),
            "{name}: {addrs:?}"
        );
    }
    let writes = s
        .env
        .kube_writes_by(Identity::CloudControllerManager.username())
        .unwrap();
    assert!(
        writes <= 8,
        "at most 2 writes per node, got {writes}\n{}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_without_instance_gets_a_warning_then_initializes() {
    let s = setup("late", true).await;
    let ip = "10.0.9.7";
    kube_fixture::create_uninitialized_node(&s.admin, "late-worker", &[ip], BTreeMap::new())
        .await
        .unwrap();
    let ccm = s.start_ccm(&[]);
    let event = wait_for("warning event on late-worker", WAIT, || async {
        let events = kube_fixture::node_events(&s.admin, "late-worker").await?;
        Ok(events
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning")))
    })
    .await
    .unwrap();
    assert!(
        event
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("InstanceNotFound"),
        "{event:?}"
    );
    assert!(
        event.note.as_deref().unwrap_or("").contains("late-worker"),
        "{event:?}"
    );
    assert!(has_taint(
        &get_node(&s.admin, "late-worker").await.unwrap().unwrap(),
        UNINITIALIZED
    ));

    let launched = s
        .ec2
        .run_instances()
        .image_id(ec2_fixture::any_image(&s.ec2).await.unwrap())
        .min_count(1)
        .max_count(1)
        .subnet_id(&s.subnet)
        .private_ip_address(ip)
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::Instance)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("kubernetes.io/cluster/late")
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap();
    let id = launched.instances()[0].instance_id().unwrap().to_string();
    let node = wait_initialized(&s, "late-worker").await;
    assert!(
        node.spec.unwrap().provider_id.unwrap().ends_with(&id),
        "{}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopped_started_and_terminated_instances_and_static_nodes() {
    let s = setup("lifecycle", true).await;
    let inst = s.launch(2).await;
    let (a, b) = (inst[0].id.clone(), inst[1].id.clone());
    for id in [&a, &b] {
        kube_fixture::create_uninitialized_node(&s.admin, id, &[], BTreeMap::new())
            .await
            .unwrap();
    }
    let static_before = kube_fixture::create_static_node(&s.admin, "on-prem-1")
        .await
        .unwrap();
    let ccm = s.start_ccm(&[]);
    wait_initialized(&s, &a).await;
    wait_initialized(&s, &b).await;

    ec2_fixture::stop(&s.ec2, std::slice::from_ref(&a))
        .await
        .unwrap();
    wait_for("shutdown taint", WAIT, || async {
        Ok(get_node(&s.admin, &a)
            .await?
            .filter(|n| has_taint(n, SHUTDOWN)))
    })
    .await
    .unwrap();
    ec2_fixture::start(&s.ec2, std::slice::from_ref(&a))
        .await
        .unwrap();
    wait_for("shutdown taint removed", WAIT, || async {
        Ok(get_node(&s.admin, &a)
            .await?
            .filter(|n| !has_taint(n, SHUTDOWN)))
    })
    .await
    .unwrap();

    ec2_fixture::terminate(&s.ec2, std::slice::from_ref(&b))
        .await
        .unwrap();
    wait_for("terminated node deleted", WAIT, || async {
        Ok(get_node(&s.admin, &b).await?.is_none().then_some(()))
    })
    .await
    .unwrap();

    let a_node = get_node(&s.admin, &a)
        .await
        .unwrap()
        .expect("running node kept");
    assert!(!has_taint(&a_node, SHUTDOWN));
    let static_node = get_node(&s.admin, "on-prem-1")
        .await
        .unwrap()
        .expect("static node kept");
    assert!(
        static_node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_ref())
            .is_none(),
        "{}",
        ccm.log()
    );
    assert_eq!(
        static_node.metadata.resource_version, static_before.metadata.resource_version,
        "the CCM must never write to a static node: {static_node:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_shipped_rbac_the_ccm_cannot_act() {
    let s = setup("norbac", false).await;
    let inst = s.launch(1).await;
    kube_fixture::create_uninitialized_node(&s.admin, &inst[0].id, &[], BTreeMap::new())
        .await
        .unwrap();
    let ccm = s.start_ccm(&[]);
    wait_for("a forbidden error in the CCM log", WAIT, || async {
        Ok(ccm.log().to_lowercase().contains("forbidden").then_some(()))
    })
    .await
    .unwrap();
    let node = get_node(&s.admin, &inst[0].id).await.unwrap().unwrap();
    assert!(
        has_taint(&node, UNINITIALIZED),
        "an identity without RBAC must not initialise nodes"
    );
    assert_eq!(
        s.env
            .kube_writes_by(Identity::CloudControllerManager.username())
            .unwrap(),
        0
    );
}
