//! The Helm chart (`charts/aws-load-balancer-controller`), checked with the real helm CLI: it
//! lints, refuses to render without a cluster name, and the Deployment's arguments are accepted
//! by the binary's own flag parser (every flag the chart writes exists). The webhooks: their
//! configurations (upstream's names, paths, selectors, policies) call the Service in front of the
//! pods' webhook port, the generated serving certificate is valid for that Service's name under
//! the configurations' caBundle and loads as the binary loads it from the mounted Secret; with
//! `webhook.enabled=false` none of it is rendered and the webhooks are off.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use serde::Deserialize as _;
use stratus_albc::options::Options;
use stratus_albc::webhook::{MUTATE_POD, VALIDATE_TGB};
use stratus_scenarios::kube_fixture::repo_root;

fn chart_dir() -> PathBuf {
    repo_root().join("charts/aws-load-balancer-controller")
}

fn helm(args: &[&str]) -> std::process::Output {
    let paths = stratus_testenv::ensure_installed().expect("helm installed");
    Command::new(&paths.helm)
        .args(args)
        .output()
        .expect("run helm")
}

#[test]
fn chart_lints_renders_and_its_flags_parse() {
    let dir = chart_dir();
    let dir = dir.to_str().unwrap();
    let lint = helm(&["lint", dir, "--set", "clusterName=prod"]);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );
    let missing = helm(&["template", "albc", dir]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("clusterName is required"));
    let out = helm(&[
        "template",
        "albc",
        dir,
        "-n",
        "kube-system",
        "--set",
        "clusterName=prod",
        "--set",
        "region=eu-central-1",
        "--set",
        "defaultTags.team=edge",
        "--set",
        "watchNamespace=shop",
        "--set",
        "featureGates.NLBSecurityGroup=false",
        "--set",
        "backendSecurityGroup=sg-0123",
        "--set",
        "serviceMaxConcurrentReconciles=5",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let kinds = kinds(&text);
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ] {
        assert!(kinds.iter().any(|x| x == k), "{k} in {kinds:?}");
    }
    let opts = deployment_options(&text);
    assert_eq!(opts.cluster_name, "prod");
    assert_eq!(opts.aws_region.as_deref(), Some("eu-central-1"));
    assert_eq!(opts.default_tags["team"], "edge");
    assert_eq!(opts.watch_namespace, "shop");
    assert!(opts.enable_leader_election);
    assert!(!opts.gate("NLBSecurityGroup") && opts.gate("EnableServiceController"));
    assert_eq!(opts.backend_security_group, "sg-0123");
    assert_eq!((opts.ingress_concurrency, opts.service_concurrency), (3, 5));
    assert_eq!(opts.load_balancer_class, "service.k8s.aws/nlb");
}

