//! Client-certificate and front-proxy authentication on the CCM's secure port, against a real
//! kube-apiserver (authorization by SubjectAccessReview): the 200 / 401 / 403 matrix with the
//! authorities given by flags, the same read from the cluster's
//! `kube-system/extension-apiserver-authentication` ConfigMap, the start refused when that
//! ConfigMap cannot be read (unless tolerated), and `--profiling`.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::serving::{first_answer, grant_paths, start_serving};
use common::{setup, Setup, WAIT};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use stratus_scenarios::https::{self, Answer, Credentials, Trust};
use stratus_scenarios::wait_for;
use stratus_serving::client_auth::test_pki::{client_pair, Ca, ClientPair};
use stratus_testenv::Identity;

/// The test's certificate authorities and clients, with the CA files written to `dir`.
struct Pki {
    client_ca_file: PathBuf,
    proxy_ca_file: PathBuf,
    client_ca: Ca,
    proxy_ca: Ca,
    alice: ClientPair,
    bob: ClientPair,
    stranger: ClientPair,
    proxy: ClientPair,
    rogue_proxy: ClientPair,
}

fn pki(s: &Setup) -> Pki {
    let dir = s.env.cluster().dir().join("client-auth");
    std::fs::create_dir_all(&dir).unwrap();
    let client_ca = Ca::new("stratus-test-client-ca");
    let proxy_ca = Ca::new("stratus-test-front-proxy-ca");
    let client_ca_file = dir.join("client-ca.crt");
    let proxy_ca_file = dir.join("front-proxy-ca.crt");
    std::fs::write(&client_ca_file, client_ca.pem()).unwrap();
    std::fs::write(&proxy_ca_file, proxy_ca.pem()).unwrap();
    Pki {
        alice: client_pair(&client_ca, "alice", &["devs"]),
        bob: client_pair(&client_ca, "bob", &[]),
        stranger: client_pair(&Ca::new("someone-elses-ca"), "alice", &[]),
        proxy: client_pair(&proxy_ca, "front-proxy-client", &[]),
        rogue_proxy: client_pair(&proxy_ca, "not-the-proxy", &[]),
        client_ca_file,
        proxy_ca_file,
        client_ca,
        proxy_ca,
    }
}

async fn get(
    addr: std::net::SocketAddr,
    path: &str,
    cert: Option<&ClientPair>,
    token: Option<&str>,
    headers: &[(&str, &str)],
) -> Answer {
    let credentials = Credentials {
        token,
        client_cert: cert.map(|c| (c.cert_pem.as_str(), c.key_pem.as_str())),
        headers,
    };
    https::get_with(addr, path, &credentials, &Trust::Any)
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e:#}"))
}

/// One request of the matrix: what, the client certificate, the token, more headers, and the
/// status it must get.
type Case<'a> = (
    &'a str,
    Option<&'a ClientPair>,
    Option<&'a str>,
    &'a [(&'a str, &'a str)],
    u16,
);

