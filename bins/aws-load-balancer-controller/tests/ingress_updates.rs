//! An existing ALB follows its Ingress and IngressClassParams on moto: the class's params win
//! over the Ingress's annotations (group, scheme, subnets by tag, tags, attributes) and their
//! namespace selector refuses other namespaces with a Warning Event; then, on the live ALB, a
//! health-check and attribute change modifies the target group, given security groups replace the managed
//! one (deleted), HTTPS with a redirect turns the HTTP listener into a redirect, a new
//! certificate and SSL policy modify the HTTPS listener, and a params change reaches the
//! attributes; deleting the Ingress leaves nothing.

mod common;

use std::collections::BTreeMap;

use common::{Albc, NS, WAIT};
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use stratus_albc::crd::IngressClassParams;
use stratus_albc::ingress::plan::{load_balancer_name, GroupId};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::{acm_fixture, wait_for};

const POLICY: &str = "ELBSecurityPolicy-TLS13-1-2-2021-06";

async fn create<K>(api: &Api<K>, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let obj: K = serde_json::from_value(value).unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

async fn patch<K>(api: &Api<K>, name: &str, value: serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&value))
        .await
        .unwrap();
}

/// Waits until `check` of the ALB named `name` (its description, listeners by port, target
/// groups, attributes) holds; the controller's log on timeout.
async fn wait_alb(
    a: &Albc,
    ctl: &CcmProcess,
    what: &str,
    name: &str,
    check: impl Fn(&Alb) -> bool,
) -> Alb {
    wait_for(what, WAIT, || async {
        let alb = Alb::read(a, name).await;
        Ok(alb.filter(|x| check(x)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e} (ALB {name})\n{}", ctl.log()))
}

/// A listener: protocol, default certificate, policy, redirect port.
type Listener = (String, Option<String>, Option<String>, Option<String>);

/// What moto holds of one ALB.
#[derive(Debug)]
struct Alb {
    arn: String,
    internet_facing: bool,
    security_groups: Vec<String>,
    tags: BTreeMap<String, String>,
    attributes: BTreeMap<String, String>,
    listeners: BTreeMap<i32, Listener>,
    /// health-check paths of the stack's target groups
    health_paths: Vec<String>,
    /// `deregistration_delay.timeout_seconds` of each of them
    deregistration_delays: Vec<String>,
}

impl Alb {
    async fn read(a: &Albc, name: &str) -> Option<Alb> {
        let out = a
            .elbv2
            .describe_load_balancers()
            .names(name)
            .send()
            .await
            .ok()?;
        let lb = out.load_balancers().first()?.clone();
        let arn = lb.load_balancer_arn()?.to_string();
        let tags = a
            .elbv2
            .describe_tags()
            .resource_arns(&arn)
            .send()
            .await
            .ok()?
            .tag_descriptions()
            .first()
            .map(|d| {
                d.tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let attributes = a
            .elbv2
            .describe_load_balancer_attributes()
            .load_balancer_arn(&arn)
            .send()
            .await
            .ok()?
            .attributes()
            .iter()
            .filter_map(|x| Some((x.key()?.to_string(), x.value()?.to_string())))
            .collect();
        let listeners = a
            .elbv2
            .describe_listeners()
            .load_balancer_arn(&arn)
            .send()
            .await
            .ok()?
            .listeners()
            .iter()
            .filter_map(|l| {
                let redirect = l
                    .default_actions()
                    .iter()
                    .find_map(|x| x.redirect_config())
                    .and_then(|r| r.port().map(str::to_string));
                Some((
                    l.port()?,
                    (
                        l.protocol()?.as_str().to_string(),
                        l.certificates()
                            .first()
                            .and_then(|c| c.certificate_arn().map(str::to_string)),
                        l.ssl_policy().map(str::to_string),
                        redirect,
                    ),
                ))
            })
            .collect();
        let groups = a
            .elbv2
            .describe_target_groups()
            .load_balancer_arn(&arn)
            .send()
            .await
            .ok()?;
        let health_paths = groups
            .target_groups()
            .iter()
            .filter_map(|g| g.health_check_path().map(str::to_string))
            .collect();
        let mut deregistration_delays = Vec::new();
        for g in groups.target_groups() {
            let attrs = a
                .elbv2
                .describe_target_group_attributes()
                .target_group_arn(g.target_group_arn()?)
                .send()
                .await
                .ok()?;
            deregistration_delays.extend(
                attrs
                    .attributes()
                    .iter()
                    .filter(|x| x.key() == Some("deregistration_delay.timeout_seconds"))
                    .filter_map(|x| x.value().map(str::to_string)),
            );
        }
        let mut security_groups = lb.security_groups().to_vec();
        security_groups.sort();
        Some(Alb {
            internet_facing: lb.scheme()
                == Some(
                    &aws_sdk_elasticloadbalancingv2::types::LoadBalancerSchemeEnum::InternetFacing,
                ),
            arn,
            security_groups,
            tags,
            attributes,
            listeners,
            health_paths,
            deregistration_delays,
        })
    }
}

#[tokio::test]
async fn an_alb_follows_its_ingress_and_class_params() {
    let a = common::setup().await;
    a.elb_subnets().await;
    let moto = a.env.moto_endpoint().to_string();
    let cert_a = acm_fixture::request_certificate(&moto, "a.example.com")
        .await
        .unwrap();
    let cert_b = acm_fixture::request_certificate(&moto, "b.example.com")
        .await
        .unwrap();
    a.service("web", false).await;
    let namespaces = Api::<Namespace>::all(a.admin.clone());
    patch(
        &namespaces,
        NS,
        serde_json::json!({"metadata": {"labels": {"team": "edge"}}}),
    )
    .await;
    create(
        &namespaces,
        serde_json::json!({"metadata": {"name": "other"}}),
    )
    .await;
    let params = Api::<IngressClassParams>::all(a.admin.clone());
    create(
        &params,
        serde_json::json!({
            "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "IngressClassParams",
            "metadata": {"name": "edge"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"team": "edge"}},
                "group": {"name": "shared"},
                "scheme": "internet-facing",
                "subnets": {"tags": {"kubernetes.io/role/internal-elb": ["1"]}},
                "tags": [{"key": "team", "value": "platform"}],
                "loadBalancerAttributes": [{"key": "idle_timeout.timeout_seconds", "value": "120"}]}}),
    )
    .await;
    a.alb_class("alb-edge", Some("edge")).await;
    let ctl = a.start(&[&format!("--aws-vpc-id={}", a.vpc)]);
    let ingress = |name: &str| {
        serde_json::json!({
            "metadata": {"name": name, "annotations": {
                // The class's group and scheme win over these.
                "alb.ingress.kubernetes.io/group.name": "mine",
                "alb.ingress.kubernetes.io/scheme": "internal",
                "alb.ingress.kubernetes.io/target-type": "ip",
                "alb.ingress.kubernetes.io/tags": "team=app,env=prod"}},
            "spec": {"ingressClassName": "alb-edge", "rules": [{"http": {"paths": [
                {"path": "/", "pathType": "Prefix",
                 "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}})
    };
    let ings = Api::<Ingress>::namespaced(a.admin.clone(), NS);
    create(&ings, ingress("web")).await;
    let name = load_balancer_name("test", &GroupId::Explicit("shared".into()));
    let alb = wait_alb(&a, &ctl, "ALB of the class's group", &name, |x| {
        x.attributes
            .get("idle_timeout.timeout_seconds")
            .map(String::as_str)
            == Some("120")
    })
    .await;
    assert!(alb.internet_facing, "{alb:?}");
    assert_eq!(alb.tags["team"], "platform");
    assert_eq!(alb.tags["env"], "prod");
    assert_eq!(alb.health_paths, vec!["/"]);
    // The managed frontend group and the cluster's shared backend group.
    let managed = a
        .groups_tagged("ingress.k8s.aws/resource", "ManagedLBSecurityGroup")
        .await;
    assert_eq!(managed.len(), 1);
    assert_eq!(alb.security_groups.len(), 2, "{alb:?}");
    assert!(alb.security_groups.contains(&managed[0]));
    let lb_arn = alb.arn.clone();

    // A namespace the class does not select: a Warning Event, nothing made.
    let other = Api::<Ingress>::namespaced(a.admin.clone(), "other");
    create(&other, ingress("outsider")).await;
    let events = Api::<Event>::namespaced(a.admin.clone(), "other");
    wait_for("warning on outsider", WAIT, || async {
        let list = events.list(&ListParams::default()).await?;
        Ok(list
            .items
            .iter()
            .any(|e| {
                e.type_.as_deref() == Some("Warning")
                    && e.message
                        .as_deref()
                        .unwrap_or_default()
                        .contains("namespaceSelector")
            })
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    let outsider = other.get("outsider").await.unwrap();
    assert!(outsider.metadata.finalizers.unwrap_or_default().is_empty());

    // The health check and the target group's attributes change in place.
    assert_eq!(alb.deregistration_delays, vec!["300"]);
    patch(
        &ings,
        "web",
        serde_json::json!({"metadata": {"annotations": {
            "alb.ingress.kubernetes.io/healthcheck-path": "/healthz",
            "alb.ingress.kubernetes.io/target-group-attributes":
                "deregistration_delay.timeout_seconds=30"}}}),
    )
    .await;
    wait_alb(&a, &ctl, "health-check path and attribute", &name, |x| {
        x.health_paths == vec!["/healthz"] && x.deregistration_delays == vec!["30"]
    })
    .await;

    // Given security groups replace the managed one, which goes.
    let given = a.security_group("given", &[]).await;
    patch(
        &ings,
        "web",
        serde_json::json!({"metadata": {"annotations": {
            "alb.ingress.kubernetes.io/security-groups": given}}}),
    )
    .await;
    wait_alb(&a, &ctl, "given security group", &name, |x| {
        x.security_groups == vec![given.clone()]
    })
    .await;
    wait_for("managed group deleted", WAIT, || async {
        Ok(
            a.groups_tagged("ingress.k8s.aws/resource", "ManagedLBSecurityGroup")
                .await
                .is_empty()
                .then_some(()),
        )
    })
    .await
    .unwrap();

    // HTTPS with a redirect: the HTTP listener now redirects, the HTTPS one serves.
    patch(
        &ings,
        "web",
        serde_json::json!({"metadata": {"annotations": {
            "alb.ingress.kubernetes.io/listen-ports": r#"[{"HTTP": 80}, {"HTTPS": 443}]"#,
            "alb.ingress.kubernetes.io/certificate-arn": cert_a,
            "alb.ingress.kubernetes.io/ssl-redirect": "443"}}}),
    )
    .await;
    let alb = wait_alb(&a, &ctl, "redirect and HTTPS", &name, |x| {
        x.listeners.get(&80).and_then(|l| l.3.as_deref()) == Some("443")
            && x.listeners.get(&443).map(|l| l.0.as_str()) == Some("HTTPS")
    })
    .await;
    assert_eq!(alb.listeners[&443].1.as_ref(), Some(&cert_a));
    assert_eq!(alb.arn, lb_arn, "the same load balancer");

    // Another certificate and a pinned policy: the HTTPS listener is modified.
    patch(
        &ings,
        "web",
        serde_json::json!({"metadata": {"annotations": {
            "alb.ingress.kubernetes.io/certificate-arn": cert_b,
            "alb.ingress.kubernetes.io/ssl-policy": POLICY}}}),
    )
    .await;
    wait_alb(&a, &ctl, "certificate B and the policy", &name, |x| {
        x.listeners
            .get(&443)
            .map(|l| (l.1.as_deref(), l.2.as_deref()))
            == Some((Some(cert_b.as_str()), Some(POLICY)))
    })
    .await;

    // A change of the class's params reaches the ALB (the params watch reconciles it).
    patch(
        &params,
        "edge",
        serde_json::json!({"spec": {"loadBalancerAttributes": [
            {"key": "idle_timeout.timeout_seconds", "value": "75"}]}}),
    )
    .await;
    let alb = wait_alb(&a, &ctl, "attribute from the params", &name, |x| {
        x.attributes
            .get("idle_timeout.timeout_seconds")
            .map(String::as_str)
            == Some("75")
    })
    .await;
    assert_eq!(alb.arn, lb_arn, "the same load balancer throughout");

    // Deleting the Ingresses leaves nothing of the group.
    ings.delete("web", &DeleteParams::default()).await.unwrap();
    other
        .delete("outsider", &DeleteParams::default())
        .await
        .unwrap();
    // The finalizer goes once the group's resources are deleted.
    wait_for("web gone", WAIT, || async {
        Ok(ings.get_opt("web").await?.is_none().then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    assert!(Alb::read(&a, &name).await.is_none());
    let left = a.elbv2.describe_target_groups().send().await.unwrap();
    assert!(left.target_groups().is_empty(), "{left:?}");
}
