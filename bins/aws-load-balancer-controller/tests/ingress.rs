//! Ingress → ALB end to end on moto behind the counting proxy: two hosts and three paths make
//! one ALB with its rules in order and a target group (and internal TargetGroupBinding) per
//! backend and a managed security group open on the listener ports; two Ingresses of one group
//! share one ALB and deleting one keeps the other's rules;
//! an invalid annotation is a Warning Event and changes nothing; deleting every Ingress leaves
//! nothing in moto.

mod common;

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use common::{Albc, NS, WAIT};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::ingress::plan::{load_balancer_name, GroupId};
use stratus_aws_api::elbv2::condition_values;
use stratus_scenarios::wait_for;

async fn subnets(a: &Albc) {
    a.elb_subnets().await;
}

fn path(p: &str, t: &str, svc: &str) -> serde_json::Value {
    serde_json::json!({"path": p, "pathType": t,
        "backend": {"service": {"name": svc, "port": {"number": 80}}}})
}

async fn ingress(a: &Albc, name: &str, ann: serde_json::Value, rules: serde_json::Value) {
    let mut ann = ann;
    ann["alb.ingress.kubernetes.io/target-type"] = "ip".into();
    let ing: Ingress = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"ingressClassName": "alb", "rules": rules}}))
    .unwrap();
    Api::<Ingress>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &ing)
        .await
        .unwrap();
}

