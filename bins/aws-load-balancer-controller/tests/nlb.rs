//! Service → NLB end to end on moto behind the counting proxy: an IP-mode NLB Service gets a
//! hostname, its listener and target group, and targets that follow the EndpointSlice by the
//! difference only (3 → 5 → 2); its static private addresses reach CreateLoadBalancer as subnet
//! mappings; instance mode registers the nodes' instances on the NodePort; an invalid annotation
//! is a Warning Event and no AWS write; deleting the Service leaves nothing in moto. TLS
//! listeners carry their certificates, policy and ALPN policy, and a certificate rotation is one
//! ModifyListener; load-balancer and proxy-protocol attributes are held; a TCP and a UDP port on
//! one number share a TCP_UDP listener. NLBs get a managed frontend group opening each
//! listener to the source ranges plus the shared backend group their bindings admit, or exactly
//! the given groups; both managed groups go with the last NLB. Beside the
//! real cloud-controller-manager, an NLB-class Service and a plain Classic LoadBalancer Service
//! are each written (in Kubernetes and AWS) by their own controller only.

mod common;

use std::collections::BTreeMap;

use common::{Albc, NS, WAIT};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::service::annotations::NLB_CLASS;
use stratus_albc::service::controller::FINALIZER;
use stratus_albc::service::model::nlb_name;
use stratus_scenarios::ccm::{sibling_binary, write_cloud_config, CcmProcess};
use stratus_scenarios::service_fixture::events_about;
use stratus_scenarios::wait_for;
use stratus_scenarios::{ec2_fixture, kube_fixture};
use stratus_testenv::Identity;

const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";

