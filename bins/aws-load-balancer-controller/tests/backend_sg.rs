//! The shared backend security group and `spec.networking` on moto: an Ingress's ALB carries
//! its managed frontend group and the cluster's backend group `k8s-traffic-test-*`; its internal
//! binding names the backend group on the Service's target port, and the security group of each
//! pod's network interface (the one tagged for the cluster where an interface has two) gets
//! exactly that rule; a user binding's CIDR rule joins it on the same group and goes again with
//! the binding while the backend rule stays; given groups with
//! `manage-backend-security-group-rules: "true"` keep the backend group and its rule (the managed
//! frontend group goes), `"false"` drops both; deleting the Ingress removes the rule, the ALB and
//! the backend group.

mod common;

use common::{Albc, NS, WAIT};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::ingress::plan::{load_balancer_name, GroupId};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::wait_for;

const SHARED: &str = "elbv2.k8s.aws/targetGroupBinding=shared";

async fn interface(a: &Albc, subnet: &str, ip: &str, groups: &[&str]) {
    let mut req = a
        .ec2
        .create_network_interface()
        .subnet_id(subnet)
        .private_ip_address(ip);
    for g in groups {
        req = req.groups(*g);
    }
    req.send().await.unwrap();
}

/// The rules of `id` managed by the controller: (protocol, from, to, source group or CIDR).
async fn shared_rules(a: &Albc, id: &str) -> Vec<(String, i32, i32, String)> {
    let out = a
        .ec2
        .describe_security_groups()
        .group_ids(id)
        .send()
        .await
        .unwrap();
    let mut rules = Vec::new();
    for p in out.security_groups()[0].ip_permissions() {
        let base = (
            p.ip_protocol().unwrap_or_default().to_string(),
            p.from_port().unwrap_or(-1),
            p.to_port().unwrap_or(-1),
        );
        for pair in p.user_id_group_pairs() {
            if pair.description() == Some(SHARED) {
                rules.push((
                    base.0.clone(),
                    base.1,
                    base.2,
                    pair.group_id().unwrap().to_string(),
                ));
            }
        }
        for r in p.ip_ranges() {
            if r.description() == Some(SHARED) {
                rules.push((
                    base.0.clone(),
                    base.1,
                    base.2,
                    r.cidr_ip().unwrap().to_string(),
                ));
            }
        }
    }
    rules.sort();
    rules
}

async fn wait_rules(a: &Albc, ctl: &CcmProcess, id: &str, want: &[(String, i32, i32, String)]) {
    let waited = wait_for("shared rules", WAIT, || async {
        Ok((shared_rules(a, id).await == want).then_some(()))
    })
    .await;
    if let Err(e) = waited {
        let have = shared_rules(a, id).await;
        panic!("{e}: have {have:?}\n{}", ctl.log());
    }
}

/// Service `web`'s ready endpoints on port 8080 (`http`): `addresses`.
async fn web_endpoints(a: &Albc, addresses: &[&str]) {
    let endpoints: Vec<serde_json::Value> = addresses
        .iter()
        .map(|ip| serde_json::json!({"addresses": [ip], "conditions": {"ready": true}}))
        .collect();
    let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-a", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": endpoints}))
    .unwrap();
    Api::<EndpointSlice>::namespaced(a.admin.clone(), NS)
        .patch(
            "web-a",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&slice),
        )
        .await
        .unwrap();
}

fn rule(from: i32, source: &str) -> (String, i32, i32, String) {
    ("tcp".into(), from, from, source.into())
}

