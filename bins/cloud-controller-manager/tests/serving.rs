//! Secure serving of the real CCM binary against a real kube-apiserver: open health paths,
//! `/metrics` behind delegated authentication (TokenReview) and authorization
//! (SubjectAccessReview), `/readyz` following the caches, the certificate served, and the stop
//! on SIGTERM.
// Unsafe code in this file: SIGTERM to the CCM through libc::kill.
#![allow(unsafe_code)]

mod common;

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use common::serving::{first_answer, free_port, get, grant_metrics, start_serving};
use common::{setup, Setup, WAIT};
use kube::api::{Api, PostParams};
use stratus_scenarios::https::{self, Trust};
use stratus_scenarios::wait_for;
use stratus_testenv::Hold;
use stratus_testenv::Identity;

/// TokenReviews and SubjectAccessReviews the CCM has made so far.
fn reviews(s: &Setup) -> (u64, u64) {
    let ccm = Identity::CloudControllerManager.username();
    (
        s.env.kube_writes_to(ccm, "tokenreviews").unwrap(),
        s.env.kube_writes_to(ccm, "subjectaccessreviews").unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_an_accepted_token_of_an_allowed_user() {
    let s = setup("serving", true).await;
    grant_metrics(&s.admin, Identity::Prometheus.username()).await;
    // Long cache lifetimes, so that the review counts below do not depend on the test's speed.
    let (ccm, addr) = start_serving(
        &s,
        &[
            "--authentication-token-webhook-cache-ttl=10m",
            "--authorization-webhook-cache-authorized-ttl=10m",
            "--authorization-webhook-cache-unauthorized-ttl=10m",
        ],
    );
    let healthz = first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert_eq!((healthz.status, healthz.body.as_str()), (200, "ok"));
    let livez = get(addr, "/livez", None).await;
    assert_eq!((livez.status, livez.body.as_str()), (200, "ok"));
    wait_for("/readyz 200", WAIT, || async {
        Ok((get(addr, "/readyz", None).await.status == 200).then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));

    // The self-signed certificate is valid for the loopback address it is reached on.
    let trusted = https::get(addr, "/healthz", None, &Trust::Only(healthz.server_cert))
        .await
        .expect("the self-signed certificate names 127.0.0.1");
    assert_eq!(trusted.status, 200);

    // No token, or one the apiserver does not know: 401 with a Kubernetes Status.
    let anonymous = get(addr, "/metrics", None).await;
    assert_eq!(anonymous.status, 401, "{anonymous:?}");
    let status: serde_json::Value = serde_json::from_str(&anonymous.body).unwrap();
    assert_eq!(
        (status["kind"].as_str(), status["reason"].as_str()),
        (Some("Status"), Some("Unauthorized"))
    );
    let forged = get(addr, "/metrics", Some("not-a-token-of-this-cluster")).await;
    assert_eq!(forged.status, 401, "{forged:?}");

    // A known user without RBAC for /metrics: 403 naming the user and the path.
    let nobody = get(addr, "/metrics", Some(s.env.token(Identity::Nobody))).await;
    assert_eq!(nobody.status, 403, "{nobody:?}");
    assert!(
        nobody.body.contains("stratus-nobody") && nobody.body.contains("/metrics"),
        "{}",
        nobody.body
    );

    // A user allowed `get /metrics`: the registry the AWS metrics live in (once the instance
    // cache has made its first listing, which a loaded machine may delay).
    let scrape = wait_for(
        "the first DescribeInstances in the metrics",
        WAIT,
        || async {
            let scrape = get(addr, "/metrics", Some(s.env.token(Identity::Prometheus))).await;
            let listed = scrape.body.lines().any(|l| {
                l.starts_with("stratus_cloud_api_requests_total{")
                    && l.contains("operation=\"DescribeInstances\"")
            });
            Ok((scrape.status != 200 || listed).then_some(scrape))
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(scrape.status, 200, "{scrape:?}");
    assert!(
        scrape
            .content_type
            .starts_with("application/openmetrics-text"),
        "{}",
        scrape.content_type
    );
    assert!(
        scrape
            .body
            .lines()
            .any(|l| l.starts_with("stratus_cloud_api_requests_total{")
                && l.contains("cloud=\"aws\"")
                && l.contains("operation=\"DescribeInstances\"")),
        "{}",
        scrape.body
    );

    // Each answer was asked once and then remembered: a scrape storm does not reach the
    // apiserver. The forged token and the two users cost one TokenReview each; the two users
    // one SubjectAccessReview each.
    assert_eq!(reviews(&s), (3, 2), "{}", ccm.log());
    for _ in 0..5 {
        assert_eq!(
            get(addr, "/metrics", Some(s.env.token(Identity::Prometheus)))
                .await
                .status,
            200
        );
        assert_eq!(
            get(addr, "/metrics", Some(s.env.token(Identity::Nobody)))
                .await
                .status,
            403
        );
        assert_eq!(
            get(addr, "/metrics", Some("not-a-token-of-this-cluster"))
                .await
                .status,
            401
        );
    }
    // Open paths consult nobody, whatever the token.
    let open = get(addr, "/healthz", Some(s.env.token(Identity::Nobody))).await;
    assert_eq!(open.status, 200);
    assert_eq!(reviews(&s), (3, 2));

    // Unknown paths are not open: authorization first (as upstream), so 403 here.
    assert_eq!(
        get(
            addr,
            "/debug/pprof",
            Some(s.env.token(Identity::Prometheus))
        )
        .await
        .status,
        403
    );
    assert!(
        !ccm.log().contains(s.env.token(Identity::Prometheus)),
        "tokens must never be logged"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_until_the_instance_cache_has_synced() {
    let s = setup("readiness", true).await;
    // The instance cache's first DescribeInstances gets no answer until released.
    s.env
        .hold_aws_requests(&[Hold {
            action: "DescribeInstances".into(),
            after_forward: false,
        }])
        .await
        .unwrap();
    let (ccm, addr) = start_serving(&s, &[]);
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;

    // Not ready, and for the instance cache alone once the node informer has listed.
    let waiting = wait_for("/readyz naming the instance cache only", WAIT, || async {
        let a = get(addr, "/readyz", None).await;
        Ok((a.body.contains("[+]node-informer-sync ok")
            && a.body.contains("[-]instance-cache-sync failed"))
        .then_some(a))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(waiting.status, 503, "{waiting:?}");
    assert!(
        waiting.body.ends_with("readyz check failed\n"),
        "{}",
        waiting.body
    );
    let held = s.env.aws_request_counts().await.unwrap();
    assert!(
        held.get("ec2:DescribeInstances").copied().unwrap_or(0) >= 1,
        "{held:?}"
    );
    // Liveness does not depend on the caches.
    assert_eq!(get(addr, "/healthz", None).await.status, 200);
    assert_eq!(get(addr, "/readyz", None).await.status, 503);

    // Released, the held listing completes (well before the SDK's 30 s attempt timeout would
    // have retried it).
    s.env.hold_aws_requests(&[]).await.unwrap();
    s.env.release_held_aws_requests().await.unwrap();
    let ready = wait_for("/readyz 200", Duration::from_secs(15), || async {
        let a = get(addr, "/readyz", None).await;
        Ok((a.status == 200).then_some(a))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(ready.body, "ok");
    let verbose = get(addr, "/readyz?verbose", None).await;
    assert!(
        verbose.body.contains("[+]instance-cache-sync ok")
            && verbose.body.ends_with("readyz check passed\n"),
        "{}",
        verbose.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_while_the_watches_are_broken_and_recovers_with_them() {
    let mut s = setup("readiness-watch", true).await;
    // Leases that outlast the outage: the leader keeps leading while the apiserver is down.
    let (mut ccm, addr) = start_serving(
        &s,
        &[
            "--controllers=cloud-node,service",
            "--leader-elect-lease-duration=90s",
            "--leader-elect-renew-deadline=60s",
            "--leader-elect-retry-period=2s",
        ],
    );
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    // Leading (a standby is ready with no informer at all) with both informers synced.
    wait_for("/readyz 200 with both informers", WAIT, || async {
        let a = get(addr, "/readyz?verbose", None).await;
        Ok((a.status == 200
            && a.body.contains("[+]node-informer-sync ok")
            && a.body.contains("[+]service-informer-sync ok"))
        .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));

    s.env.stop_apiserver();
    let broken = wait_for("/readyz naming both broken watches", WAIT, || async {
        let a = get(addr, "/readyz", None).await;
        Ok((a
            .body
            .contains("[-]node-informer-sync failed: the Node watch is failing")
            && a.body
                .contains("[-]service-informer-sync failed: the Service watch is failing"))
        .then_some(a))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(broken.status, 503, "{broken:?}");
    // Liveness does not depend on the apiserver.
    assert_eq!(get(addr, "/healthz", None).await.status, 200);

    s.env.start_apiserver().await.unwrap();
    let ready = wait_for("/readyz 200 again", WAIT, || async {
        let a = get(addr, "/readyz?verbose", None).await;
        Ok((a.status == 200).then_some(a))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert!(
        ready.body.contains("[+]node-informer-sync ok")
            && ready.body.contains("[+]service-informer-sync ok"),
        "{}",
        ready.body
    );
    assert!(
        ccm.try_exit().is_none(),
        "the CCM kept running: {}",
        ccm.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_given_certificate_and_stops_on_sigterm() {
    let s = setup("tls-files", true).await;
    let key = rcgen::KeyPair::generate().unwrap();
    let params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .unwrap();
    let cert = params.self_signed(&key).unwrap();
    let cert_file = s.env.dir().join("serving.crt");
    let key_file = s.env.dir().join("serving.key");
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    let (ccm, addr) = start_serving(
        &s,
        &[
            &format!("--tls-cert-file={}", cert_file.display()),
            &format!("--tls-private-key-file={}", key_file.display()),
        ],
    );
    // Verified against that certificate alone, and it is the very one presented.
    let trust = Trust::Only(cert.der().clone());
    let answer = first_answer(&ccm, addr, "/healthz", None, &trust).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.server_cert, *cert.der());

    // SIGTERM: a clean exit, and the port closed.
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    let sent = unsafe { libc::kill(ccm.pid() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let ccm = std::sync::Mutex::new(ccm);
    let status = wait_for("the CCM to exit", WAIT, || async {
        Ok(ccm.lock().unwrap().try_exit())
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.lock().unwrap().log()));
    let ccm = ccm.into_inner().unwrap();
    assert!(status.success(), "{status:?}\n{}", ccm.log());
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "the port is still open after exit"
    );
}

/// `--tls-min-version` and `--tls-cipher-suites` as upstream: TLS 1.2 clients are refused under
/// `VersionTLS13`; a list restricts TLS 1.2 to its suites (names Go knows but rustls lacks are
/// accepted and not offered) while TLS 1.3 stays on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_flags_restrict_versions_and_suites() {
    use rustls::version::{TLS12, TLS13};
    let s = setup("tls-policy", true).await;
    let (ccm, addr) = start_serving(&s, &["--tls-min-version=VersionTLS13"]);
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert!(https::handshake(addr, &TLS13, None).await.is_ok());
    let refused = https::handshake(addr, &TLS12, None).await;
    assert!(refused.is_err(), "TLS 1.2 accepted: {refused:?}");
    drop(ccm);

    let (ccm, addr) = start_serving(
        &s,
        &["--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
    );
    first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    let chosen = https::handshake(
        addr,
        &TLS12,
        Some("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"),
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(chosen, "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384");
    let refused = https::handshake(
        addr,
        &TLS12,
        Some("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"),
    )
    .await;
    assert!(
        refused.is_err(),
        "an unlisted suite was accepted: {refused:?}"
    );
    assert!(https::handshake(addr, &TLS13, None).await.is_ok());
    assert!(
        ccm.log().contains("TLS_RSA_WITH_AES_128_CBC_SHA"),
        "no warning about the suite not offered:\n{}",
        ccm.log()
    );
}

/// Runs the binary to its (early) exit with a kubeconfig naming an unreachable apiserver.
fn run_to_exit(extra: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("stratus-serving-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: t\ncurrent-context: c\n",
    )
    .unwrap();
    let out = Command::new(common::ccm_binary())
        .args([
            "--cloud-provider=aws",
            "--allow-untagged-cloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--bind-address=127.0.0.1",
        ])
        .args(extra)
        .env_remove("KUBECONFIG")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
        .output()
        .expect("run ccm");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_serving_settings_are_refused_naming_the_flag() {
    let (code, err) = run_to_exit(&["--tls-cert-file=/etc/tls.crt"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-private-key-file"), "{err}");

    let (code, err) =
        run_to_exit(&["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_NOT_A_SUITE"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--tls-cipher-suites") && err.contains("TLS_NOT_A_SUITE"),
        "{err}"
    );

    let (code, err) = run_to_exit(&["--tls-min-version=TLS1.3"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-min-version"), "{err}");

    let (code, err) = run_to_exit(&["--authorization-always-allow-paths=/he*lthz"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--authorization-always-allow-paths"), "{err}");

    let (code, err) = run_to_exit(&[
        &format!("--secure-port={}", free_port()),
        "--tls-cert-file=/nonexistent/tls.crt",
        "--tls-private-key-file=/nonexistent/tls.key",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--tls-cert-file /nonexistent/tls.crt"),
        "{err}"
    );

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let (code, err) = run_to_exit(&[&format!("--secure-port={port}")]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--secure-port") && err.contains(&port.to_string()),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_ready_and_makes_no_cloud_call() {
    use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
    let s = setup("standby", true).await;
    // Another replica holds the lease for an hour.
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some("cloud-controller-manager".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some("other-replica".into()),
            lease_duration_seconds: Some(3600),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(s.admin.clone(), "kube-system")
        .create(&PostParams::default(), &lease)
        .await
        .unwrap();
    let (ccm, addr) = start_serving(&s, &[]);
    wait_for("standby waiting", WAIT, || async {
        Ok(ccm.log().contains("waiting for the lease").then_some(()))
    })
    .await
    .unwrap();
    let ready = first_answer(&ccm, addr, "/readyz?verbose", None, &Trust::Any).await;
    assert_eq!(ready.status, 200, "{ready:?}");
    assert!(!ready.body.contains("informer"), "{}", ready.body);
    // A full retry period later it is still a standby that has asked AWS nothing.
    wait_for("a second lease attempt", WAIT, || async {
        let writes = s
            .env
            .kube_writes_to(Identity::CloudControllerManager.username(), "leases")?;
        let log = ccm.log();
        Ok(
            (writes == 0 && !log.contains("acquired the lease") && ready_polls(&log) >= 2)
                .then_some(()),
        )
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    let counts = s.env.aws_request_counts().await.unwrap();
    assert!(counts.is_empty(), "a standby called AWS: {counts:?}");
}

/// How many times the standby has looked at the lease (each try logs at debug level).
fn ready_polls(log: &str) -> usize {
    log.matches("lease held by another candidate").count()
}
