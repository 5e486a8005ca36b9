//! The admission webhooks end to end: the binary serves them on 127.0.0.1 with a self-signed
//! certificate from `--webhook-cert-dir`, and the real kube-apiserver calls them through
//! webhook configurations shaped like the chart's (URL instead of Service, same names, paths,
//! selectors and failure policy). A pod of a namespace labelled for injection gets the gate of
//! the `ip` binding whose Service selects it (and no other); pods of an unlabelled namespace or
//! with other labels get none; a binding without ARN and an update changing the ARN are refused
//! by the API server with the webhook's message; valid bindings and updates go through; a
//! binding naming only its target group gets the ARN, target type and VPC from AWS (moto), and
//! one naming no existing group is refused; an Ingress naming a missing class, a class whose
//! params are missing, or params whose namespaceSelector leaves its namespace out is refused,
//! and admitted once the namespace is labelled.

mod common;

use std::net::TcpListener;

use common::{setup, WAIT};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use k8s_openapi::ByteString;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_albc::crd::TargetGroupBinding;
use stratus_albc::webhook::{MUTATE_POD, MUTATE_TGB, VALIDATE_INGRESS, VALIDATE_TGB};
use stratus_scenarios::wait_for;

const GATED: &str = "gated";
const PLAIN: &str = "plain";
const INJECT_LABEL: &str = stratus_albc::tgb::readiness::INJECT_LABEL;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn pod(name: &str, app: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "app"}]}}))
    .unwrap()
}

fn gates(pod: &Pod) -> Vec<String> {
    pod.spec
        .as_ref()
        .and_then(|s| s.readiness_gates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.condition_type)
        .collect()
}

fn binding(name: &str, service: &str, arn: &str, target_type: &str) -> TargetGroupBinding {
    serde_json::from_value(json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": name},
        "spec": {"serviceRef": {"name": service, "port": 80}, "targetGroupARN": arn,
                 "targetType": target_type}}))
    .unwrap()
}