#[tokio::test]
async fn the_backend_group_reaches_the_pods_through_their_interface_groups() {
    let a = common::setup().await;
    let subnets = a.elb_subnets().await;
    // Pod network interfaces: one in the node group only, one also in an untagged group.
    let nodes = a
        .security_group("nodes", &[("kubernetes.io/cluster/test", "owned")])
        .await;
    let extra = a.security_group("extra", &[]).await;
    interface(&a, &subnets[0], "10.0.0.50", &[&nodes]).await;
    interface(&a, &subnets[0], "10.0.0.51", &[&nodes, &extra]).await;
    a.service("web", false).await;
    web_endpoints(&a, &["10.0.0.50", "10.0.0.51"]).await;
    a.alb_class("alb", None).await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    let ing: Ingress = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "annotations": {"alb.ingress.kubernetes.io/target-type": "ip"}},
        "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": [
            {"path": "/", "pathType": "Prefix",
             "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}))
    .unwrap();
    let ings = Api::<Ingress>::namespaced(a.admin.clone(), NS);
    ings.create(&PostParams::default(), &ing).await.unwrap();
    a.ingress_hostname("web", &ctl).await;

    // The backend group: one, named for the cluster, on the ALB beside the frontend group.
    let backend = a
        .groups_tagged("elbv2.k8s.aws/resource", "backend-sg")
        .await;
    assert_eq!(backend.len(), 1, "{backend:?}");
    let backend = backend[0].clone();
    let described = a
        .ec2
        .describe_security_groups()
        .group_ids(&backend)
        .send()
        .await
        .unwrap();
    let name = described.security_groups()[0].group_name().unwrap();
    assert!(name.starts_with("k8s-traffic-test-"), "{name}");
    let lb_name = load_balancer_name("test", &GroupId::Implicit(NS.into(), "web".into()));
    let lb = a
        .elbv2
        .describe_load_balancers()
        .names(&lb_name)
        .send()
        .await
        .unwrap();
    let on_lb = lb.load_balancers()[0].security_groups().to_vec();
    assert_eq!(on_lb.len(), 2, "{on_lb:?}");
    assert!(on_lb.contains(&backend));
    // The internal binding names it on the target port; the pods' group admits it there, the
    // untagged second group of one interface gets nothing.
    let tgbs = Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS);
    let internal = tgbs.list(&Default::default()).await.unwrap().items[0].clone();
    let net = internal.spec.networking.clone().expect("networking");
    assert_eq!(
        net.ingress[0].from[0]
            .security_group
            .as_ref()
            .unwrap()
            .group_id,
        backend
    );
    wait_rules(&a, &ctl, &nodes, &[rule(8080, &backend)]).await;
    assert!(shared_rules(&a, &extra).await.is_empty());

    // A user binding's CIDR rule joins the same group, and leaves with its binding.
    let tg = a.target_group("manual", "ip", 80).await;
    let manual: TargetGroupBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": "manual"},
        "spec": {"serviceRef": {"name": "web", "port": 80}, "targetGroupARN": tg,
                 "targetType": "ip",
                 "networking": {"ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.0/16"}}],
                                             "ports": [{"protocol": "TCP", "port": "http"}]}]}}}))
    .unwrap();
    tgbs.create(&PostParams::default(), &manual).await.unwrap();
    wait_rules(
        &a,
        &ctl,
        &nodes,
        &[rule(8080, "10.0.0.0/16"), rule(8080, &backend)],
    )
    .await;
    a.delete_binding("manual").await;
    wait_rules(&a, &ctl, &nodes, &[rule(8080, &backend)]).await;

    // Given groups with `manage-backend-security-group-rules`: the given group and the backend
    // group on the ALB, the managed frontend group gone, the backend rule kept; turned off, the
    // given group alone and the rule revoked.
    let given = a.security_group("given", &[]).await;
    let alb_groups = || async {
        let lb = a
            .elbv2
            .describe_load_balancers()
            .names(&lb_name)
            .send()
            .await?;
        let mut groups = lb.load_balancers()[0].security_groups().to_vec();
        groups.sort();
        anyhow::Ok(groups)
    };
    for (manage, mut want, rules) in [
        (
            "true",
            vec![given.clone(), backend.clone()],
            vec![rule(8080, &backend)],
        ),
        ("false", vec![given.clone()], vec![]),
    ] {
        want.sort();
        let patch = serde_json::json!({"metadata": {"annotations": {
            "alb.ingress.kubernetes.io/security-groups": given,
            "alb.ingress.kubernetes.io/manage-backend-security-group-rules": manage}}});
        ings.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        wait_for(
            &format!("ALB groups with manage={manage}"),
            WAIT,
            || async { Ok((alb_groups().await? == want).then_some(())) },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
        wait_rules(&a, &ctl, &nodes, &rules).await;
    }
    assert!(a
        .groups_tagged("ingress.k8s.aws/resource", "ManagedLBSecurityGroup")
        .await
        .is_empty());

    // Deleting the Ingress takes the rule, the ALB and the backend group with it.
    ings.delete("web", &DeleteParams::default()).await.unwrap();
    wait_rules(&a, &ctl, &nodes, &[]).await;
    wait_for("backend group deleted", WAIT, || async {
        Ok(a.groups_tagged("elbv2.k8s.aws/resource", "backend-sg")
            .await
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    let left = a.elbv2.describe_load_balancers().send().await.unwrap();
    assert!(left.load_balancers().is_empty());
}

/// moto, unlike AWS, deletes a group other groups' rules still name, and a Service teardown can
/// race its binding's: a binding whose source group vanished first must still leave, not retry a
/// revoke of a group that no longer exists for ever.
#[tokio::test]
async fn a_binding_whose_source_group_vanished_is_still_deleted() {
    let a = common::setup().await;
    let subnets = a.elb_subnets().await;
    let nodes = a
        .security_group("nodes", &[("kubernetes.io/cluster/test", "owned")])
        .await;
    interface(&a, &subnets[0], "10.0.0.50", &[&nodes]).await;
    a.service("web", false).await;
    web_endpoints(&a, &["10.0.0.50"]).await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    let doomed = a.security_group("doomed", &[]).await;
    let tg = a.target_group("doomed", "ip", 80).await;
    let binding: TargetGroupBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": "doomed"},
        "spec": {"serviceRef": {"name": "web", "port": 80}, "targetGroupARN": tg,
                 "targetType": "ip",
                 "networking": {"ingress": [{"from": [{"securityGroup": {"groupID": doomed}}],
                                             "ports": [{"protocol": "TCP", "port": "http"}]}]}}}))
    .unwrap();
    Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    wait_rules(&a, &ctl, &nodes, &[rule(8080, &doomed)]).await;
    a.ec2
        .delete_security_group()
        .group_id(&doomed)
        .send()
        .await
        .unwrap();
    a.delete_binding("doomed").await;
}
