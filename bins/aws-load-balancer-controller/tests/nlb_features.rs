//! NLB features end to end on moto behind the counting proxy: TLS listeners carry their
//! certificates, policy and ALPN policy, and a certificate rotation is one ModifyListener;
//! load-balancer and proxy-protocol attributes are held; a TCP and a UDP port on one number share
//! a TCP_UDP listener; a live NLB takes a new subnet with one SetSubnets and is replaced for a
//! new scheme; NLBs get a managed frontend group opening each listener to the source ranges plus
//! the shared backend group their bindings admit, or exactly the given groups, and both managed
//! groups go with the last NLB.

mod common;

use std::collections::BTreeMap;

use common::nlb::{
    assert_nothing_left, delete_and_wait, described, find_described, hostname, lb_service, lbs,
    listeners, nlb_service, target_group_arns, tg_attribute, writes, PREFIX,
};
use common::{Albc, NS, WAIT};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ListParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::service::annotations::NLB_CLASS;
use stratus_albc::service::plan::nlb_name;
use stratus_scenarios::wait_for;

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
    lb_service(
        &a,
        "tls",
        Some(NLB_CLASS),
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
    lb_service(
        &a,
        "dns",
        Some(NLB_CLASS),
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
    assert_nothing_left(&a, &ctl).await;
}

/// (ARN, scheme, sorted subnets) of the load balancer `name`.
async fn nlb_placement(a: &Albc, name: &str) -> Option<(String, String, Vec<String>)> {
    let l = find_described(a, name).await?;
    let mut subnets: Vec<String> = l
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id().map(str::to_string))
        .collect();
    subnets.sort();
    Some((
        l.load_balancer_arn().unwrap().to_string(),
        l.scheme().unwrap().as_str().to_string(),
        subnets,
    ))
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
    let (arn, scheme, live) = nlb_placement(&a, &name).await.unwrap();
    subnets.sort();
    assert_eq!((scheme.as_str(), &live), ("internal", &subnets));
    let tg = listeners(&a, &name).await[0].2.clone();
    // The TargetGroupBinding registers the two endpoints on its own schedule: wait for it, so
    // its RegisterTargets is not counted below.
    wait_for("both targets registered", WAIT, || async {
        Ok((a.targets(&tg).await.len() == 2).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));

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
        let Some((now, _, live)) = nlb_placement(&a, &name).await else {
            return Ok(None);
        };
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
        let Some((now, scheme, _)) = nlb_placement(&a, &name).await else {
            return Ok(None);
        };
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
    assert_nothing_left(&a, &ctl).await;
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
    assert_nothing_left(&a, &ctl).await;
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
    assert_nothing_left(&a, &ctl).await;
}
