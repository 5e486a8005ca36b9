//! The service controller with Classic ELBs against a real kube-apiserver and moto, the CCM
//! running as the shipped RBAC identity: create, update, delete with nothing left behind.

mod common;

use std::collections::BTreeMap;

use common::lb::{annotations, lb_setup, FINALIZER, NS, P};
use common::WAIT;
use serde_json::json;
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_node, delete_service, events_about, get_service, ingress_hostname,
    load_balancer_name, patch_service, set_label, set_ready,
};
use stratus_scenarios::{ec2_fixture, wait_for};
use stratus_testenv::Hold;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_elb_is_created_updated_and_deleted_without_leaks() {
    let lb = lb_setup("clb", 2).await;
    let _ccm = lb.ccm(&[]);
    let ann = annotations(&[
        ("cross-zone-load-balancing-enabled", "true"),
        ("connection-draining-enabled", "true"),
        ("connection-draining-timeout", "42"),
        ("connection-idle-timeout", "120"),
        ("healthcheck-interval", "15"),
        ("additional-resource-tags", "team=web,env=test"),
        ("proxy-protocol", "*"),
    ]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], ann)
        .await
        .unwrap();
    let svc = lb.wait_ingress("web").await;
    let name = load_balancer_name(&svc);
    let node_port = svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0]
        .node_port
        .unwrap();
    assert!(svc
        .metadata
        .finalizers
        .as_ref()
        .unwrap()
        .contains(&FINALIZER.to_string()));

    let d = lb.lbs.classic(&name).await.unwrap().expect("the ELB");
    assert_eq!(ingress_hostname(&svc).as_deref(), d.dns_name());
    let listeners: Vec<(i32, String, i32)> = d
        .listener_descriptions()
        .iter()
        .filter_map(|l| l.listener())
        .map(|l| {
            (
                l.load_balancer_port(),
                l.protocol().to_ascii_uppercase(),
                l.instance_port(),
            )
        })
        .collect();
    assert_eq!(listeners, vec![(80, "TCP".to_string(), node_port)]);
    let hc = d.health_check().unwrap();
    assert_eq!(hc.target(), format!("TCP:{node_port}"));
    assert_eq!(
        (
            hc.healthy_threshold(),
            hc.unhealthy_threshold(),
            hc.interval(),
            hc.timeout()
        ),
        (2, 6, 15, 5)
    );
    let attrs = lb.lbs.classic_attributes(&name).await.unwrap();
    assert!(attrs.cross_zone_load_balancing().unwrap().enabled());
    let draining = attrs.connection_draining().unwrap();
    assert!(draining.enabled());
    assert_eq!(draining.timeout(), Some(42));
    assert_eq!(attrs.connection_settings().unwrap().idle_timeout(), 120);
    let tags = lb.lbs.classic_tags(&name).await.unwrap();
    assert_eq!(tags["kubernetes.io/cluster/clb"], "owned");
    assert_eq!(tags["kubernetes.io/service-name"], "default/web");
    assert_eq!(tags["team"], "web");
    let all: Vec<&String> = lb.nodes.values().collect();
    lb.wait_registered(&name, &all).await;
    let groups = ec2_fixture::security_groups_named(&lb.s.ec2, &format!("k8s-elb-{name}"))
        .await
        .unwrap();
    assert_eq!(groups.len(), 1, "one managed group");
    let backend = ec2_fixture::security_group_id(&lb.s.ec2, "k8s-elb-backend-clb")
        .await
        .unwrap()
        .expect("the cluster's backend group");
    assert_eq!(d.security_groups().len(), 2, "own group + backend group");
    let lb_group = d
        .security_groups()
        .iter()
        .find(|g| **g != backend)
        .unwrap()
        .clone();
    let sources = lb.node_group_sources().await;
    assert_eq!(
        sources,
        vec![(
            backend.clone(),
            "kubernetes.io/rule/elb/backend".to_string()
        )],
        "one node rule, from the backend group"
    );
    let events = events_about(&lb.s.admin, "Service", "web").await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.reason.as_deref() == Some("EnsuredLoadBalancer")));

    let backend_policies: Vec<String> = d
        .backend_server_descriptions()
        .iter()
        .filter(|b| b.instance_port() == Some(node_port))
        .flat_map(|b| b.policy_names().iter().cloned())
        .collect();
    assert_eq!(
        backend_policies,
        vec!["k8s-proxyprotocol-enabled".to_string()]
    );
    let ingress = ec2_fixture::cidr_rules(&lb.s.ec2, &lb_group).await.unwrap();
    assert!(
        ingress.contains(&("tcp".to_string(), 80, "0.0.0.0/0".to_string())),
        "{ingress:?}"
    );

    // Source ranges narrow the ELB's own group.
    patch_service(
        &lb.s.admin,
        NS,
        "web",
        json!({"spec": {"loadBalancerSourceRanges": ["10.1.0.0/16", "192.168.0.0/24"]}}),
    )
    .await
    .unwrap();
    wait_for("source ranges applied", WAIT, || async {
        let rules = ec2_fixture::cidr_rules(&lb.s.ec2, &lb_group).await?;
        let tcp: Vec<String> = rules
            .into_iter()
            .filter(|(p, _, _)| p == "tcp")
            .map(|(_, _, c)| c)
            .collect();
        Ok((tcp == vec!["10.1.0.0/16".to_string(), "192.168.0.0/24".to_string()]).then_some(()))
    })
    .await
    .unwrap();

    // A second port: a listener is added, nothing else is recreated.
    patch_service(
        &lb.s.admin,
        NS,
        "web",
        json!({"spec": {"ports": [
            {"name": "p80", "port": 80, "protocol": "TCP", "nodePort": node_port},
            {"name": "p8080", "port": 8080, "protocol": "TCP"}]}}),
    )
    .await
    .unwrap();
    wait_for("second listener", WAIT, || async {
        let d = lb.lbs.classic(&name).await?.unwrap();
        Ok((d.listener_descriptions().len() == 2).then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(
        lb.lbs.classic(&name).await.unwrap().unwrap().dns_name(),
        d.dns_name()
    );

    // LoadBalancer → ClusterIP: the ELB and everything made for it go, the finalizer too.
    patch_service(
        &lb.s.admin,
        NS,
        "web",
        json!({"spec": {"type": "ClusterIP", "loadBalancerSourceRanges": null, "ports": [
            {"name": "p80", "port": 80, "protocol": "TCP", "nodePort": null},
            {"name": "p8080", "port": 8080, "protocol": "TCP", "nodePort": null}]}}),
    )
    .await
    .unwrap();
    wait_for("finalizer released", WAIT, || async {
        let s = get_service(&lb.s.admin, NS, "web").await?.unwrap();
        let done = !s
            .metadata
            .finalizers
            .clone()
            .unwrap_or_default()
            .contains(&FINALIZER.to_string());
        Ok(done.then_some(s))
    })
    .await
    .unwrap();
    // The ELB and its group go at once; the shared backend group and its node rule once the
    // reaper (woken by the deletion) sees no Classic ELB left.
    lb.wait_no_leftovers().await;
    assert_eq!(lb.node_group_sources().await, vec![]);
    let svc = get_service(&lb.s.admin, NS, "web").await.unwrap().unwrap();
    assert_eq!(ingress_hostname(&svc), None, "status cleared");

    // externalTrafficPolicy: Local moves the health check to the health-check node port.
    create_lb_service(&lb.s.admin, NS, "api", &[443], BTreeMap::new())
        .await
        .unwrap();
    let api = lb.wait_ingress("api").await;
    patch_service(
        &lb.s.admin,
        NS,
        "api",
        json!({"spec": {"externalTrafficPolicy": "Local"}}),
    )
    .await
    .unwrap();
    let api_lb = load_balancer_name(&api);
    let hc_port = wait_for("health-check node port", WAIT, || async {
        let s = get_service(&lb.s.admin, NS, "api").await?.unwrap();
        Ok(s.spec.and_then(|s| s.health_check_node_port))
    })
    .await
    .unwrap();
    wait_for("HTTP health check", WAIT, || async {
        let d = lb.lbs.classic(&api_lb).await?.unwrap();
        let target = d.health_check().map(|h| h.target().to_string());
        Ok((target == Some(format!("HTTP:{hc_port}/healthz"))).then_some(()))
    })
    .await
    .unwrap();

    // A deleted Service leaves nothing either.
    assert!(!lb.leftovers().await.is_empty());
    delete_service(&lb.s.admin, NS, "api").await.unwrap();
    wait_for("api gone", WAIT, || async {
        Ok(get_service(&lb.s.admin, NS, "api")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    lb.wait_no_leftovers().await;
    let events = events_about(&lb.s.admin, "Service", "api").await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.reason.as_deref() == Some("DeletedLoadBalancer")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn targets_follow_nodes_and_a_burst_costs_one_update() {
    let mut lb = lb_setup("churn", 3).await;
    let _ccm = lb.ccm(&[]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    let svc = lb.wait_ingress("web").await;
    let name = load_balancer_name(&svc);
    let names: Vec<String> = lb.nodes.keys().cloned().collect();
    let ids = lb.nodes.clone();
    let id = |n: &str| ids[n].clone();
    let all: Vec<String> = names.iter().map(|n| id(n)).collect();
    lb.wait_registered(&name, &all.iter().collect::<Vec<_>>())
        .await;

    // NotReady → out; back → in.
    set_ready(&lb.s.admin, &names[0], false).await.unwrap();
    lb.wait_registered(&name, &[&id(&names[1]), &id(&names[2])])
        .await;
    set_ready(&lb.s.admin, &names[0], true).await.unwrap();
    lb.wait_registered(&name, &all.iter().collect::<Vec<_>>())
        .await;
    // Excluded by label → out.
    set_label(
        &lb.s.admin,
        &names[1],
        "node.kubernetes.io/exclude-from-external-load-balancers",
        Some("true"),
    )
    .await
    .unwrap();
    lb.wait_registered(&name, &[&id(&names[0]), &id(&names[2])])
        .await;
    // Deleted → out.
    delete_node(&lb.s.admin, &names[2]).await.unwrap();
    lb.wait_registered(&name, &[&id(&names[0])]).await;

    // A burst of 20 new nodes, then 20 gone: one register and one deregister call.
    lb.s.env.reset_aws_request_counts().await.unwrap();
    let added = lb.add_nodes(20).await;
    let mut want: Vec<String> = added.iter().map(|n| lb.nodes[n].clone()).collect();
    want.push(id(&names[0]));
    lb.wait_registered(&name, &want.iter().collect::<Vec<_>>())
        .await;
    for n in &added {
        delete_node(&lb.s.admin, n).await.unwrap();
    }
    lb.wait_registered(&name, &[&id(&names[0])]).await;
    let counts = lb.s.env.aws_request_counts().await.unwrap();
    let elb_calls: u64 = counts
        .iter()
        .filter(|(k, _)| k.starts_with("elasticloadbalancing:"))
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(
        counts.get("elasticloadbalancing:RegisterInstancesWithLoadBalancer"),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(
        counts.get("elasticloadbalancing:DeregisterInstancesFromLoadBalancer"),
        Some(&1),
        "{counts:?}"
    );
    assert_eq!(elb_calls, 2, "nothing but the two target calls: {counts:?}");
    let events = events_about(&lb.s.admin, "Service", "web").await.unwrap();
    assert!(events
        .iter()
        .any(|e| e.reason.as_deref() == Some("UpdatedLoadBalancer")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_annotation_warns_and_leaves_the_load_balancer_alone() {
    let lb = lb_setup("invalid", 1).await;
    let _ccm = lb.ccm(&[]);
    create_lb_service(&lb.s.admin, NS, "good", &[80], BTreeMap::new())
        .await
        .unwrap();
    let before = lb.wait_ingress("good").await;
    let name = load_balancer_name(&before);
    let hc_before = lb
        .lbs
        .classic(&name)
        .await
        .unwrap()
        .unwrap()
        .health_check()
        .cloned();

    // A bad value on an existing Service: Warning, status and ELB untouched.
    patch_service(
        &lb.s.admin,
        NS,
        "good",
        json!({"metadata": {"annotations": {
            format!("{P}healthcheck-interval"): "4",
            format!("{P}healthcheck-timeout"): "3"}}}),
    )
    .await
    .unwrap();
    let warning = wait_for("warning event", WAIT, || async {
        let events = events_about(&lb.s.admin, "Service", "good").await?;
        Ok(events.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("SyncLoadBalancerFailed")
        }))
    })
    .await
    .unwrap();
    let note = warning.note.unwrap_or_default();
    assert!(note.contains("healthcheck-interval"), "{note}");
    let after = get_service(&lb.s.admin, NS, "good").await.unwrap().unwrap();
    assert_eq!(ingress_hostname(&after), ingress_hostname(&before));
    let hc_after = lb
        .lbs
        .classic(&name)
        .await
        .unwrap()
        .unwrap()
        .health_check()
        .cloned();
    assert_eq!(hc_before, hc_after);

    // A Service AWS would refuse from the start (loadBalancerIP): Warning, no load balancer.
    let pinned: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "pinned"},
        "spec": {"type": "LoadBalancer", "loadBalancerIP": "10.0.0.9",
                 "ports": [{"port": 80, "protocol": "TCP"}]}}))
    .unwrap();
    let pinned =
        kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(lb.s.admin.clone(), NS)
            .create(&Default::default(), &pinned)
            .await
            .unwrap();
    let warning = wait_for("loadBalancerIP refused", WAIT, || async {
        let events = events_about(&lb.s.admin, "Service", "pinned").await?;
        Ok(events
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed")))
    })
    .await
    .unwrap();
    assert!(warning.note.unwrap_or_default().contains("loadBalancerIP"));
    assert!(lb
        .lbs
        .classic(&load_balancer_name(&pinned))
        .await
        .unwrap()
        .is_none());
    // Other Services are unaffected.
    create_lb_service(&lb.s.admin, NS, "other", &[80], BTreeMap::new())
        .await
        .unwrap();
    lb.wait_ingress("other").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absurd_services_warn_before_any_aws_write() {
    let lb = lb_setup("absurd", 1).await;
    let _ccm = lb.ccm(&[]);
    lb.s.env.reset_aws_request_counts().await.unwrap();

    // 2000 ports, a 10,000-character annotation, 61 source ranges.
    let ports: Vec<i32> = (1..=2000).collect();
    create_lb_service(&lb.s.admin, NS, "many-ports", &ports, BTreeMap::new())
        .await
        .unwrap();
    let long_path = format!("/{}", "x".repeat(9_999));
    create_lb_service(
        &lb.s.admin,
        NS,
        "long-annotation",
        &[80],
        annotations(&[("healthcheck-path", long_path.as_str())]),
    )
    .await
    .unwrap();
    let ranges: Vec<String> = (0..61).map(|i| format!("10.{i}.0.0/16")).collect();
    let many_ranges: k8s_openapi::api::core::v1::Service = serde_json::from_value(json!({
        "metadata": {"name": "many-ranges"},
        "spec": {"type": "LoadBalancer", "loadBalancerSourceRanges": ranges,
                 "ports": [{"port": 80, "protocol": "TCP"}]}}))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(lb.s.admin.clone(), NS)
        .create(&Default::default(), &many_ranges)
        .await
        .unwrap();

    for (service, want) in [
        ("many-ports", "2000 ports"),
        ("long-annotation", "at most 4096"),
        ("many-ranges", "61 ranges given, at most 60"),
    ] {
        let warning = wait_for(&format!("warning about {service}"), WAIT, || async {
            let events = events_about(&lb.s.admin, "Service", service).await?;
            Ok(events.into_iter().find(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.reason.as_deref() == Some("SyncLoadBalancerFailed")
            }))
        })
        .await
        .unwrap();
        let note = warning.note.unwrap_or_default();
        assert!(note.contains(want), "{service}: {note}");
        assert!(note.len() <= 1000, "{service}: {} bytes", note.len());
        let svc = get_service(&lb.s.admin, NS, service)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(ingress_hostname(&svc), None, "{service}");
    }

    // Nothing was made or changed in AWS: no write of any kind, and nothing left behind.
    let counts = lb.s.env.aws_request_counts().await.unwrap();
    let writes: Vec<&String> = counts
        .keys()
        .filter(|k| {
            let action = k.split_once(':').map_or(k.as_str(), |(_, a)| a);
            !["Describe", "Get", "List"]
                .iter()
                .any(|read| action.starts_with(read))
        })
        .collect();
    assert!(writes.is_empty(), "AWS writes: {counts:?}");
    assert!(
        lb.leftovers().await.is_empty(),
        "{:?}",
        lb.leftovers().await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_in_the_middle_of_creating_resumes_without_duplicates() {
    let lb = lb_setup("crash", 2).await;
    // The CCM dies while CreateLoadBalancer is in flight (AWS made the ELB, the answer is lost).
    lb.s.env
        .hold_aws_requests(&[Hold {
            action: "CreateLoadBalancer".into(),
            after_forward: true,
        }])
        .await
        .unwrap();
    let mut ccm = lb.ccm(&[]);
    let svc = create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    let name = load_balancer_name(&svc);
    wait_for("ELB made by the first CCM", WAIT, || async {
        Ok(lb.lbs.classic(&name).await?.map(|_| ()))
    })
    .await
    .unwrap();
    ccm.kill();
    lb.s.env.hold_aws_requests(&[]).await.unwrap();
    let _ccm = lb.ccm(&[]);
    lb.wait_ingress("web").await;
    lb.assert_made_once(&name).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reaper_removes_what_a_vanished_service_left() {
    let lb = lb_setup("reap", 1).await;
    let mut ccm = lb.ccm(&[]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    create_lb_service(&lb.s.admin, NS, "keep", &[80], BTreeMap::new())
        .await
        .unwrap();
    let svc = lb.wait_ingress("web").await;
    let keep = lb.wait_ingress("keep").await;
    ccm.kill();
    // Deleted while no controller ran, finalizer removed by hand.
    patch_service(
        &lb.s.admin,
        NS,
        "web",
        json!({"metadata": {"finalizers": null}}),
    )
    .await
    .unwrap();
    delete_service(&lb.s.admin, NS, "web").await.unwrap();
    let _ccm = lb.ccm(&["--load-balancer-reaper-period=1s"]);
    let gone = load_balancer_name(&svc);
    wait_for("orphan reaped", WAIT, || async {
        Ok(lb.lbs.classic(&gone).await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    wait_for("orphan group reaped", WAIT, || async {
        let left =
            ec2_fixture::security_groups_named(&lb.s.ec2, &format!("k8s-elb-{gone}")).await?;
        Ok(left.is_empty().then_some(()))
    })
    .await
    .unwrap();
    assert!(lb
        .lbs
        .classic(&load_balancer_name(&keep))
        .await
        .unwrap()
        .is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listeners_follow_the_certificate_annotations() {
    let lb = lb_setup("tls", 1).await;
    let _ccm = lb.ccm(&[]);
    let cert = "arn:aws:iam::123456789012:server-certificate/web";
    let ann = annotations(&[
        ("ssl-cert", cert),
        ("ssl-ports", "443"),
        ("backend-protocol", "http"),
        (
            "ssl-negotiation-policy",
            "ELBSecurityPolicy-TLS-1-2-2017-01",
        ),
        ("internal", "true"),
    ]);
    create_lb_service(&lb.s.admin, NS, "shop", &[80, 443], ann)
        .await
        .unwrap();
    let svc = lb.wait_ingress("shop").await;
    let d = lb
        .lbs
        .classic(&load_balancer_name(&svc))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.scheme(), Some("internal"));
    // moto does not keep InstanceProtocol (it echoes Protocol), so the backend side of the
    // mapping (HTTPS → HTTP) is covered by the classic_spec unit tests, not here.
    let mut listeners: Vec<(i32, String, Option<String>, Vec<String>)> = d
        .listener_descriptions()
        .iter()
        .map(|ld| {
            let l = ld.listener().unwrap();
            (
                l.load_balancer_port(),
                l.protocol().to_ascii_uppercase(),
                l.ssl_certificate_id().map(str::to_string),
                ld.policy_names().to_vec(),
            )
        })
        .collect();
    listeners.sort();
    assert_eq!(
        listeners,
        vec![
            (80, "HTTP".into(), None, vec![]),
            (
                443,
                "HTTPS".into(),
                Some(cert.to_string()),
                vec!["k8s-SSLNegotiationPolicy-ELBSecurityPolicy-TLS-1-2-2017-01".into()]
            ),
        ]
    );
}