async fn lbs(a: &Albc) -> Vec<(String, String, String)> {
    let out = a.elbv2.describe_load_balancers().send().await.unwrap();
    out.load_balancers()
        .iter()
        .map(|l| {
            (
                l.load_balancer_name().unwrap().to_string(),
                l.load_balancer_arn().unwrap().to_string(),
                l.dns_name().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

async fn target_groups(a: &Albc) -> BTreeMap<String, String> {
    let out = a.elbv2.describe_target_groups().send().await.unwrap();
    out.target_groups()
        .iter()
        .map(|g| {
            (
                g.target_group_arn().unwrap().to_string(),
                g.target_group_name().unwrap().to_string(),
            )
        })
        .collect()
}

/// (priority, hosts, paths, target group ARN) of the port-80 listener, by priority.
async fn rules(a: &Albc, lb_arn: &str) -> Vec<(i32, Vec<String>, Vec<String>, String)> {
    let ls = a
        .elbv2
        .describe_listeners()
        .load_balancer_arn(lb_arn)
        .send()
        .await
        .unwrap();
    let l = ls
        .listeners()
        .iter()
        .find(|l| l.port() == Some(80))
        .expect("listener 80");
    let out = a
        .elbv2
        .describe_rules()
        .listener_arn(l.listener_arn().unwrap())
        .send()
        .await
        .unwrap();
    let mut v: Vec<_> = out
        .rules()
        .iter()
        .filter(|r| !r.is_default().unwrap_or(false))
        .map(|r| {
            let mut hosts = Vec::new();
            let mut paths = Vec::new();
            for c in r.conditions() {
                let (h, p) = condition_values(c);
                hosts.extend(h);
                paths.extend(p);
            }
            let tg = r
                .actions()
                .first()
                .and_then(elbv2::types::Action::target_group_arn)
                .unwrap_or_default()
                .to_string();
            (r.priority().unwrap().parse().unwrap(), hosts, paths, tg)
        })
        .collect();
    v.sort();
    v
}

/// Managed security groups in moto: ID and `(protocol, port, cidr)` of each ingress rule.
async fn managed_groups(a: &Albc) -> Vec<(String, Vec<(String, i32, String)>)> {
    let out = a
        .ec2
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:ingress.k8s.aws/resource")
                .values("ManagedLBSecurityGroup")
                .build(),
        )
        .send()
        .await
        .unwrap();
    out.security_groups()
        .iter()
        .map(|g| {
            let mut rules = Vec::new();
            for p in g.ip_permissions() {
                for r in p.ip_ranges() {
                    rules.push((
                        p.ip_protocol().unwrap_or_default().to_string(),
                        p.from_port().unwrap_or(-1),
                        r.cidr_ip().unwrap_or_default().to_string(),
                    ));
                }
            }
            rules.sort();
            (g.group_id().unwrap_or_default().to_string(), rules)
        })
        .collect()
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[tokio::test]
async fn ingresses_make_albs_groups_share_one_and_deleting_all_leaves_nothing() {
    let a = common::setup().await;
    subnets(&a).await;
    a.alb_class("alb", None).await;
    for svc in ["api", "auth", "web", "one", "two"] {
        a.service(svc, false).await;
    }
    a.endpoints("api", 2).await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);

    // Two hosts, three paths.
    ingress(
        &a,
        "web",
        serde_json::json!({}),
        serde_json::json!([
            {"host": "a.example.com", "http": {"paths": [
                path("/api", "Prefix", "api"), path("/login", "Exact", "auth")]}},
            {"host": "b.example.com", "http": {"paths": [path("/", "Prefix", "web")]}}]),
    )
    .await;
    let host = a.ingress_hostname("web", &ctl).await;
    let name = load_balancer_name("test", &GroupId::Implicit(NS.into(), "web".into()));
    let all = lbs(&a).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].0, name);
    assert_eq!(all[0].2, host);
    // No security-groups annotation: a managed group open on the listener port, on the ALB.
    let groups = managed_groups(&a).await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_eq!(
        groups[0].1,
        vec![
            ("icmp".to_string(), 3, "0.0.0.0/0".to_string()),
            ("tcp".to_string(), 80, "0.0.0.0/0".to_string())
        ]
    );
    let described = a
        .elbv2
        .describe_load_balancers()
        .names(&name)
        .send()
        .await
        .unwrap();
    // Beside it the cluster's shared backend group.
    let on_lb = described.load_balancers()[0].security_groups();
    assert_eq!(on_lb.len(), 2, "{on_lb:?}");
    assert!(on_lb.contains(&groups[0].0));
    let tgs = target_groups(&a).await;
    assert_eq!(tgs.len(), 3, "{tgs:?}");
    let r = rules(&a, &all[0].1).await;
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(
        (r[0].0, r[0].1.clone(), r[0].2.clone()),
        (1, s(&["a.example.com"]), s(&["/api", "/api/*"]))
    );
    assert_eq!((r[1].0, r[1].2.clone()), (2, s(&["/login"])));
    assert_eq!(
        (r[2].0, r[2].1.clone(), r[2].2.clone()),
        (3, s(&["b.example.com"]), s(&["/*"]))
    );
    let used: std::collections::BTreeSet<&String> = r.iter().map(|x| &x.3).collect();
    assert_eq!(used.len(), 3, "a target group per backend");
    assert!(used.iter().all(|arn| tgs.contains_key(*arn)));
    // The internal bindings feed the target groups: api's endpoints get registered.
    let tgbs = Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS);
    assert_eq!(
        tgbs.list(&ListParams::default()).await.unwrap().items.len(),
        3
    );
    let api_arn = &r[0].3;
    a.wait_targets(api_arn, &s(&["10.1.0.10:8080", "10.1.0.11:8080"]))
        .await;

    // Two Ingresses in one group share one ALB, in group.order.
    for (n, order) in [("two", "2"), ("one", "1")] {
        ingress(
            &a,
            n,
            serde_json::json!({"alb.ingress.kubernetes.io/group.name": "shop",
                               "alb.ingress.kubernetes.io/group.order": order}),
            serde_json::json!([{"http": {"paths": [path(&format!("/{n}"), "Exact", n)]}}]),
        )
        .await;
    }
    let h1 = a.ingress_hostname("one", &ctl).await;
    let h2 = a.ingress_hostname("two", &ctl).await;
    assert_eq!(h1, h2);
    let all = lbs(&a).await;
    assert_eq!(all.len(), 2, "{all:?}");
    let shop = all.iter().find(|l| l.2 == h1).unwrap().1.clone();
    wait_for("group rules", WAIT, || async {
        let r = rules(&a, &shop).await;
        let paths: Vec<Vec<String>> = r.iter().map(|x| x.2.clone()).collect();
        Ok((paths == vec![s(&["/one"]), s(&["/two"])]).then_some(()))
    })
    .await
    .unwrap();

    // An invalid annotation: a Warning Event, nothing made.
    let before = (lbs(&a).await.len(), target_groups(&a).await.len());
    ingress(
        &a,
        "bad",
        serde_json::json!({"alb.ingress.kubernetes.io/scheme": "public",
                           "alb.ingress.kubernetes.io/inbound-cidrs": "10.0.0.0/8, 300.1.0.0/16"}),
        serde_json::json!([{"http": {"paths": [path("/", "Prefix", "web")]}}]),
    )
    .await;
    let events = Api::<Event>::namespaced(a.admin.clone(), NS);
    wait_for("warning on bad", WAIT, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some("bad")
                    && e.type_.as_deref() == Some("Warning")
                    && e.message.as_deref().unwrap_or_default().contains("scheme")
                    && e.message
                        .as_deref()
                        .unwrap_or_default()
                        .contains("inbound-cidrs")
            })
            .then_some(()))
    })
    .await
    .unwrap();
    assert_eq!((lbs(&a).await.len(), target_groups(&a).await.len()), before);
    assert_eq!(
        managed_groups(&a).await.len(),
        2,
        "one per ALB, none for bad"
    );

    // Deleting one member keeps the other's rules.
    let ings = Api::<Ingress>::namespaced(a.admin.clone(), NS);
    ings.delete("one", &DeleteParams::default()).await.unwrap();
    wait_for("one gone", WAIT, || async {
        Ok(ings.get_opt("one").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    let r = rules(&a, &shop).await;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].0, r[0].2.clone()), (1, s(&["/two"])));
    assert_eq!(lbs(&a).await.len(), 2);

    // Deleting everything leaves nothing in moto.
    for n in ["two", "web", "bad"] {
        ings.delete(n, &DeleteParams::default()).await.unwrap();
    }
    wait_for("ingresses gone", WAIT, || async {
        Ok(ings
            .list(&ListParams::default())
            .await?
            .items
            .is_empty()
            .then_some(()))
    })
    .await
    .unwrap();
    assert!(lbs(&a).await.is_empty());
    assert!(managed_groups(&a).await.is_empty());
    assert!(
        target_groups(&a).await.is_empty(),
        "{:?}",
        target_groups(&a).await
    );
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
