//! The kubelet protocol end to end: the shipped binary against moto, for each API version,
//! every registry host form, refused images and malformed stdin.

mod common;

use common::*;

#[tokio::test]
async fn answers_each_api_version_in_its_own_version() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    for version in [V1, V1BETA1, V1ALPHA1] {
        let run = w.run(&request(version, IMAGE, None, &[]), &["--no-cache"]);
        let response = run.response();
        assert_eq!(response["apiVersion"], version, "{response}");
        assert_eq!(response["kind"], "CredentialProviderResponse");
        assert_eq!(response["cacheKeyType"], "Registry");
        let auth = response["auth"].as_object().unwrap();
        assert_eq!(auth.len(), 1, "{response}");
        assert_eq!(run.auth(HOST), ("AWS".to_owned(), NODE_PASSWORD.to_owned()));
        // Half of the 12 h lifetime, less the seconds this took.
        let half = run.cache_seconds();
        assert!((6 * 3600 - 10..=6 * 3600).contains(&half), "{half}");
        assert!(run.stderr.is_empty(), "{run:#?}");
    }
    assert_eq!(w.count("GetAuthorizationToken").await, 3);
    assert_eq!(w.total().await, 3, "{:?}", w.aws_requests().await);
}

#[tokio::test]
async fn every_private_host_form_gets_a_token_from_its_region() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let hosts = [
        ("123456789012.dkr.ecr.us-west-2.amazonaws.com", "us-west-2"),
        (
            "123456789012.dkr.ecr-fips.us-east-1.amazonaws.com",
            "us-east-1",
        ),
        ("123456789012.dkr-ecr.eu-west-1.on.aws", "eu-west-1"),
        ("123456789012.dkr-ecr-fips.us-east-2.on.aws", "us-east-2"),
        (
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn",
            "cn-north-1",
        ),
        (
            "123456789012.dkr-ecr.cn-northwest-1.on.amazonwebservices.com.cn",
            "cn-northwest-1",
        ),
        (
            "123456789012.dkr.ecr.us-gov-west-1.amazonaws.com",
            "us-gov-west-1",
        ),
        (
            "123456789012.dkr.ecr-fips.us-gov-east-1.amazonaws.com",
            "us-gov-east-1",
        ),
        (
            "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov",
            "us-iso-east-1",
        ),
        (
            "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov",
            "us-isob-east-1",
        ),
        (
            "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk",
            "eu-isoe-west-1",
        ),
        (
            "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov",
            "us-isof-south-1",
        ),
        (
            "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu",
            "eusc-de-east-1",
        ),
        (
            "123456789012.dkr.ecr.eu-central-1.amazonaws.com:443",
            "eu-central-1",
        ),
    ];
    for (host, region) in hosts {
        let image = format!("{host}/team/app@sha256:0123456789abcdef");
        let run = w.run(&request(V1, &image, None, &[]), &["--v=2"]);
        assert_eq!(
            run.auth(host),
            ("AWS".to_owned(), NODE_PASSWORD.to_owned()),
            "{host}"
        );
        assert!(
            run.stderr
                .contains(&format!("calling ecr:GetAuthorizationToken in {region}\n")),
            "{host}: {}",
            run.stderr
        );
    }
    // One call per registry, each in its region, and one cache entry per registry.
    assert_eq!(w.count("GetAuthorizationToken").await, hosts.len() as u64);
    assert_eq!(w.cache_files().len(), hosts.len());
}

#[tokio::test]
async fn ecr_public_hosts_get_an_ecr_public_token_from_us_east_1() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    for host in ["public.ecr.aws", "ecr-public.aws.com"] {
        let image = format!("{host}/nginx/nginx:1.27");
        let run = w.run(&request(V1, &image, None, &[]), &["--v=2", "--no-cache"]);
        assert_eq!(
            run.auth(host),
            ("AWS".to_owned(), "ecr-public-auth-token".to_owned())
        );
        assert!(
            run.stderr
                .contains("calling ecr-public:GetAuthorizationToken in us-east-1\n"),
            "{}",
            run.stderr
        );
    }
    let requests = w.aws_requests().await;
    assert_eq!(
        requests.get("ecr-public:GetAuthorizationToken"),
        Some(&2),
        "{requests:?}"
    );
    assert_eq!(w.total().await, 2, "{requests:?}");
}

