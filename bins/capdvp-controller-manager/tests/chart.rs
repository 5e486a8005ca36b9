//! The Helm chart's runtime extension (`charts/capdvp-controller-manager`), checked with the real
//! helm CLI: the container port `webhook-server` 9443, the cert dir mounted from the TLS Secret
//! (generated, with a certificate for the Service's DNS name, or one named by the user), the
//! Service to that port, the optional ExtensionConfig with the Secret's CA, and `webhook.enabled`
//! off turning all of it off; the rendered flags parse and resolve to that server.

use std::path::PathBuf;
use std::process::Command;

use base64::Engine;
use clap::Parser;
use k8s_openapi::api::apps::v1::Deployment;
use serde_json::Value;
use stratus_capdvp::app::Options;
use stratus_scenarios::kube_fixture::repo_root;
use stratus_serving::TlsSource;

const NS: &str = "d8-cloud-provider-dvp";

fn helm(args: &[&str]) -> std::process::Output {
    let paths = stratus_testenv::ensure_installed().expect("helm installed");
    Command::new(&paths.helm)
        .args(args)
        .output()
        .expect("run helm")
}

fn chart_dir() -> PathBuf {
    repo_root().join("charts/capdvp-controller-manager")
}

/// The rendered objects.
fn render(extra: &[&str]) -> Vec<Value> {
    let dir = chart_dir();
    let mut args = vec![
        "template",
        "capdvp",
        dir.to_str().unwrap(),
        "-n",
        NS,
        "--set",
        "dvp.parentKubeconfigSecret.name=dvp-credentials-capdvp",
        "--set",
        "dvp.namespace=tenant",
    ];
    args.extend(extra);
    let out = helm(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.split("\n---")
        .filter_map(|doc| serde_yaml::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

fn options(deployment: &Deployment) -> Options {
    let container = &deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    let argv = std::iter::once("capdvp-controller-manager".to_string())
        .chain(container.args.clone().unwrap());
    Options::try_parse_from(argv).expect("the rendered flags parse")
}

#[test]
fn chart_serves_the_runtime_extension() {
    let dir = chart_dir();
    let lint = helm(&[
        "lint",
        "--strict",
        dir.to_str().unwrap(),
        "--set",
        "dvp.parentKubeconfigSecret.name=p",
        "--set",
        "dvp.namespace=t",
        "--set",
        "webhook.extensionConfig.create=true",
    ]);
    assert!(
        lint.status.success(),
        "{}",
        String::from_utf8_lossy(&lint.stdout)
    );

    // Defaults: generated certificate, Service, no ExtensionConfig.
    let objects = render(&[]);
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment").unwrap().clone()).unwrap();
    let pod = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .clone()
        .unwrap();
    let container = &pod.containers[0];
    let port = container
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .find(|p| p.name.as_deref() == Some("webhook-server"))
        .expect("port webhook-server");
    assert_eq!(port.container_port, 9443);
    let mount = container
        .volume_mounts
        .as_ref()
        .unwrap()
        .iter()
        .find(|m| m.mount_path == "/tmp/k8s-webhook-server/serving-certs")
        .expect("the cert dir mounted");
    assert_eq!(mount.read_only, Some(true));
    let volume = pod
        .volumes
        .as_ref()
        .unwrap()
        .iter()
        .find(|v| v.name == mount.name)
        .unwrap();
    let secret_name = volume.secret.as_ref().unwrap().secret_name.clone().unwrap();
    assert_eq!(secret_name, "capdvp-webhook-tls");
    let opts = options(&deployment);
    assert_eq!(
        opts.manager.extension_address(),
        Some(std::net::SocketAddr::from((
            std::net::Ipv4Addr::UNSPECIFIED,
            9443
        )))
    );
    assert_eq!(
        opts.manager.extension_tls(),
        TlsSource::PairDir {
            dir: "/tmp/k8s-webhook-server/serving-certs".into(),
            flag: "--webhook-cert-dir"
        }
    );

    // The generated Secret holds a pair that loads, valid for the Service's name.
    let secret = find(&objects, "Secret").expect("the generated TLS Secret");
    assert_eq!(secret["metadata"]["name"], secret_name);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    let decode = |key: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(secret["data"][key].as_str().unwrap())
            .unwrap()
    };
    let certs = tempfile::tempdir().unwrap();
    std::fs::write(certs.path().join("tls.crt"), decode("tls.crt")).unwrap();
    std::fs::write(certs.path().join("tls.key"), decode("tls.key")).unwrap();
    stratus_serving::tls::check(&TlsSource::PairDir {
        dir: certs.path().into(),
        flag: "--webhook-cert-dir",
    })
    .expect("the generated pair loads");
    let service = find(&objects, "Service").unwrap();
    assert_eq!(service["metadata"]["name"], "capdvp-webhook-service");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "webhook-server");
    let labels = deployment
        .spec
        .as_ref()
        .unwrap()
        .template
        .metadata
        .clone()
        .unwrap()
        .labels
        .unwrap();
    for (k, v) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(
            labels.get(k).map(String::as_str),
            v.as_str(),
            "selector {k}"
        );
    }
    assert!(find(&objects, "ExtensionConfig").is_none());

    // The ExtensionConfig points at the Service with the generated CA.
    let objects = render(&["--set", "webhook.extensionConfig.create=true"]);
    let ec = find(&objects, "ExtensionConfig").expect("ExtensionConfig");
    let secret = find(&objects, "Secret").unwrap();
    assert_eq!(ec["apiVersion"], "runtime.cluster.x-k8s.io/v1beta2");
    assert_eq!(
        ec["spec"]["clientConfig"]["service"]["name"],
        "capdvp-webhook-service"
    );
    assert_eq!(ec["spec"]["clientConfig"]["service"]["namespace"], NS);
    assert_eq!(
        ec["spec"]["clientConfig"]["caBundle"],
        secret["data"]["ca.crt"]
    );

    // A Secret of the user's: nothing generated, their CA in the ExtensionConfig.
    let objects = render(&[
        "--set",
        "webhook.tlsSecret=cert-manager-tls",
        "--set",
        "webhook.caBundle=CA",
        "--set",
        "webhook.extensionConfig.create=true",
    ]);
    assert!(find(&objects, "Secret").is_none());
    let ec = find(&objects, "ExtensionConfig").unwrap();
    assert_eq!(
        ec["spec"]["clientConfig"]["caBundle"],
        base64::engine::general_purpose::STANDARD.encode("CA")
    );
    let d = find(&objects, "Deployment").unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"],
        "cert-manager-tls"
    );

    // Off: no server, no port, no volume, no Service.
    let objects = render(&["--set", "webhook.enabled=false"]);
    let deployment: Deployment =
        serde_json::from_value(find(&objects, "Deployment").unwrap().clone()).unwrap();
    assert_eq!(options(&deployment).manager.extension_address(), None);
    let pod = deployment.spec.unwrap().template.spec.unwrap();
    assert!(pod.volumes.is_none());
    assert!(!pod.containers[0]
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .any(|p| p.name.as_deref() == Some("webhook-server")));
    assert!(find(&objects, "Service").is_none());
    assert!(find(&objects, "Secret").is_none());
}
