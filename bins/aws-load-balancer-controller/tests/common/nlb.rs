//! Helpers of the NLB suites (`nlb.rs`, `nlb_features.rs`): NLB Services, what moto holds of
//! their load balancers, listeners and target groups, and the check that nothing is left.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::wait_for;

use super::{Albc, NS, WAIT};

pub const PREFIX: &str = "service.beta.kubernetes.io/aws-load-balancer-";

/// A LoadBalancer Service `name` with `ports`, of `class` (if any), with the annotations `ann`
/// (keys without the common prefix).
pub async fn lb_service(
    a: &Albc,
    name: &str,
    class: Option<&str>,
    ports: serde_json::Value,
    ann: &[(&str, &str)],
) {
    let ann: BTreeMap<String, String> = ann
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
        .collect();
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "annotations": ann},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": class, "ports": ports}}))
    .unwrap();
    Api::<Service>::namespaced(a.admin.clone(), NS)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

/// [`lb_service`] with port 80 named `http` → 8080.
pub async fn nlb_service(a: &Albc, name: &str, class: Option<&str>, ann: &[(&str, &str)]) {
    let ports = serde_json::json!([{"name": "http", "port": 80, "targetPort": 8080}]);
    lb_service(a, name, class, ports, ann).await;
}

pub async fn hostname(a: &Albc, name: &str, ctl: &CcmProcess) -> String {
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
pub async fn lbs(a: &Albc) -> Vec<(String, String, String)> {
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

pub async fn target_group_arns(a: &Albc) -> Vec<String> {
    let out = a.elbv2.describe_target_groups().send().await.unwrap();
    out.target_groups()
        .iter()
        .map(|g| g.target_group_arn().unwrap().to_string())
        .collect()
}

/// The load balancer `name` as moto describes it, if it exists (a replacement is briefly
/// absent).
pub async fn find_described(
    a: &Albc,
    name: &str,
) -> Option<aws_sdk_elasticloadbalancingv2::types::LoadBalancer> {
    let out = a.elbv2.describe_load_balancers().send().await.unwrap();
    out.load_balancers()
        .iter()
        .find(|l| l.load_balancer_name() == Some(name))
        .cloned()
}

/// The load balancer `name` as moto describes it.
pub async fn described(
    a: &Albc,
    name: &str,
) -> aws_sdk_elasticloadbalancingv2::types::LoadBalancer {
    find_described(a, name)
        .await
        .unwrap_or_else(|| panic!("no load balancer {name}"))
}

/// (port, protocol, forward target group) of the NLB's listeners.
pub async fn listeners(a: &Albc, lb_name: &str) -> Vec<(i32, String, String)> {
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
pub async fn tg_attribute(a: &Albc, tg: &str, key: &str) -> Option<String> {
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
pub fn writes(counts: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    counts
        .iter()
        .filter(|(k, _)| !k.starts_with("Describe"))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

pub async fn delete_and_wait(a: &Albc, name: &str, ctl: &CcmProcess) {
    let api = Api::<Service>::namespaced(a.admin.clone(), NS);
    api.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(&format!("{name} gone"), WAIT, || async {
        Ok(api.get_opt(name).await?.is_none().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
}

pub async fn assert_nothing_left(a: &Albc, ctl: &CcmProcess) {
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
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
}