#[tokio::test]
async fn other_registries_are_refused_without_an_aws_call() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    for (image, reason) in [
        (
            "docker.io/library/nginx:1.27",
            "docker.io is not an ECR registry host",
        ),
        (
            "registry.k8s.io/pause:3.10",
            "registry.k8s.io is not an ECR registry host",
        ),
        ("nginx", "nginx is not an ECR registry host"),
        (
            "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example/app",
            "is not an ECR registry host",
        ),
        (
            "123456789012.dkr.ecr.cn-north-1.amazonaws.com/app",
            "region cn-north-1 is in partition aws-cn, whose registries end in amazonaws.com.cn",
        ),
        (
            "1234.dkr.ecr.us-east-1.amazonaws.com/app",
            "the registry ID \"1234\" is not a 12-digit AWS account ID",
        ),
    ] {
        let run = w.run(&request(V1, image, None, &[]), &[]);
        run.assert_failed_with(&format!(
            "ecr-credential-provider: error: image {image:?} is not in an Amazon ECR registry"
        ));
        run.assert_failed_with(reason);
        run.assert_failed_with("[UnsupportedImage]");
    }
    assert_eq!(w.total().await, 0);
    assert!(w.cache_files().is_empty());
}

#[test]
fn malformed_stdin_fails_with_a_clear_message_and_empty_stdout() {
    // No AWS at all: an endpoint nobody listens on.
    let env = vec![
        (
            "AWS_ENDPOINT_URL".to_owned(),
            "http://127.0.0.1:9".to_owned(),
        ),
        ("AWS_ACCESS_KEY_ID".to_owned(), "testing".to_owned()),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), "testing".to_owned()),
    ];
    let cache = std::env::temp_dir().join(format!("ecr-malformed-{}", std::process::id()));
    let args = vec![format!("--cache-dir={}", cache.display())];
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"".to_vec(), "error: stdin is empty; expected a CredentialProviderRequest JSON object from the kubelet"),
        (b"not json at all".to_vec(), "error: stdin is not valid JSON (syntax error at line 1 column 2); expected a CredentialProviderRequest object"),
        (b"{\"apiVersion\":".to_vec(), "error: stdin is not valid JSON (it ends early at line 1 column 14)"),
        (b"[]".to_vec(), "error: stdin is not a JSON object; expected a CredentialProviderRequest"),
        (request("credentialprovider.kubelet.k8s.io/v2", IMAGE, None, &[]), "error: unsupported apiVersion; supported: credentialprovider.kubelet.k8s.io/v1, credentialprovider.kubelet.k8s.io/v1beta1, credentialprovider.kubelet.k8s.io/v1alpha1"),
        (br#"{"kind":"CredentialProviderRequest","image":"x"}"#.to_vec(), "error: the request has no apiVersion"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"Pod","image":"x"}"#.to_vec(), "error: the request's kind is not \"CredentialProviderRequest\""),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest"}"#.to_vec(), "error: the request has no image"),
        (br#"{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"x","serviceAccountToken":42}"#.to_vec(), "error: the request's serviceAccountToken must be a string"),
        (vec![b' '; (1 << 20) + 10], "error: stdin is larger than 1048576 bytes"),
    ];
    for (stdin, message) in cases {
        let run = run_plugin(&env, &args, &stdin);
        run.assert_failed_with(message);
        run.assert_failed_with("[BadRequest]");
        assert_eq!(run.stderr.lines().count(), 1, "one line: {run:#?}");
    }
    assert!(!cache.exists(), "bad input never touches the cache");

    // Unknown flags are refused by clap, with usage on stderr.
    let run = run_plugin(&env, &["--frobnicate".to_owned()], b"");
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert!(run.stdout.is_empty());
    assert!(run.stderr.contains("--frobnicate"), "{run:#?}");
}