/// A LoadBalancer Service `name`, port 80 named `http` → 8080, of `class` (if any) with the
/// annotations `ann` (keys without the common prefix).
async fn nlb_service(a: &Albc, name: &str, class: Option<&str>, ann: &[(&str, &str)]) {
    let ann: BTreeMap<String, String> = ann
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
        .collect();
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": class,
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
    .unwrap();
    Api::<Service>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

async fn hostname(a: &Albc, name: &str, ctl: &CcmProcess) -> String {
    let api = Api::<Service>::namespaced(a.admin.clone(), NS);
    wait_for(&format!("{name} hostname"), WAIT, || async {
        let svc = api.get(name).await?;
        Ok(svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .and_then(|i| i.first().cloned())
            .and_then(|i| i.hostname))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()))
}

/// (name, type, DNS name) of every load balancer in moto.
async fn lbs(a: &Albc) -> Vec<(String, String, String)> {
    let out = a.elbv2.describe_load_balancers().send().await.unwrap();
    out.load_balancers()
        .iter()
        .map(|l| {
            (
                l.load_balancer_name().unwrap().to_string(),
                l.r#type()
                    .map(|t| t.as_str().to_string())
                    .unwrap_or_default(),
                l.dns_name().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn target_group_arns(a: &Albc) -> Vec<String> {
    let out = a.elbv2.describe_target_groups().send().await.unwrap();
    out.target_groups()
        .iter()
        .map(|g| g.target_group_arn().unwrap().to_string())
        .collect()
}

/// The load balancer `name` as moto describes it.
async fn described(a: &Albc, name: &str) -> aws_sdk_elasticloadbalancingv2::types::LoadBalancer {
    let out = a
        .elbv2
        .describe_load_balancers()
        .names(name)
        .send()
        .await
        .unwrap();
    out.load_balancers()[0].clone()
}

/// (port, protocol, forward target group) of the NLB's listeners.
async fn listeners(a: &Albc, lb_name: &str) -> Vec<(i32, String, String)> {
    let lb = described(a, lb_name).await;
    let arn = lb.load_balancer_arn().unwrap();
    let ls = a
        .elbv2
        .describe_listeners()
        .load_balancer_arn(arn)
        .send()
        .await
        .unwrap();
    ls.listeners()
        .iter()
        .map(|l| {
            (
                l.port().unwrap(),
                l.protocol().unwrap().as_str().to_string(),
                l.default_actions()[0]
                    .target_group_arn()
                    .unwrap()
                    .to_string(),
            )
        })
        .collect()
}

/// The value of a target group's attribute `key`.
async fn tg_attribute(a: &Albc, tg: &str, key: &str) -> Option<String> {
    let attrs = a
        .elbv2
        .describe_target_group_attributes()
        .target_group_arn(tg)
        .send()
        .await
        .unwrap();
    attrs
        .attributes()
        .iter()
        .find(|x| x.key() == Some(key))
        .and_then(|x| x.value().map(str::to_string))
}

/// ELBv2 requests other than reads.
fn writes(counts: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts
        .iter()
        .filter(|(k, _)| !k.starts_with("Describe"))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

async fn delete_and_wait(a: &Albc, name: &str, ctl: &CcmProcess) {
    let api = Api::<Service>::namespaced(a.admin.clone(), NS);
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(&format!("{name} gone"), WAIT, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
}

async fn assert_nothing_left(a: &Albc) {
    assert!(lbs(a).await.is_empty(), "{:?}", lbs(a).await);
    assert!(target_group_arns(a).await.is_empty());
    // Neither the managed frontend groups nor the shared backend group.
    let groups = a.groups_tagged("elbv2.k8s.aws/cluster", "test").await;
    assert!(groups.is_empty(), "{groups:?}");
    let tgbs = Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS);
    wait_for("bindings gone", WAIT, || async {
        Ok(tgbs
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
}

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
    assert_nothing_left(&a).await;
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
    assert_nothing_left(&a).await;
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
    assert_nothing_left(&a).await;
    assert_eq!(service_writes(&a, ccm_user, "nlb"), 0);
    assert_eq!(service_writes(&a, albc_user, "classic"), 0);
}

/// A LoadBalancer Service of the NLB class with `ports` and the annotations `ann`.
async fn service_with_ports(a: &Albc, name: &str, ports: serde_json::Value, ann: &[(&str, &str)]) {
    let ann: BTreeMap<String, String> = ann
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
        .collect();
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": NLB_CLASS, "ports": ports}}))
    .unwrap();
    Api::<Service>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

async fn listener_arn(a: &Albc, lb_name: &str, port: i32) -> String {
    let lb = described(a, lb_name).await;
    let ls = a
        .elbv2
        .describe_listeners()
        .load_balancer_arn(lb.load_balancer_arn().unwrap())
        .send()
        .await
        .unwrap();
    ls.listeners()
        .iter()
        .find(|l| l.port() == Some(port))
        .and_then(|l| l.listener_arn())
        .unwrap()
        .to_string()
}

/// Certificates of a listener beyond the default one, sorted.
async fn extra_certificates(a: &Albc, listener: &str) -> Vec<String> {
    let out = a
        .elbv2
        .describe_listener_certificates()
        .listener_arn(listener)
        .send()
        .await
        .unwrap();
    let mut certs: Vec<String> = out
        .certificates()
        .iter()
        .filter(|c| !c.is_default().unwrap_or(false))
        .filter_map(|c| c.certificate_arn().map(str::to_string))
        .collect();
    certs.sort();
    certs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_listeners_attributes_and_tcp_udp_ports() {
    let a = common::setup().await;
    a.elb_subnets().await;
    let moto = a.env.moto_endpoint().to_string();
    let mut certs = Vec::new();
    for domain in ["a.example.com", "b.example.com", "c.example.com"] {
        certs.push(
            stratus_scenarios::acm_fixture::request_certificate(&moto, domain)
                .await
                .unwrap(),
        );
    }
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    a.endpoints("tls", 2).await;
    service_with_ports(
        &a,
        "tls",
        serde_json::json!([
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "https", "port": 443, "targetPort": 8080}]),
        &[
            ("nlb-target-type", "ip"),
            ("ssl-cert", &format!("{},{}", certs[0], certs[1])),
            ("ssl-ports", "https"),
            ("alpn-policy", "HTTP2Preferred"),
            ("attributes", "load_balancing.cross_zone.enabled=true"),
            ("proxy-protocol", "*"),
        ],
    )
    .await;
    hostname(&a, "tls", &ctl).await;
    let name = nlb_name("test", NS, "tls");
    let mut ls = listeners(&a, &name).await;
    ls.sort();
    let protocols: Vec<(i32, &str)> = ls.iter().map(|l| (l.0, l.1.as_str())).collect();
    assert_eq!(protocols, vec![(80, "TCP"), (443, "TLS")]);
    // The TLS listener: the first certificate by default, the second added, upstream's policy.
    let tls = listener_arn(&a, &name, 443).await;
    let tls_listener = a
        .elbv2
        .describe_listeners()
        .listener_arns(&tls)
        .send()
        .await
        .unwrap();
    let l = &tls_listener.listeners()[0];
    assert_eq!(
        l.certificates()[0].certificate_arn(),
        Some(certs[0].as_str())
    );
    assert_eq!(l.ssl_policy(), Some("ELBSecurityPolicy-2016-08"));
    assert_eq!(extra_certificates(&a, &tls).await, vec![certs[1].clone()]);
    let bodies = a.env.proxy_control().request_bodies().await.unwrap();
    assert!(
        bodies
            .iter()
            .any(|(k, b)| k == "elasticloadbalancing:CreateListener"
                && b.contains("Protocol=TLS")
                && b.contains("AlpnPolicy.member.1=HTTP2Preferred")),
        "{bodies:?}"
    );
    // Attributes: cross-zone on the NLB, proxy protocol v2 on every target group (both TCP).
    let lb_arn = described(&a, &name)
        .await
        .load_balancer_arn()
        .unwrap()
        .to_string();
    let attrs = a
        .elbv2
        .describe_load_balancer_attributes()
        .load_balancer_arn(&lb_arn)
        .send()
        .await
        .unwrap();
    assert!(
        attrs
            .attributes()
            .iter()
            .any(|x| x.key() == Some("load_balancing.cross_zone.enabled")
                && x.value() == Some("true")),
        "{attrs:?}"
    );
    for (_, _, tg) in &ls {
        let g = a
            .elbv2
            .describe_target_groups()
            .target_group_arns(tg)
            .send()
            .await
            .unwrap();
        assert_eq!(
            g.target_groups()[0].protocol().map(|p| p.as_str()),
            Some("TCP")
        );
        assert_eq!(
            tg_attribute(&a, tg, "proxy_protocol_v2.enabled").await,
            Some("true".into())
        );
    }

    // Rotating the certificate and the policy: one ModifyListener and one certificate removal;
    // no listener or target group is made or deleted.
    a.env.reset_aws_request_counts().await.unwrap();
    let patch = serde_json::json!({"metadata": {"annotations": {
        format!("{PREFIX}ssl-cert"): certs[2],
        format!("{PREFIX}ssl-negotiation-policy"): "ELBSecurityPolicy-TLS13-1-2-2021-06"}}});
    Api::<Service>::namespaced(a.admin.clone(), NS)
        .patch(
            "tls",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    wait_for("second certificate removed", WAIT, || async {
        Ok(extra_certificates(&a, &tls).await.is_empty().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    let bodies = a.env.proxy_control().request_bodies().await.unwrap();
    let modify: Vec<&String> = bodies
        .iter()
        .filter(|(k, _)| k == "elasticloadbalancing:ModifyListener")
        .map(|(_, b)| b)
        .collect();
    assert!(
        modify.iter().any(
            |b| b.contains(&certs[2].replace(':', "%3A").replace('/', "%2F"))
                && b.contains("SslPolicy=ELBSecurityPolicy-TLS13-1-2-2021-06")
        ),
        "{modify:?}"
    );
    let w = writes(&a.elbv2_counts().await);
    for made in [
        "CreateListener",
        "DeleteListener",
        "CreateTargetGroup",
        "DeleteTargetGroup",
    ] {
        assert_eq!(w.get(made), None, "{w:?}");
    }
    assert_eq!(w.get("RemoveListenerCertificates"), Some(&1), "{w:?}");

    // DNS on one number over TCP and UDP: one TCP_UDP listener and target group.
    service_with_ports(
        &a,
        "dns",
        serde_json::json!([
            {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5353},
            {"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353}]),
        &[("nlb-target-type", "ip")],
    )
    .await;
    hostname(&a, "dns", &ctl).await;
    let dns = listeners(&a, &nlb_name("test", NS, "dns")).await;
    assert_eq!(dns.len(), 1, "{dns:?}");
    assert_eq!((dns[0].0, dns[0].1.as_str()), (53, "TCP_UDP"));
    let g = a
        .elbv2
        .describe_target_groups()
        .target_group_arns(&dns[0].2)
        .send()
        .await
        .unwrap();
    assert_eq!(
        g.target_groups()[0].protocol().map(|p| p.as_str()),
        Some("TCP_UDP")
    );

    delete_and_wait(&a, "tls", &ctl).await;
    delete_and_wait(&a, "dns", &ctl).await;
    assert_nothing_left(&a).await;
}

/// (ARN, scheme, sorted subnets) of the load balancer `name`.
async fn nlb_placement(a: &Albc, name: &str) -> (String, String, Vec<String>) {
    let l = described(a, name).await;
    let mut subnets: Vec<String> = l
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id().map(str::to_string))
        .collect();
    subnets.sort();
    (
        l.load_balancer_arn().unwrap().to_string(),
        l.scheme().unwrap().as_str().to_string(),
        subnets,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_nlb_follows_its_subnets_in_place_and_is_replaced_for_a_new_scheme() {
    let a = common::setup().await;
    let mut subnets = a.elb_subnets().await;
    let third = a
        .ec2
        .create_subnet()
        .vpc_id(&a.vpc)
        .cidr_block("10.0.32.0/20")
        .availability_zone("us-east-1c")
        .send()
        .await
        .unwrap()
        .subnet()
        .and_then(|s| s.subnet_id())
        .unwrap()
        .to_string();
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    a.endpoints("moving", 2).await;
    nlb_service(
        &a,
        "moving",
        Some(NLB_CLASS),
        &[("nlb-target-type", "ip"), ("subnets", &subnets.join(","))],
    )
    .await;
    // (moto names the DNS after the load balancer, so a replacement keeps the hostname.)
    hostname(&a, "moving", &ctl).await;
    let name = nlb_name("test", NS, "moving");
    let (arn, scheme, live) = nlb_placement(&a, &name).await;
    subnets.sort();
    assert_eq!((scheme.as_str(), &live), ("internal", &subnets));
    let tg = listeners(&a, &name).await[0].2.clone();

    // A third subnet: one SetSubnets on the same load balancer, nothing made or deleted.
    a.env.reset_aws_request_counts().await.unwrap();
    let svcs = Api::<Service>::namespaced(a.admin.clone(), NS);
    let mut three = subnets.clone();
    three.push(third);
    three.sort();
    let patch = serde_json::json!({"metadata": {"annotations": {
        format!("{PREFIX}subnets"): three.join(",")}}});
    svcs.patch(
        "moving",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    wait_for("three subnets", WAIT, || async {
        let (now, _, live) = nlb_placement(&a, &name).await;
        Ok((live == three).then_some(now))
    })
    .await
    .map(|now| assert_eq!(now, arn))
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    let w = writes(&a.elbv2_counts().await);
    assert_eq!(
        w,
        BTreeMap::from([("SetSubnets".to_string(), 1)]),
        "{}",
        ctl.log()
    );

    // internet-facing: AWS cannot change a scheme, so the NLB is replaced; the target group
    // and its targets stay, the listener comes back on the new NLB, the hostname follows.
    let patch = serde_json::json!({"metadata": {"annotations": {
        format!("{PREFIX}scheme"): "internet-facing"}}});
    svcs.patch(
        "moving",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    wait_for("internet-facing NLB", WAIT, || async {
        let (now, scheme, _) = nlb_placement(&a, &name).await;
        Ok((scheme == "internet-facing" && now != arn).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert_eq!(lbs(&a).await.len(), 1);
    wait_for("listener on the new NLB", WAIT, || async {
        let ls = listeners(&a, &name).await;
        Ok((ls.len() == 1 && ls[0].2 == tg).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    let new_host = lbs(&a).await[0].2.clone();
    wait_for("hostname follows", WAIT, || async {
        let svc = svcs.get("moving").await?;
        let host = svc
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress)
            .and_then(|i| i.first().cloned())
            .and_then(|i| i.hostname);
        Ok((host.as_deref() == Some(new_host.as_str())).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert_eq!(target_group_arns(&a).await, vec![tg]);
    delete_and_wait(&a, "moving", &ctl).await;
    assert_nothing_left(&a).await;
}

/// (protocol, port, CIDR) of a group's inbound rules, sorted.
async fn inbound(a: &Albc, group: &str) -> Vec<(String, i32, String)> {
    let out = a
        .ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await
        .unwrap();
    let mut rules: Vec<(String, i32, String)> = out.security_groups()[0]
        .ip_permissions()
        .iter()
        .flat_map(|p| {
            p.ip_ranges().iter().map(move |r| {
                (
                    p.ip_protocol().unwrap_or_default().to_string(),
                    p.from_port().unwrap_or_default(),
                    r.cidr_ip().unwrap_or_default().to_string(),
                )
            })
        })
        .filter(|(proto, _, _)| proto != "icmp")
        .collect();
    rules.sort();
    rules
}

/// The NLB's security groups, sorted.
async fn nlb_groups(a: &Albc, name: &str) -> Vec<String> {
    let mut groups = described(a, name).await.security_groups().to_vec();
    groups.sort();
    groups
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nlbs_get_a_managed_frontend_group_the_backend_group_or_the_given_ones() {
    let a = common::setup().await;
    a.elb_subnets().await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    a.endpoints("guarded", 2).await;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "guarded",
                     "annotations": {format!("{PREFIX}nlb-target-type"): "ip"}},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": NLB_CLASS,
                 "loadBalancerSourceRanges": ["10.0.0.0/8"],
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080},
                           {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 5353}]}}))
    .unwrap();
    let svcs = Api::<Service>::namespaced(a.admin.clone(), NS);
    svcs.create(&PostParams::default(), &svc).await.unwrap();
    hostname(&a, "guarded", &ctl).await;
    let name = nlb_name("test", NS, "guarded");
    // Two groups: the managed frontend one (named like the NLB) and the shared backend one.
    let backend = a
        .groups_tagged("elbv2.k8s.aws/resource", "backend-sg")
        .await;
    assert_eq!(backend.len(), 1, "{backend:?}");
    let frontend = a
        .groups_tagged("service.k8s.aws/resource", "ManagedLBSecurityGroup")
        .await;
    assert_eq!(frontend.len(), 1, "{frontend:?}");
    let mut both = vec![frontend[0].clone(), backend[0].clone()];
    both.sort();
    assert_eq!(nlb_groups(&a, &name).await, both);
    // The frontend group opens each listener over its protocol to the source ranges only.
    let cidr = "10.0.0.0/8".to_string();
    assert_eq!(
        inbound(&a, &frontend[0]).await,
        vec![("tcp".into(), 80, cidr.clone()), ("udp".into(), 53, cidr)]
    );
    // The internal bindings let the backend group reach the pods' ports.
    let tgbs = Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS);
    let mut reached: Vec<(String, String, String)> = tgbs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .flat_map(|t| t.spec.networking.clone().unwrap().ingress)
        .flat_map(|rule| {
            let from = rule.from[0].security_group.clone().unwrap().group_id;
            rule.ports.into_iter().map(move |p| {
                (
                    from.clone(),
                    p.protocol.unwrap(),
                    format!("{:?}", p.port.unwrap()),
                )
            })
        })
        .collect();
    reached.sort();
    assert_eq!(
        reached,
        vec![
            (backend[0].clone(), "TCP".into(), "Int(8080)".into()),
            (backend[0].clone(), "UDP".into(), "Int(5353)".into())
        ]
    );

    // New source ranges: the frontend rules follow, by difference.
    let patch = serde_json::json!({"spec": {"loadBalancerSourceRanges": ["192.168.0.0/16"]}});
    svcs.patch(
        "guarded",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .unwrap();
    let cidr = "192.168.0.0/16".to_string();
    let want = vec![("tcp".into(), 80, cidr.clone()), ("udp".into(), 53, cidr)];
    wait_for("frontend rules follow", WAIT, || async {
        Ok((inbound(&a, &frontend[0]).await == want).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));

    // Given groups: exactly those, no managed group, no networking on the bindings.
    let given = a.security_group("given", &[]).await;
    nlb_service(
        &a,
        "given",
        Some(NLB_CLASS),
        &[("nlb-target-type", "ip"), ("security-groups", &given)],
    )
    .await;
    hostname(&a, "given", &ctl).await;
    assert_eq!(
        nlb_groups(&a, &nlb_name("test", NS, "given")).await,
        vec![given.clone()]
    );
    assert_eq!(
        a.groups_tagged("service.k8s.aws/resource", "ManagedLBSecurityGroup")
            .await,
        frontend
    );
    let given_bindings: Vec<TargetGroupBinding> = tgbs
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|t| t.spec.service_ref.name == "given")
        .collect();
    assert_eq!(given_bindings.len(), 1);
    assert!(given_bindings[0].spec.networking.is_none());

    // Deleting both: the NLBs, the managed group and the backend group go; the given one stays.
    delete_and_wait(&a, "guarded", &ctl).await;
    delete_and_wait(&a, "given", &ctl).await;
    assert_nothing_left(&a).await;
    let out = a
        .ec2
        .describe_security_groups()
        .group_ids(&given)
        .send()
        .await
        .unwrap();
    assert_eq!(out.security_groups().len(), 1);

    // With the gate off, an NLB gets no group at all.
    drop(ctl);
    let ctl = a.start(&[
        &format!("--aws-vpc-id={}", a.vpc),
        "--feature-gates=NLBSecurityGroup=false",
    ]);
    nlb_service(&a, "open", Some(NLB_CLASS), &[("nlb-target-type", "ip")]).await;
    hostname(&a, "open", &ctl).await;
    assert!(nlb_groups(&a, &nlb_name("test", NS, "open"))
        .await
        .is_empty());
    assert!(a
        .groups_tagged("elbv2.k8s.aws/cluster", "test")
        .await
        .is_empty());
    delete_and_wait(&a, "open", &ctl).await;
    assert_nothing_left(&a).await;
}
