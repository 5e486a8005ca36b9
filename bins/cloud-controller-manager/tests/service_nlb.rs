//! The service controller with Network Load Balancers against a real kube-apiserver and moto,
//! under the shipped RBAC: listeners, target groups, targets, node rules, and a clean delete.

mod common;

use std::collections::BTreeMap;

use common::lb::{annotations, lb_setup, Lb, NS};
use common::WAIT;
use stratus_scenarios::service_fixture::{
    create_lb_service, delete_service, events_about, get_service, ingress_hostname,
    load_balancer_name,
};
use stratus_scenarios::wait_for;

/// Instance IDs registered in each target group of the NLB, by target-group name.
async fn targets_by_group(lb: &Lb, lb_arn: &str) -> BTreeMap<String, Vec<String>> {
    let groups = lb
        .lbs
        .elbv2
        .describe_target_groups()
        .load_balancer_arn(lb_arn)
        .send()
        .await
        .unwrap();
    let mut out = BTreeMap::new();
    for g in groups.target_groups() {
        let health = lb
            .lbs
            .elbv2
            .describe_target_health()
            .target_group_arn(g.target_group_arn().unwrap())
            .send()
            .await
            .unwrap();
        let mut ids: Vec<String> = health
            .target_health_descriptions()
            .iter()
            .filter_map(|d| d.target().and_then(|t| t.id()).map(str::to_string))
            .collect();
        ids.sort();
        out.insert(g.target_group_name().unwrap().to_string(), ids);
    }
    out
}