fn docs(text: &str) -> Vec<serde_yaml::Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde_yaml::Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn kinds(text: &str) -> Vec<String> {
    docs(text)
        .iter()
        .map(|v| v["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The one object of `kind` in the rendering.
fn one<T: serde::de::DeserializeOwned>(text: &str, kind: &str) -> T {
    let mut found: Vec<_> = docs(text)
        .into_iter()
        .filter(|v| v["kind"].as_str() == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "one {kind}");
    serde_yaml::from_value(found.remove(0)).unwrap()
}

fn deployment_options(text: &str) -> Options {
    let d: Deployment = one(text, "Deployment");
    let c = &d.spec.unwrap().template.spec.unwrap().containers[0];
    let mut argv = vec!["aws-load-balancer-controller".to_string()];
    argv.extend(c.args.clone().unwrap());
    Options::parse_args(argv.clone()).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
}

fn render(extra: &[&str]) -> String {
    let dir = chart_dir();
    let mut args = vec![
        "template",
        "albc",
        dir.to_str().unwrap(),
        "-n",
        "kube-system",
        "--set",
        "clusterName=prod",
    ];
    args.extend(extra);
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn webhooks_call_the_service_with_a_certificate_their_ca_bundle_trusts() {
    let text = render(&[]);
    let opts = deployment_options(&text);
    assert_eq!(opts.webhook_bind_port, 9443);
    let d: Deployment = one(&text, "Deployment");
    let pod = d.spec.unwrap().template.spec.unwrap();
    let c = &pod.containers[0];
    let port = c
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("webhook-server"))
        .expect("a webhook-server port");
    assert_eq!(port.container_port, 9443);
    let mount = c
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| std::path::Path::new(&m.mount_path) == opts.webhook_cert_dir)
        .expect("the certificate mounted at --webhook-cert-dir");
    let volume = pod
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .unwrap();
    let secret: Secret = one(&text, "Secret");
    assert_eq!(
        volume.secret.as_ref().unwrap().secret_name,
        secret.metadata.name
    );

    let service: Service = one(&text, "Service");
    let spec = service.spec.unwrap();
    assert_eq!(
        spec.selector.unwrap()["app.kubernetes.io/name"],
        "aws-load-balancer-controller"
    );
    let sp = &spec.ports.unwrap()[0];
    assert_eq!(sp.port, 443);
    assert_eq!(
        sp.target_port,
        Some(
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(
                "webhook-server".into()
            )
        )
    );

    let mutating: MutatingWebhookConfiguration = one(&text, "MutatingWebhookConfiguration");
    assert_eq!(
        mutating.metadata.name.as_deref(),
        Some("aws-load-balancer-webhook")
    );
    let m = &mutating.webhooks.unwrap()[0];
    assert_eq!(m.name, MUTATE_POD.name);
    assert_eq!(m.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(m.side_effects, "None");
    assert_eq!(m.admission_review_versions, ["v1"]);
    let ns = serde_json::to_value(&m.namespace_selector).unwrap();
    assert_eq!(
        ns["matchExpressions"][0],
        serde_json::json!({"key": "elbv2.k8s.aws/pod-readiness-gate-inject",
                           "operator": "In", "values": ["enabled"]})
    );
    let own = serde_json::to_value(&m.object_selector).unwrap();
    assert_eq!(
        own["matchExpressions"][0],
        serde_json::json!({"key": "app.kubernetes.io/name", "operator": "NotIn",
                           "values": ["aws-load-balancer-controller"]})
    );
    let rules = serde_json::to_value(&m.rules).unwrap();
    assert_eq!(rules[0]["operations"], serde_json::json!(["CREATE"]));
    assert_eq!(rules[0]["resources"], serde_json::json!(["pods"]));
    let validating: ValidatingWebhookConfiguration = one(&text, "ValidatingWebhookConfiguration");
    assert_eq!(
        validating.metadata.name.as_deref(),
        Some("aws-load-balancer-webhook")
    );
    let v = &validating.webhooks.unwrap()[0];
    assert_eq!(v.name, VALIDATE_TGB.name);
    assert_eq!(v.failure_policy.as_deref(), Some("Fail"));
    let rules = serde_json::to_value(&v.rules).unwrap();
    assert_eq!(
        rules[0]["operations"],
        serde_json::json!(["CREATE", "UPDATE"])
    );
    assert_eq!(
        rules[0]["resources"],
        serde_json::json!(["targetgroupbindings"])
    );

    let service_name = service.metadata.name.unwrap();
    for (client, path) in [
        (&m.client_config, MUTATE_POD.path),
        (&v.client_config, VALIDATE_TGB.path),
    ] {
        let s = client.service.as_ref().unwrap();
        assert_eq!(
            (s.name.as_str(), s.namespace.as_str(), s.path.as_deref()),
            (service_name.as_str(), "kube-system", Some(path))
        );
    }
    let ca = m.client_config.ca_bundle.clone().unwrap().0;
    assert_eq!(v.client_config.ca_bundle.clone().unwrap().0, ca);

    // The serving certificate chains to the caBundle for the Service's DNS name...
    use rustls::client::danger::ServerCertVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    let data = secret.data.unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(&ca).unwrap())
        .unwrap();
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
    )
    .build()
    .unwrap();
    let leaf = CertificateDer::from_pem_slice(&data["tls.crt"].0).unwrap();
    let name = ServerName::try_from(format!("{service_name}.kube-system.svc")).unwrap();
    verifier
        .verify_server_cert(&leaf, &[], &name, &[], UnixTime::now())
        .unwrap();
    // ... and loads as the controller loads the mounted Secret.
    let dir = std::env::temp_dir().join(format!("albc-chart-certs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for file in ["tls.crt", "tls.key"] {
        std::fs::write(dir.join(file), &data[file].0).unwrap();
    }
    stratus_serving::tls::server_config(&stratus_serving::TlsSource::PairDir {
        dir: dir.clone(),
        flag: "--webhook-cert-dir",
    })
    .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn webhooks_can_be_disabled() {
    let text = render(&["--set", "webhook.enabled=false"]);
    let kinds = kinds(&text);
    for k in [
        "Secret",
        "Service",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        assert!(!kinds.iter().any(|x| x == k), "no {k} in {kinds:?}");
    }
    assert_eq!(deployment_options(&text).webhook_address(), None);
    let d: Deployment = one(&text, "Deployment");
    let pod = d.spec.unwrap().template.spec.unwrap();
    assert!(pod.volumes.is_none() && pod.containers[0].volume_mounts.is_none());
}
