//! Service → NLB end to end on moto behind the counting proxy: an IP-mode NLB Service gets a
//! hostname, its listener and target group, and targets that follow the EndpointSlice by the
//! difference only (3 → 5 → 2); its static private addresses reach CreateLoadBalancer as subnet
//! mappings, each with the subnet holding it; instance mode registers the nodes' instances on
//! the NodePort; an invalid annotation is a Warning Event and no AWS write; deleting the Service
//! leaves nothing in moto. Beside the real cloud-controller-manager, an NLB-class Service and a
//! plain Classic LoadBalancer Service are each written (in Kubernetes and AWS) by their own
//! controller only. (TLS, attributes, placement changes and security groups: `nlb_features.rs`.)

mod common;

use std::collections::BTreeMap;

use common::nlb::{
    assert_nothing_left, delete_and_wait, hostname, lbs, listeners, nlb_service, target_group_arns,
    tg_attribute, writes,
};
use common::{Albc, NS, WAIT};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use stratus_albc::service::annotations::NLB_CLASS;
use stratus_albc::service::driver::FINALIZER;
use stratus_albc::service::plan::nlb_name;
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::service_fixture::events_about;
use stratus_scenarios::wait_for;
use stratus_scenarios::{ec2_fixture, kube_fixture};
use stratus_testenv::Identity;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ip_mode_nlb_follows_endpoints_and_leaves_nothing_behind() {
    let a = common::setup().await;
    let subnets = a.elb_subnets().await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    let three = a.endpoints("web", 3).await;
    nlb_service(
        &a,
        "web",
        Some(NLB_CLASS),
        &[
            ("nlb-target-type", "ip"),
            ("scheme", "internal"),
            // Given out of order: each goes to the subnet whose CIDR holds it.
            ("private-ipv4-addresses", "10.0.16.50,10.0.0.50"),
            (
                "target-group-attributes",
                "preserve_client_ip.enabled=false",
            ),
        ],
    )
    .await;
    let host = hostname(&a, "web", &ctl).await;
    let name = nlb_name("test", NS, "web");
    let all = lbs(&a).await;
    assert_eq!(all, vec![(name.clone(), "network".into(), host)]);
    // The static addresses went out as subnet mappings, each with the subnet holding it.
    let bodies = a.env.proxy_control().request_bodies().await.unwrap();
    let create: Vec<&String> = bodies
        .iter()
        .filter(|(k, _)| k == "elasticloadbalancing:CreateLoadBalancer")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(create.len(), 1, "{bodies:?}");
    for (i, (subnet, ip)) in subnets.iter().zip(["10.0.0.50", "10.0.16.50"]).enumerate() {
        let n = i + 1;
        assert!(
            create[0].contains(&format!("SubnetMappings.member.{n}.SubnetId={subnet}"))
                && create[0].contains(&format!(
                    "SubnetMappings.member.{n}.PrivateIPv4Address={ip}"
                )),
            "{}",
            create[0]
        );
    }
    assert!(create[0].contains("Type=network") && create[0].contains("Scheme=internal"));
    // One TCP listener forwarding to the one target group, fed from the EndpointSlice.
    let ls = listeners(&a, &name).await;
    assert_eq!(ls.len(), 1, "{ls:?}");
    assert_eq!((ls[0].0, ls[0].1.as_str()), (80, "TCP"));
    let tg = ls[0].2.clone();
    assert_eq!(target_group_arns(&a).await, vec![tg.clone()]);
    assert_eq!(
        tg_attribute(&a, &tg, "preserve_client_ip.enabled").await,
        Some("false".into())
    );
    a.wait_targets(&tg, &three).await;
    let svc = Api::<Service>::namespaced(a.admin.clone(), NS)
        .get("web")
        .await
        .unwrap();
    assert!(svc.metadata.finalizers.unwrap().contains(&FINALIZER.into()));

    // 3 → 5 → 2: exactly the difference, one call each.
    a.env.reset_aws_request_counts().await.unwrap();
    let five = a.endpoints("web", 5).await;
    a.wait_targets(&tg, &five).await;
    assert_eq!(
        writes(&a.elbv2_counts().await),
        BTreeMap::from([("RegisterTargets".to_string(), 1)]),
        "{}",
        ctl.log()
    );
    a.env.reset_aws_request_counts().await.unwrap();
    let two = a.endpoints("web", 2).await;
    a.wait_targets(&tg, &two).await;
    assert_eq!(
        writes(&a.elbv2_counts().await),
        BTreeMap::from([("DeregisterTargets".to_string(), 1)])
    );

    // An invalid annotation: a Warning naming it, no AWS write, no finalizer.
    a.env.reset_aws_request_counts().await.unwrap();
    nlb_service(&a, "bad", Some(NLB_CLASS), &[("scheme", "public")]).await;
    wait_for("warning on bad", WAIT, || async {
        let events = events_about(&a.admin, "Service", "bad").await?;
        Ok(events
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.note.as_deref().unwrap_or_default().contains("scheme")
            })
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert_eq!(writes(&a.elbv2_counts().await), BTreeMap::new());
    assert_eq!(lbs(&a).await.len(), 1);
    let bad = Api::<Service>::namespaced(a.admin.clone(), NS)
        .get("bad")
        .await
        .unwrap();
    assert!(bad.metadata.finalizers.is_none(), "{:?}", bad.metadata);

    // Delete: nothing left in moto, no binding left.
    delete_and_wait(&a, "web", &ctl).await;
    delete_and_wait(&a, "bad", &ctl).await;
    assert_nothing_left(&a, &ctl).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instance_mode_registers_node_instances_on_the_node_port() {
    let a = common::setup().await;
    let elb_subnets = a.elb_subnets().await;
    let subnet = stratus_scenarios::ec2_fixture::subnet(&a.ec2, "us-east-1a")
        .await
        .unwrap();
    let launched = stratus_scenarios::ec2_fixture::launch(
        &a.ec2,
        &subnet,
        "us-east-1a",
        2,
        Some("test"),
        "m5.large",
    )
    .await
    .unwrap();
    // Only the first node carries the label `target-node-labels` asks for.
    for (n, i) in launched.iter().enumerate() {
        let labels = if n == 0 {
            BTreeMap::from([("pool".to_string(), "web".to_string())])
        } else {
            BTreeMap::new()
        };
        stratus_scenarios::service_fixture::create_ready_node(
            &a.admin,
            &i.private_dns,
            &format!("aws:///us-east-1a/{}", i.id),
            labels,
        )
        .await
        .unwrap();
    }
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    // No class: the `external` type annotation; instance targets by default.
    nlb_service(
        &a,
        "nodes",
        None,
        &[("type", "external"), ("target-node-labels", "pool=web")],
    )
    .await;
    hostname(&a, "nodes", &ctl).await;
    let svc = Api::<Service>::namespaced(a.admin.clone(), NS)
        .get("nodes")
        .await
        .unwrap();
    let node_port = svc.spec.unwrap().ports.unwrap()[0].node_port.unwrap();
    let ls = listeners(&a, &nlb_name("test", NS, "nodes")).await;
    assert_eq!(ls.len(), 1, "{ls:?}");
    let tg = &ls[0].2;
    let tgs = a
        .elbv2
        .describe_target_groups()
        .target_group_arns(tg)
        .send()
        .await
        .unwrap();
    assert_eq!(
        tgs.target_groups()[0].target_type().map(|t| t.as_str()),
        Some("instance")
    );
    let want = vec![format!("{}:{node_port}", launched[0].id)];
    a.wait_targets(tg, &want).await;
    delete_and_wait(&a, "nodes", &ctl).await;

    // Internet-facing with an Elastic IP per subnet: the allocations go out as subnet mappings.
    let mut eips = Vec::new();
    for _ in &elb_subnets {
        let out = a.ec2.allocate_address().send().await.unwrap();
        eips.push(out.allocation_id().unwrap().to_string());
    }
    nlb_service(
        &a,
        "public",
        None,
        &[
            ("type", "external"),
            ("scheme", "internet-facing"),
            ("subnets", &elb_subnets.join(",")),
            ("eip-allocations", &eips.join(",")),
        ],
    )
    .await;
    hostname(&a, "public", &ctl).await;
    let bodies = a.env.proxy_control().request_bodies().await.unwrap();
    let create = bodies
        .iter()
        .filter(|(k, _)| k == "elasticloadbalancing:CreateLoadBalancer")
        .map(|(_, b)| b)
        .find(|b| b.contains("Scheme=internet-facing"))
        .expect("the internet-facing CreateLoadBalancer");
    // Paired in the order of the chosen subnets (sorted by ID), as the static addresses.
    let mut sorted = elb_subnets.clone();
    sorted.sort();
    for (i, (subnet, eip)) in sorted.iter().zip(&eips).enumerate() {
        let n = i + 1;
        assert!(
            create.contains(&format!("SubnetMappings.member.{n}.SubnetId={subnet}"))
                && create.contains(&format!("SubnetMappings.member.{n}.AllocationId={eip}")),
            "{create}"
        );
    }
    delete_and_wait(&a, "public", &ctl).await;
    assert_nothing_left(&a, &ctl).await;
}

/// Writes by `identity` to the Service `name` (metadata and status).
fn service_writes(a: &Albc, identity: Identity, name: &str) -> u64 {
    a.env
        .kube_writes_to_object(identity.username(), "services", name)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nlb_class_and_ccm_classic_services_coexist_each_touched_by_its_own_controller() {
    let a = common::setup().await;
    // The CCM's world: a public VPC, a node security group, a ready node behind an instance
    // tagged for the cluster, the shipped CCM RBAC.
    let subnet = ec2_fixture::subnet(&a.ec2, "us-east-1a").await.unwrap();
    let vpc = ec2_fixture::make_public(&a.ec2, &subnet).await.unwrap();
    let group = ec2_fixture::node_security_group(&a.ec2, &subnet, "test")
        .await
        .unwrap();
    let launched = ec2_fixture::launch(&a.ec2, &subnet, "us-east-1a", 1, Some("test"), "m5.large")
        .await
        .unwrap();
    ec2_fixture::set_instance_groups(&a.ec2, &launched[0].id, std::slice::from_ref(&group))
        .await
        .unwrap();
    stratus_scenarios::service_fixture::create_ready_node(
        &a.admin,
        &launched[0].private_dns,
        &format!("aws:///us-east-1a/{}", launched[0].id),
        BTreeMap::new(),
    )
    .await
    .unwrap();
    kube_fixture::apply_rbac_manifest(
        &a.admin,
        &kube_fixture::repo_root().join("deploy/rbac.yaml"),
    )
    .await
    .unwrap();
    // The controller runs as its own ServiceAccount under the chart's ClusterRole.
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "albc-own-identity"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "stratus:aws-load-balancer-controller"},
        "subjects": [{"kind": "ServiceAccount", "name": "aws-load-balancer-controller",
                      "namespace": "kube-system"}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(a.admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let config = write_cloud_config(a.env.dir(), "test").unwrap();
    let ccm = CcmProcess::start(
        &sibling_binary("cloud-controller-manager").unwrap(),
        &a.env,
        &[
            "--cloud-provider=aws".into(),
            format!("--cloud-config={}", config.display()),
            "--controllers=service".into(),
            "--leader-elect-lease-duration=2s".into(),
            "--leader-elect-renew-deadline=1500ms".into(),
            "--leader-elect-retry-period=500ms".into(),
        ],
    )
    .unwrap();
    let albc = a.start_as(
        Identity::LoadBalancerController,
        &[&format!("--aws-vpc-id={vpc}")],
    );

    a.env.reset_aws_request_counts().await.unwrap();
    a.endpoints("nlb", 2).await;
    nlb_service(
        &a,
        "nlb",
        Some(NLB_CLASS),
        &[("nlb-target-type", "ip"), ("subnets", &subnet)],
    )
    .await;
    nlb_service(&a, "classic", None, &[]).await;
    let nlb_host = hostname(&a, "nlb", &albc).await;
    let classic_host = hostname(&a, "classic", &ccm).await;
    assert_ne!(nlb_host, classic_host);

    // AWS: one ELBv2 network load balancer (ours) and one Classic ELB (the CCM's), each made
    // once; the Classic ELB API and the ELBv2 API share the signing name, so the recorded
    // CreateLoadBalancer bodies tell them apart by API version.
    let bodies = a.env.proxy_control().request_bodies().await.unwrap();
    let versions: Vec<(&str, bool)> = bodies
        .iter()
        .filter(|(k, _)| k == "elasticloadbalancing:CreateLoadBalancer")
        .map(|(_, b)| {
            let v2 = b.contains("Version=2015-12-01");
            (
                if v2 { "elbv2" } else { "classic" },
                b.contains("Type=network"),
            )
        })
        .collect();
    let mut sorted = versions.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        vec![("classic", false), ("elbv2", true)],
        "{bodies:?}"
    );
    let nlbs = lbs(&a).await;
    assert_eq!(nlbs.len(), 1, "{nlbs:?}");
    assert_eq!(nlbs[0].0, nlb_name("test", NS, "nlb"));
    // ELBv2-only calls (target groups, listeners) were made once, for the NLB alone.
    let counts = a.elbv2_counts().await;
    assert_eq!(counts.get("CreateTargetGroup"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("CreateListener"), Some(&1), "{counts:?}");

    // Kubernetes: each Service written only by its own controller.
    let ccm_user = Identity::CloudControllerManager;
    let albc_user = Identity::LoadBalancerController;
    assert!(
        service_writes(&a, albc_user, "nlb") >= 2,
        "finalizer and status"
    );
    assert_eq!(service_writes(&a, ccm_user, "nlb"), 0);
    assert!(
        service_writes(&a, ccm_user, "classic") >= 2,
        "finalizer and status"
    );
    assert_eq!(service_writes(&a, albc_user, "classic"), 0);
    assert_eq!(
        a.env
            .kube_writes_to(ccm_user.username(), "targetgroupbindings")
            .unwrap(),
        0
    );
    let svcs = Api::<Service>::namespaced(a.admin.clone(), NS);
    let nlb = svcs.get("nlb").await.unwrap();
    assert_eq!(
        nlb.metadata.finalizers.unwrap(),
        vec![FINALIZER.to_string()]
    );
    let classic = svcs.get("classic").await.unwrap();
    assert_eq!(
        classic.metadata.finalizers.unwrap(),
        vec!["service.kubernetes.io/load-balancer-cleanup".to_string()]
    );

    // Deleting both: each controller cleans up its own.
    delete_and_wait(&a, "nlb", &albc).await;
    delete_and_wait(&a, "classic", &ccm).await;
    assert_nothing_left(&a, &albc).await;
    assert_eq!(service_writes(&a, ccm_user, "nlb"), 0);
    assert_eq!(service_writes(&a, albc_user, "classic"), 0);
}
