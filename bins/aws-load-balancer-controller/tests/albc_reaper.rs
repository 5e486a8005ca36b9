//! The reaper end to end: an Ingress force-removed (its finalizer stripped) while the
//! controller was down loses its ALB, listeners, target groups, managed security group and
//! internal binding when the controller starts again; a live Ingress group's ALB and group,
//! another cluster's tagged ALB, target group and security group and an untagged ALB stay.

mod common;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use common::{Albc, NS, WAIT};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::ingress::plan::{load_balancer_name, GroupId};
use stratus_scenarios::wait_for;

async fn ingress(a: &Albc, name: &str, group: Option<&str>, svc: &str) {
    let mut ann = serde_json::json!({"alb.ingress.kubernetes.io/target-type": "ip"});
    if let Some(g) = group {
        ann["alb.ingress.kubernetes.io/group.name"] = g.into();
    }
    let ing: Ingress = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"ingressClassName": "alb", "rules": [{"http": {"paths": [{
            "path": "/", "pathType": "Prefix",
            "backend": {"service": {"name": svc, "port": {"number": 80}}}}]}}]}}))
    .unwrap();
    Api::<Ingress>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &ing)
        .await
        .unwrap();
}

/// The ARN of the load balancer named `name`, if it exists.
async fn lb_arn(a: &Albc, name: &str) -> Option<String> {
    let out = a.elbv2.describe_load_balancers().send().await.unwrap();
    out.load_balancers()
        .iter()
        .find(|l| l.load_balancer_name() == Some(name))
        .and_then(|l| l.load_balancer_arn().map(str::to_string))
}

async fn target_group_arns(a: &Albc) -> Vec<String> {
    let out = a.elbv2.describe_target_groups().send().await.unwrap();
    out.target_groups()
        .iter()
        .filter_map(|g| g.target_group_arn().map(str::to_string))
        .collect()
}

/// IDs of the security groups tagged with `stack` (any cluster).
async fn groups_of_stack(a: &Albc, stack: &str) -> Vec<String> {
    a.ec2
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("tag:ingress.k8s.aws/stack")
                .values(stack)
                .build(),
        )
        .send()
        .await
        .unwrap()
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect()
}

fn tag(k: &str, v: &str) -> elbv2::types::Tag {
    elbv2::types::Tag::builder().key(k).value(v).build()
}