/// The matrix every configuration must answer: who may read /metrics (alice only).
async fn assert_matrix(s: &Setup, pki: &Pki, addr: std::net::SocketAddr, log: impl Fn() -> String) {
    let as_alice = [("X-Remote-User", "alice"), ("X-Remote-Group", "devs")];
    let as_bob = [("X-Remote-User", "bob")];
    let prometheus = s.env.token(Identity::Prometheus);
    let cases: Vec<Case> = vec![
        (
            "alice's client certificate",
            Some(&pki.alice),
            None,
            &[],
            200,
        ),
        ("bob's client certificate", Some(&pki.bob), None, &[], 403),
        (
            "bob's certificate naming alice in headers",
            Some(&pki.bob),
            None,
            &as_alice,
            403,
        ),
        (
            "a certificate of another CA",
            Some(&pki.stranger),
            None,
            &[],
            401,
        ),
        ("nothing at all", None, None, &[], 401),
        (
            "the front proxy for alice",
            Some(&pki.proxy),
            None,
            &as_alice,
            200,
        ),
        (
            "the front proxy for bob",
            Some(&pki.proxy),
            None,
            &as_bob,
            403,
        ),
        (
            "the front proxy naming nobody",
            Some(&pki.proxy),
            None,
            &[],
            401,
        ),
        (
            "a proxy name not allowed, for alice",
            Some(&pki.rogue_proxy),
            None,
            &as_alice,
            401,
        ),
        (
            "headers without a proxy certificate",
            None,
            None,
            &as_alice,
            401,
        ),
        (
            "a token still authenticates",
            None,
            Some(prometheus),
            &[],
            403,
        ),
        (
            "a stranger's certificate with a token",
            Some(&pki.stranger),
            Some(prometheus),
            &[],
            403,
        ),
    ];
    for (what, cert, token, headers, want) in cases {
        let answer = get(addr, "/metrics", cert, token, headers).await;
        assert_eq!(answer.status, want, "{what}: {answer:?}\n{}", log());
        if want == 403 {
            assert!(answer.body.contains("Forbidden"), "{what}: {}", answer.body);
        }
    }
    // Open paths need nothing.
    assert_eq!(
        get(addr, "/healthz", Some(&pki.stranger), None, &[])
            .await
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_and_front_proxies_given_by_flags() {
    let s = setup("client-auth-flags", true).await;
    let pki = pki(&s);
    grant_paths(
        &s.admin,
        "stratus-test-alice",
        "alice",
        &["/metrics", "/debug/pprof/*"],
    )
    .await;
    let (ccm, addr) = start_serving(
        &s,
        &[
            &format!("--client-ca-file={}", pki.client_ca_file.display()),
            &format!(
                "--requestheader-client-ca-file={}",
                pki.proxy_ca_file.display()
            ),
            "--requestheader-allowed-names=front-proxy-client",
        ],
    );
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert_matrix(&s, &pki, addr, || ccm.log()).await;

    // --profiling (upstream's default: on), behind the same authentication and authorization.
    let index = get(addr, "/debug/pprof/", Some(&pki.alice), None, &[]).await;
    assert_eq!(
        (index.status, index.body.contains("profile")),
        (200, true),
        "{index:?}"
    );
    let profile = get(
        addr,
        "/debug/pprof/profile?seconds=1",
        Some(&pki.alice),
        None,
        &[],
    )
    .await;
    assert_eq!(profile.status, 200, "{profile:?}");
    assert_eq!(profile.content_type, "application/octet-stream");
    let denied = get(addr, "/debug/pprof/", Some(&pki.bob), None, &[]).await;
    assert_eq!(denied.status, 403);
    let heap = get(addr, "/debug/pprof/heap", Some(&pki.alice), None, &[]).await;
    assert_eq!(heap.status, 404, "{heap:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profiling_off_serves_no_profiles() {
    let s = setup("client-auth-profiling", true).await;
    let pki = pki(&s);
    grant_paths(&s.admin, "stratus-test-alice", "alice", &["/debug/pprof/*"]).await;
    let (ccm, addr) = start_serving(
        &s,
        &[
            &format!("--client-ca-file={}", pki.client_ca_file.display()),
            "--profiling=false",
        ],
    );
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    let index = get(addr, "/debug/pprof/", Some(&pki.alice), None, &[]).await;
    assert_eq!(index.status, 404, "{index:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusters_authentication_configmap_is_read_and_followed() {
    let s = setup("client-auth-lookup", true).await;
    let pki = pki(&s);
    grant_paths(&s.admin, "stratus-test-alice", "alice", &["/metrics"]).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.admin.clone(), "kube-system");
    let data = |client_ca: &Ca| -> BTreeMap<String, String> {
        [
            ("client-ca-file", client_ca.pem()),
            ("requestheader-client-ca-file", pki.proxy_ca.pem()),
            (
                "requestheader-allowed-names",
                r#"["front-proxy-client"]"#.into(),
            ),
            (
                "requestheader-username-headers",
                r#"["X-Remote-User"]"#.into(),
            ),
            (
                "requestheader-group-headers",
                r#"["X-Remote-Group"]"#.into(),
            ),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#.into(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    };
    let apply = |data: BTreeMap<String, String>| {
        let configmaps = configmaps.clone();
        async move {
            let cm = serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": data,
            });
            configmaps
                .patch(
                    "extension-apiserver-authentication",
                    &PatchParams::apply("stratus-test").force(),
                    &Patch::Apply(cm),
                )
                .await
                .expect("write the authentication ConfigMap");
        }
    };
    apply(data(&pki.client_ca)).await;
    // No authority flags: both come from the ConfigMap (the CCM reads it as deploy/rbac.yaml
    // allows).
    let (ccm, addr) = start_serving(&s, &[]);
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert_matrix(&s, &pki, addr, || ccm.log()).await;

    // A rotated client CA is followed without a restart.
    let rotated = Ca::new("stratus-test-rotated-ca");
    apply(data(&rotated)).await;
    let carol = client_pair(&rotated, "alice", &[]);
    wait_for("the rotated client CA to be trusted", WAIT, || async {
        Ok((get(addr, "/metrics", Some(&carol), None, &[]).await.status == 200).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(
        get(addr, "/metrics", Some(&pki.alice), None, &[])
            .await
            .status,
        401
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_authentication_configmap_stops_the_start_unless_tolerated() {
    let s = setup("client-auth-forbidden", true).await;
    Api::<RoleBinding>::namespaced(s.admin.clone(), "kube-system")
        .delete(
            "system:stratus-cloud-controller-manager:apiserver-authentication-reader",
            &DeleteParams::default(),
        )
        .await
        .expect("remove the reader binding");
    let (mut ccm, _) = start_serving(&s, &[]);
    let deadline = tokio::time::Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = ccm.try_exit() {
            break status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running:\n{}",
            ccm.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(status.code(), Some(1), "{}", ccm.log());
    let log = ccm.log();
    assert!(
        log.contains("kube-system/extension-apiserver-authentication")
            && log.contains("--authentication-tolerate-lookup-failure"),
        "{log}"
    );
    for extra in [
        "--authentication-tolerate-lookup-failure",
        "--authentication-skip-lookup",
    ] {
        let (ccm, addr) = start_serving(&s, &[extra]);
        let healthz = first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
        assert_eq!(healthz.status, 200, "{extra}");
    }
}