async fn nlb_rule_descriptions(lb: &Lb) -> Vec<String> {
    let out =
        lb.s.ec2
            .describe_security_groups()
            .group_ids(&lb.node_group)
            .send()
            .await
            .unwrap();
    out.security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| p.ip_ranges())
        .filter_map(|r| r.description().map(str::to_string))
        .filter(|d| d.starts_with("kubernetes.io/rule/nlb/"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nlb_is_created_follows_nodes_and_is_deleted_without_leaks() {
    let mut lb = lb_setup("nlb", 2).await;
    let _ccm = lb.ccm(&[]);
    let ann = annotations(&[
        ("type", "nlb"),
        ("healthcheck-interval", "30"),
        ("target-group-attributes", "preserve_client_ip.enabled=true"),
        ("additional-resource-tags", "team=edge"),
    ]);
    create_lb_service(&lb.s.admin, NS, "edge", &[80, 443], ann)
        .await
        .unwrap();
    let svc = lb.wait_ingress("edge").await;
    let name = load_balancer_name(&svc);
    let d = lb
        .lbs
        .elbv2
        .describe_load_balancers()
        .names(&name)
        .send()
        .await
        .unwrap();
    let nlb = d.load_balancers()[0].clone();
    assert_eq!(nlb.r#type().map(|t| t.as_str()), Some("network"));
    assert_eq!(ingress_hostname(&svc).as_deref(), nlb.dns_name());
    let arn = nlb.load_balancer_arn().unwrap().to_string();
    let listeners = lb
        .lbs
        .elbv2
        .describe_listeners()
        .load_balancer_arn(&arn)
        .send()
        .await
        .unwrap();
    let mut ports: Vec<i32> = listeners
        .listeners()
        .iter()
        .filter_map(|l| l.port())
        .collect();
    ports.sort();
    assert_eq!(ports, vec![80, 443]);
    let groups = lb
        .lbs
        .elbv2
        .describe_target_groups()
        .load_balancer_arn(&arn)
        .send()
        .await
        .unwrap();
    assert_eq!(groups.target_groups().len(), 2);
    for g in groups.target_groups() {
        assert_eq!(g.health_check_interval_seconds(), Some(30));
        assert_eq!(g.target_type().map(|t| t.as_str()), Some("instance"));
        assert!(g
            .target_group_name()
            .unwrap()
            .starts_with("k8s-default-edge-"));
    }
    let tags = lb
        .lbs
        .elbv2
        .describe_tags()
        .resource_arns(&arn)
        .send()
        .await
        .unwrap();
    let tags: BTreeMap<String, String> = tags.tag_descriptions()[0]
        .tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap().to_string(),
                t.value().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(tags["kubernetes.io/cluster/nlb"], "owned");
    assert_eq!(tags["kubernetes.io/service-name"], "default/edge");
    assert_eq!(tags["team"], "edge");
    let mut all: Vec<String> = lb.nodes.values().cloned().collect();
    all.sort();
    wait_for("targets in both groups", WAIT, || async {
        let t = targets_by_group(&lb, &arn).await;
        Ok(t.values().all(|ids| ids == &all).then_some(()))
    })
    .await
    .unwrap();
    let rules = nlb_rule_descriptions(&lb).await;
    for kind in ["client", "health", "mtu"] {
        assert!(
            rules.contains(&format!("kubernetes.io/rule/nlb/{kind}={name}")),
            "{kind}: {rules:?}"
        );
    }

    // Three more nodes: registered in every target group.
    lb.add_nodes(3).await;
    let mut all: Vec<String> = lb.nodes.values().cloned().collect();
    all.sort();
    wait_for("new targets in both groups", WAIT, || async {
        let t = targets_by_group(&lb, &arn).await;
        Ok(t.values().all(|ids| ids == &all).then_some(()))
    })
    .await
    .unwrap();

    delete_service(&lb.s.admin, NS, "edge").await.unwrap();
    wait_for("edge gone", WAIT, || async {
        Ok(get_service(&lb.s.admin, NS, "edge")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!(lb.leftovers().await, Vec::<String>::new());
    assert_eq!(nlb_rule_descriptions(&lb).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nlb_refuses_mixed_protocols_with_a_warning() {
    let lb = lb_setup("nlbmixed", 1).await;
    let _ccm = lb.ccm(&[]);
    let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "dns", "annotations": {
            "service.beta.kubernetes.io/aws-load-balancer-type": "nlb"}},
        "spec": {"type": "LoadBalancer", "ports": [
            {"name": "tcp", "port": 53, "protocol": "TCP"},
            {"name": "udp", "port": 53, "protocol": "UDP"}]}}))
    .unwrap();
    kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(lb.s.admin.clone(), NS)
        .create(&Default::default(), &svc)
        .await
        .unwrap();
    let warning = wait_for("mixed protocols refused", WAIT, || async {
        let events = events_about(&lb.s.admin, "Service", "dns").await?;
        Ok(events.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("SyncLoadBalancerFailed")
        }))
    })
    .await
    .unwrap();
    let note = warning.note.unwrap_or_default();
    assert!(note.contains("mixed protocols"), "{note}");
    assert_eq!(lb.lbs.v2_names().await.unwrap(), Vec::<String>::new());
    let svc = get_service(&lb.s.admin, NS, "dns").await.unwrap().unwrap();
    assert_eq!(ingress_hostname(&svc), None);
}

/// The CIDRs of the NLB's client rules in the node group.
async fn client_rule_cidrs(lb: &Lb, nlb_name: &str) -> Vec<String> {
    let want = format!("kubernetes.io/rule/nlb/client={nlb_name}");
    let out =
        lb.s.ec2
            .describe_security_groups()
            .group_ids(&lb.node_group)
            .send()
            .await
            .unwrap();
    let mut cidrs: Vec<String> = out
        .security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| p.ip_ranges())
        .filter(|r| r.description() == Some(want.as_str()))
        .filter_map(|r| r.cidr_ip().map(str::to_string))
        .collect();
    cidrs.sort();
    cidrs.dedup();
    cidrs
}

/// Deckhouse's `publicNetworkAllowList` (`[Global] publicNetworkAllowList`, lower-case as its
/// module writes it): an NLB whose Service names no source range is open to the allow list, not
/// to everywhere; a Service's own narrower ranges win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nlb_client_rules_use_the_public_network_allow_list() {
    let lb = lb_setup("nlballow", 1).await;
    let _ccm = lb.ccm_with_config(
        "publicNetworkAllowList = \"198.51.100.0/24, 203.0.113.7/32\"\n",
        &[],
    );
    let ann = annotations(&[("type", "nlb")]);
    create_lb_service(&lb.s.admin, NS, "open", &[80], ann)
        .await
        .unwrap();
    let svc = lb.wait_ingress("open").await;
    let name = load_balancer_name(&svc);
    let allow = vec!["198.51.100.0/24".to_string(), "203.0.113.7/32".to_string()];
    let waited = wait_for("client rules from the allow list", WAIT, || async {
        let cidrs = client_rule_cidrs(&lb, &name).await;
        Ok((cidrs == allow).then_some(()))
    })
    .await;
    if let Err(e) = waited {
        panic!("{e}: {:?}", client_rule_cidrs(&lb, &name).await);
    }

    // The Service's own range replaces the allow list.
    let api = kube::Api::<k8s_openapi::api::core::v1::Service>::namespaced(lb.s.admin.clone(), NS);
    api.patch(
        "open",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(serde_json::json!({
            "spec": {"loadBalancerSourceRanges": ["192.0.2.0/24"]}
        })),
    )
    .await
    .unwrap();
    wait_for("client rules from the Service's range", WAIT, || async {
        let cidrs = client_rule_cidrs(&lb, &name).await;
        Ok((cidrs == ["192.0.2.0/24"]).then_some(()))
    })
    .await
    .unwrap();
}