#[tokio::test]
async fn what_vanished_while_down_is_reaped_and_nothing_else() {
    let a = common::setup().await;
    let subnets = a.elb_subnets().await;
    a.alb_class("alb", None).await;
    for svc in ["web", "shop"] {
        a.service(svc, false).await;
        a.endpoints(svc, 2).await;
    }
    // Another cluster's ALB and target group (tagged like ours, stack of no live owner) and an
    // untagged ALB.
    let other_lb = a
        .elbv2
        .create_load_balancer()
        .name("other-cluster")
        .set_subnets(Some(subnets.clone()))
        .scheme(elbv2::types::LoadBalancerSchemeEnum::Internal)
        .tags(tag("elbv2.k8s.aws/cluster", "other"))
        .tags(tag("ingress.k8s.aws/stack", "default/doomed"))
        .send()
        .await
        .unwrap()
        .load_balancers()[0]
        .load_balancer_arn()
        .unwrap()
        .to_string();
    let other_tg = a.target_group("other-cluster-tg", "ip", 80).await;
    a.elbv2
        .add_tags()
        .resource_arns(&other_tg)
        .tags(tag("elbv2.k8s.aws/cluster", "other"))
        .tags(tag("service.k8s.aws/stack", "default/gone"))
        .send()
        .await
        .unwrap();
    let untagged = a
        .elbv2
        .create_load_balancer()
        .name("untagged")
        .set_subnets(Some(subnets))
        .scheme(elbv2::types::LoadBalancerSchemeEnum::Internal)
        .send()
        .await
        .unwrap()
        .load_balancers()[0]
        .load_balancer_arn()
        .unwrap()
        .to_string();

    // Another cluster's security group of a stack named like ours.
    let other_sg = a
        .ec2
        .create_security_group()
        .vpc_id(&a.vpc)
        .group_name("other-cluster-sg")
        .description("other cluster")
        .tag_specifications(
            aws_sdk_ec2::types::TagSpecification::builder()
                .resource_type(aws_sdk_ec2::types::ResourceType::SecurityGroup)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("elbv2.k8s.aws/cluster")
                        .value("other")
                        .build(),
                )
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("ingress.k8s.aws/stack")
                        .value("default/doomed")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .unwrap()
        .group_id()
        .unwrap()
        .to_string();

    let vpc_flag = format!("--aws-vpc-id={}", a.vpc);
    let mut ctl = a.start(&[&vpc_flag]);
    ingress(&a, "doomed", None, "web").await;
    ingress(&a, "kept", Some("shop"), "shop").await;
    a.ingress_hostname("doomed", &ctl).await;
    a.ingress_hostname("kept", &ctl).await;
    let doomed_name = load_balancer_name("test", &GroupId::Implicit(NS.into(), "doomed".into()));
    let kept_name = load_balancer_name("test", &GroupId::Explicit("shop".into()));
    let doomed_lb = lb_arn(&a, &doomed_name).await.expect("doomed ALB");
    let kept_lb = lb_arn(&a, &kept_name).await.expect("kept ALB");
    let listeners = a
        .elbv2
        .describe_listeners()
        .load_balancer_arn(&doomed_lb)
        .send()
        .await
        .unwrap();
    assert_eq!(listeners.listeners().len(), 1);
    let tgbs = Api::<TargetGroupBinding>::namespaced(a.admin.clone(), NS);
    let doomed_tg = wait_for("doomed binding", WAIT, || async {
        Ok(tgbs
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .find(|b| b.spec.service_ref.name == "web")
            .map(|b| b.spec.target_group_arn))
    })
    .await
    .unwrap();
    let before = target_group_arns(&a).await;
    assert_eq!(
        before.len(),
        3,
        "doomed, kept and the other cluster's: {before:?}"
    );

    // Managed security groups: one per ALB, plus the other cluster's.
    let doomed_sgs = groups_of_stack(&a, "default/doomed").await;
    assert_eq!(doomed_sgs.len(), 2, "{doomed_sgs:?}");
    let kept_sgs = groups_of_stack(&a, "shop").await;
    assert_eq!(kept_sgs.len(), 1, "{kept_sgs:?}");

    // Down: the Ingress is force-removed (finalizer stripped), nothing cleans up after it.
    ctl.terminate();
    ctl.wait();
    let ings = Api::<Ingress>::namespaced(a.admin.clone(), NS);
    ings.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    ings.patch(
        "doomed",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for("doomed Ingress gone", WAIT, || async {
        Ok(ings.get_opt("doomed").await?.is_none().then_some(()))
    })
    .await
    .unwrap();
    assert!(
        lb_arn(&a, &doomed_name).await.is_some(),
        "nothing ran while down"
    );

    // Up again: the reaper's start-up pass removes the orphaned stack.
    let ctl = a.start(&[&vpc_flag]);
    wait_for("doomed stack reaped", WAIT, || async {
        let lb = lb_arn(&a, &doomed_name).await;
        let tg = target_group_arns(&a).await.contains(&doomed_tg);
        let binding = tgbs
            .list(&Default::default())
            .await?
            .items
            .iter()
            .any(|b| b.spec.target_group_arn == doomed_tg);
        Ok((lb.is_none() && !tg && !binding).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert!(
        a.elbv2
            .describe_listeners()
            .load_balancer_arn(&doomed_lb)
            .send()
            .await
            .map(|o| o.listeners().is_empty())
            .unwrap_or(true),
        "the listeners went with the ALB"
    );
    assert!(
        ctl.log().contains("reaping a load balancer"),
        "{}",
        ctl.log()
    );
    // Everything else stays: the live group, the other cluster's, the untagged.
    assert_eq!(
        lb_arn(&a, &kept_name).await.as_deref(),
        Some(kept_lb.as_str())
    );
    assert_eq!(
        lb_arn(&a, "other-cluster").await.as_deref(),
        Some(other_lb.as_str())
    );
    assert_eq!(
        lb_arn(&a, "untagged").await.as_deref(),
        Some(untagged.as_str())
    );
    // The doomed ALB's managed group went after it; the kept one and the other cluster's stay.
    wait_for("doomed group reaped", WAIT, || async {
        Ok((groups_of_stack(&a, "default/doomed").await == vec![other_sg.clone()]).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert_eq!(groups_of_stack(&a, "shop").await, kept_sgs);
    let after = target_group_arns(&a).await;
    assert_eq!(after.len(), 2, "{after:?}");
    assert!(after.contains(&other_tg));
    assert!(tgbs
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|b| b.spec.service_ref.name == "shop"));
}