/// The chart's webhook configurations (three webhooks), calling `https://127.0.0.1:<port>` instead of the
/// Service.
async fn register(admin: &kube::Client, port: u16, ca: &str) {
    let url = |path: &str| format!("https://127.0.0.1:{port}{path}");
    let mut mutating: MutatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "aws-load-balancer-webhook"},
        "webhooks": [{
            "name": MUTATE_POD.name,
            "clientConfig": {"url": url(MUTATE_POD.path)},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [
                {"key": INJECT_LABEL, "operator": "In", "values": ["enabled"]}]},
            "objectSelector": {"matchExpressions": [
                {"key": "app.kubernetes.io/name", "operator": "NotIn",
                 "values": ["aws-load-balancer-controller"]}]},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}, {
            "name": MUTATE_TGB.name,
            "clientConfig": {"url": url(MUTATE_TGB.path)},
            "rules": [{"apiGroups": ["elbv2.k8s.aws"], "apiVersions": ["v1beta1"],
                       "operations": ["CREATE"], "resources": ["targetgroupbindings"]}],
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}]}))
    .unwrap();
    for w in mutating.webhooks.as_mut().unwrap() {
        w.client_config.ca_bundle = Some(ByteString(ca.as_bytes().to_vec()));
    }
    let mut validating: ValidatingWebhookConfiguration = serde_json::from_value(json!({
        "metadata": {"name": "aws-load-balancer-webhook"},
        "webhooks": [{
            "name": VALIDATE_TGB.name,
            "clientConfig": {"url": url(VALIDATE_TGB.path)},
            "rules": [{"apiGroups": ["elbv2.k8s.aws"], "apiVersions": ["v1beta1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["targetgroupbindings"]}],
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}, {
            "name": VALIDATE_INGRESS.name,
            "clientConfig": {"url": url(VALIDATE_INGRESS.path)},
            "rules": [{"apiGroups": ["networking.k8s.io"], "apiVersions": ["v1"],
                       "operations": ["CREATE", "UPDATE"], "resources": ["ingresses"]}],
            "matchPolicy": "Equivalent",
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"]}]}))
    .unwrap();
    for w in validating.webhooks.as_mut().unwrap() {
        w.client_config.ca_bundle = Some(ByteString(ca.as_bytes().to_vec()));
    }
    let pp = PostParams::default();
    Api::<MutatingWebhookConfiguration>::all(admin.clone())
        .create(&pp, &mutating)
        .await
        .unwrap();
    Api::<ValidatingWebhookConfiguration>::all(admin.clone())
        .create(&pp, &validating)
        .await
        .unwrap();
}

/// IngressClasses: `alb-strict` (params `strict`, selecting namespaces labelled `team=edge`),
/// `alb-ghost` (params that do not exist), `other` (another controller's).
async fn ingress_classes(admin: &kube::Client) {
    let params = ApiResource::erase::<stratus_albc::crd::IngressClassParams>(&());
    let strict: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "IngressClassParams",
        "metadata": {"name": "strict"},
        "spec": {"namespaceSelector": {"matchLabels": {"team": "edge"}}}}))
    .unwrap();
    Api::<DynamicObject>::all_with(admin.clone(), &params)
        .create(&PostParams::default(), &strict)
        .await
        .unwrap();
    let classes = Api::<IngressClass>::all(admin.clone());
    for (name, controller, params) in [
        ("alb-strict", "ingress.k8s.aws/alb", Some("strict")),
        ("alb-ghost", "ingress.k8s.aws/alb", Some("ghost")),
        ("other", "example.com/other", None),
    ] {
        let mut spec = json!({"controller": controller});
        if let Some(p) = params {
            spec["parameters"] =
                json!({"apiGroup": "elbv2.k8s.aws", "kind": "IngressClassParams", "name": p});
        }
        let class: IngressClass =
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap();
        classes
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }
}

fn ingress(class: &str) -> Ingress {
    serde_json::from_value(json!({
        "metadata": {"name": format!("web-{class}")},
        "spec": {"ingressClassName": class,
                 "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}}))
    .unwrap()
}

async fn namespace(admin: &kube::Client, name: &str, inject: bool) {
    let mut ns = json!({"metadata": {"name": name}});
    if inject {
        ns["metadata"]["labels"] = json!({INJECT_LABEL: "enabled"});
    }
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &serde_json::from_value(ns).unwrap())
        .await
        .unwrap();
}

async fn service(admin: &kube::Client, ns: &str, name: &str, app: &str) {
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": app},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
    .unwrap();
    Api::<Service>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &svc)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_are_injected_and_bindings_validated_through_the_apiserver() {
    let t = setup().await;
    let certs = std::env::temp_dir().join(format!("albc-webhook-certs-{}", std::process::id()));
    std::fs::create_dir_all(&certs).unwrap();
    let cert = stratus_serving::self_signed::generate(&["127.0.0.1".to_string()]).unwrap();
    std::fs::write(certs.join("tls.crt"), &cert.cert_pem).unwrap();
    std::fs::write(certs.join("tls.key"), &cert.key_pem).unwrap();
    let port = free_port();
    let ctl = t.start(&[
        &format!("--webhook-bind-port={port}"),
        &format!("--webhook-cert-dir={}", certs.display()),
    ]);
    register(&t.admin, port, &cert.cert_pem).await;
    wait_for("the webhook port open", WAIT, || async {
        Ok(std::net::TcpStream::connect(("127.0.0.1", port))
            .is_ok()
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));

    namespace(&t.admin, GATED, true).await;
    namespace(&t.admin, PLAIN, false).await;
    let arn = t.target_group("web-tg", "ip", 8080).await;
    let inst_arn = t.target_group("web-inst", "instance", 8080).await;
    let plain_arn = t.target_group("plain-tg", "ip", 8080).await;
    for ns in [GATED, PLAIN] {
        service(&t.admin, ns, "web", "web").await;
    }
    let pp = PostParams::default();
    let plain_tgbs = Api::<TargetGroupBinding>::namespaced(t.admin.clone(), PLAIN);
    plain_tgbs
        .create(&pp, &binding("web", "web", &plain_arn, "ip"))
        .await
        .unwrap();
    // Valid bindings are accepted by the validating webhook.
    let tgbs = Api::<TargetGroupBinding>::namespaced(t.admin.clone(), GATED);
    tgbs.create(&pp, &binding("web-inst", "web", &inst_arn, "instance"))
        .await
        .unwrap();
    tgbs.create(&pp, &binding("web", "web", &arn, "ip"))
        .await
        .unwrap();

    // The webhook's cache has the binding once a dry-run pod gets its gate.
    let gated_pods = Api::<Pod>::namespaced(t.admin.clone(), GATED);
    let gate = "target-health.elbv2.k8s.aws/web".to_string();
    wait_for("a dry-run pod gets the gate", WAIT, || async {
        let p = gated_pods
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &pod("probe", "web"),
            )
            .await?;
        Ok((gates(&p) == [gate.clone()]).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));

    // Only the ip binding whose Service selects the pod, in a labelled namespace.
    let web = gated_pods.create(&pp, &pod("web-0", "web")).await.unwrap();
    assert_eq!(gates(&web), [gate], "{}", ctl.log());
    let db = gated_pods.create(&pp, &pod("db-0", "db")).await.unwrap();
    assert!(gates(&db).is_empty(), "{:?}", gates(&db));
    let plain = Api::<Pod>::namespaced(t.admin.clone(), PLAIN)
        .create(&pp, &pod("web-0", "web"))
        .await
        .unwrap();
    assert!(gates(&plain).is_empty(), "{:?}", gates(&plain));

    // A binding without ARN (the CRD only refuses an empty one), an update changing the ARN:
    // refused with the field named.
    let resource = ApiResource::erase::<TargetGroupBinding>(&());
    let no_arn: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": "no-arn"},
        "spec": {"serviceRef": {"name": "web", "port": 80}, "targetType": "ip"}}))
    .unwrap();
    let e = Api::<DynamicObject>::namespaced_with(t.admin.clone(), GATED, &resource)
        .create(&pp, &no_arn)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(VALIDATE_TGB.name)
            && e.contains(
                "TargetGroupBinding must specify one of these fields: spec.targetGroupARN"
            ),
        "{e}"
    );
    let e = tgbs
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"targetGroupARN": plain_arn}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(VALIDATE_TGB.name)
            && e.contains(
                "TargetGroupBinding update may not change these fields: spec.targetGroupARN"
            ),
        "{e}"
    );
    // Defaults: a binding naming its target group gets the ARN, target type, IP address type
    // and VPC from it (and, now an ip binding, its pods get the gate); an unknown name is
    // refused.
    let named: TargetGroupBinding = serde_json::from_value(json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": "named"},
        "spec": {"serviceRef": {"name": "web", "port": 80}, "targetGroupName": "plain-tg"}}))
    .unwrap();
    let made = plain_tgbs.create(&pp, &named).await.unwrap();
    assert_eq!(made.spec.target_group_arn, plain_arn);
    assert_eq!(made.spec.target_type.as_deref(), Some("ip"));
    assert_eq!(made.spec.vpc_id.as_deref(), Some(t.vpc.as_str()));
    let mut unknown = named.clone();
    unknown.metadata.name = Some("unknown".into());
    unknown.spec.target_group_name = Some("no-such-tg".into());
    let e = plain_tgbs
        .create(&pp, &unknown)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(MUTATE_TGB.name) && e.contains("no target group is named \"no-such-tg\""),
        "{e}"
    );
    plain_tgbs
        .delete("named", &Default::default())
        .await
        .unwrap();

    // A valid update goes through.
    tgbs.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"team": "edge"}}})),
    )
    .await
    .unwrap();
    assert_eq!(tgbs.get("web").await.unwrap().spec.target_group_arn, arn);

    // Ingresses: a class that does not exist, params that do not exist or do not select the
    // namespace are refused; another controller's class passes; labelling the namespace lets
    // the Ingress in.
    ingress_classes(&t.admin).await;
    let ingresses = Api::<Ingress>::namespaced(t.admin.clone(), PLAIN);
    for (class, want) in [
        ("nope", "ingressclasses.networking.k8s.io \"nope\" not found"),
        ("alb-ghost", "IngressClassParams ghost not found"),
        (
            "alb-strict",
            "namespace plain is not selected by the spec.namespaceSelector of IngressClassParams strict",
        ),
    ] {
        let e = ingresses
            .create(&pp, &ingress(class))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(VALIDATE_INGRESS.name) && e.contains(want),
            "{class}: {e}"
        );
    }
    ingresses.create(&pp, &ingress("other")).await.unwrap();
    Api::<Namespace>::all(t.admin.clone())
        .patch(
            PLAIN,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": "edge"}}})),
        )
        .await
        .unwrap();
    let mut strict = ingress("alb-strict");
    strict.metadata.name = Some("strict".into());
    ingresses.create(&pp, &strict).await.unwrap();

    // The controller's own finalizer writes pass the webhook: deletion completes.
    for (api, name) in [(&tgbs, "web"), (&tgbs, "web-inst"), (&plain_tgbs, "web")] {
        api.delete(name, &Default::default()).await.unwrap();
        wait_for(&format!("binding {name} gone"), WAIT, || async {
            Ok(api.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()));
    }
    std::fs::remove_dir_all(&certs).unwrap();
}
