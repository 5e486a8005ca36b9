//! The service-account token flow (KEP-4412): `AssumeRoleWithWebIdentity` first, then ECR with
//! the role's credentials; the role from the annotation, else from `AWS_ECR_ROLE_ARN`; and no
//! secret ever on stderr.

mod common;

use common::*;

const ROLE_A: &str = "arn:aws:iam::111122223333:role/ecr-pull";
const ROLE_B: &str = "arn:aws:iam::444455556666:role/team/ecr-pull";

#[tokio::test]
async fn a_service_account_token_assumes_the_annotated_role_first() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let token = sa_token("team", "puller");
    let run = w.run(
        &request(V1, IMAGE, Some(&token), &[(ROLE_ANNOTATION, ROLE_A)]),
        &["--v=2"],
    );
    // moto answers ECR for the account of the credentials that signed the call: the role's.
    assert_eq!(
        run.auth(HOST),
        ("AWS".to_owned(), "111122223333-auth-token".to_owned())
    );
    assert!(
        run.stderr.contains(&format!(
            "assuming role {ROLE_A} with the service account token"
        )),
        "{}",
        run.stderr
    );
    assert_eq!(w.count("AssumeRoleWithWebIdentity").await, 1);
    assert_eq!(w.count("GetAuthorizationToken").await, 1);

    // Cached for this service account and role: no STS, no ECR.
    w.reset().await;
    let again = w.run(
        &request(V1, IMAGE, Some(&token), &[(ROLE_ANNOTATION, ROLE_A)]),
        &[],
    );
    assert_eq!(again.auth(HOST).1, "111122223333-auth-token");
    assert_eq!(w.total().await, 0);
    // A new token of the same service account (another pod) hits too.
    let other_pod = sa_token("team", "puller").replace("signature", "other-pod-signature");
    w.run(
        &request(V1, IMAGE, Some(&other_pod), &[(ROLE_ANNOTATION, ROLE_A)]),
        &[],
    );
    assert_eq!(w.total().await, 0);

    // Another service account naming the same role does not get the cached answer: it must
    // pass the role's trust policy itself.
    let intruder = sa_token("other-team", "app");
    let run = w.run(
        &request(V1, IMAGE, Some(&intruder), &[(ROLE_ANNOTATION, ROLE_A)]),
        &[],
    );
    assert_eq!(run.auth(HOST).1, "111122223333-auth-token");
    assert_eq!(w.count("AssumeRoleWithWebIdentity").await, 1);

    // The node's own credentials are a different entry too.
    let node = w.run(&request(V1, IMAGE, None, &[]), &[]);
    assert_eq!(node.auth(HOST).1, NODE_PASSWORD);
    assert_eq!(w.count("GetAuthorizationToken").await, 2);
    assert_eq!(w.cache_files().len(), 3);
}

#[tokio::test]
async fn aws_ecr_role_arn_applies_when_no_annotation_names_a_role() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let token = sa_token("team", "puller");
    let env = [("AWS_ECR_ROLE_ARN", ROLE_B)];
    // Environment only.
    let run = w.run_with_env(
        &request(V1, IMAGE, Some(&token), &[]),
        &["--no-cache"],
        &env,
    );
    assert_eq!(run.auth(HOST).1, "444455556666-auth-token");
    // The annotation wins over the environment.
    let run = w.run_with_env(
        &request(V1, IMAGE, Some(&token), &[(ROLE_ANNOTATION, ROLE_A)]),
        &["--no-cache"],
        &env,
    );
    assert_eq!(run.auth(HOST).1, "111122223333-auth-token");
    assert_eq!(w.count("AssumeRoleWithWebIdentity").await, 2);
    // Without a service-account token there is nothing to assume the role with: node
    // credentials, no STS call.
    let run = w.run_with_env(
        &request(V1, IMAGE, None, &[(ROLE_ANNOTATION, ROLE_A)]),
        &["--no-cache"],
        &env,
    );
    assert_eq!(run.auth(HOST).1, NODE_PASSWORD);
    assert_eq!(w.count("AssumeRoleWithWebIdentity").await, 2);
    // A malformed role is refused before any AWS call, naming where it came from.
    w.reset().await;
    let run = w.run(
        &request(V1, IMAGE, Some(&token), &[(ROLE_ANNOTATION, "ecr-pull")]),
        &[],
    );
    run.assert_failed_with("error: the eks.amazonaws.com/ecr-role-arn annotation is \"ecr-pull\", which is not an IAM role ARN");
    let run = w.run_with_env(
        &request(V1, IMAGE, Some(&token), &[]),
        &[],
        &[("AWS_ECR_ROLE_ARN", "arn:aws:iam::1:role/x")],
    );
    run.assert_failed_with("error: AWS_ECR_ROLE_ARN is \"arn:aws:iam::1:role/x\"");
    assert_eq!(w.total().await, 0);
}

#[tokio::test]
async fn no_secret_reaches_stderr() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let token = sa_token("team", "puller");
    let signature = token.rsplit('.').next().unwrap().to_owned();
    let role = [(ROLE_ANNOTATION, ROLE_A)];
    let mut stderr = String::new();
    let mut passwords = Vec::new();

    // Cold, cached and uncached answers, at the highest verbosity.
    for args in [
        &["--v=10"][..],
        &["--v=10"][..],
        &["--v=10", "--no-cache"][..],
    ] {
        let run = w.run(&request(V1, IMAGE, Some(&token), &role), args);
        passwords.push(run.auth(HOST).1);
        stderr += &run.stderr;
        let run = w.run(
            &request(V1, "public.ecr.aws/a/b:1", Some(&token), &role),
            args,
        );
        passwords.push(run.auth("public.ecr.aws").1);
        stderr += &run.stderr;
    }
    // AWS unreachable with a token in hand (no cache to fall back to).
    let down = [("AWS_ENDPOINT_URL", "http://127.0.0.1:9")];
    let run = w.run_with_env(
        &request(V1, IMAGE, Some(&token), &role),
        &["--v=10", "--no-cache"],
        &down,
    );
    run.assert_failed_with("error: no credentials for");
    stderr += &run.stderr;
    // A refused role. (moto assumes any role, so an STS refusal cannot be provoked here; the
    // redaction of any error text is covered by the `log` unit tests.)
    let run = w.run(
        &request(V1, IMAGE, Some(&token), &[(ROLE_ANNOTATION, "not-an-arn")]),
        &["--v=10"],
    );
    run.assert_failed_with("not an IAM role ARN");
    stderr += &run.stderr;
    // Malformed requests carrying the token.
    let bad = format!(
        r#"{{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"docker.io/x","serviceAccountToken":"{token}"}}"#
    );
    let run = w.run(bad.as_bytes(), &["--v=10"]);
    run.assert_failed_with("[UnsupportedImage]");
    stderr += &run.stderr;
    let bad = format!(r#"{{"apiVersion":"v9","serviceAccountToken":"{token}""#);
    let run = w.run(bad.as_bytes(), &["--v=10"]);
    run.assert_failed_with("[BadRequest]");
    stderr += &run.stderr;

    assert!(
        stderr.contains("assuming role"),
        "verbose output was written: {stderr}"
    );
    let mut secrets = vec![token.clone(), signature];
    for password in passwords {
        use base64::Engine as _;
        secrets.push(base64::engine::general_purpose::STANDARD.encode(format!("AWS:{password}")));
        secrets.push(password);
    }
    for secret in &secrets {
        assert!(
            !stderr.contains(secret.as_str()),
            "secret {secret:?} on stderr:\n{stderr}"
        );
    }
    // Nor in the cache directory's names, nor anywhere but the (private) entries themselves.
    for file in w.cache_files() {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(!secrets.iter().any(|s| name.contains(s.as_str())), "{name}");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(
            !text.contains(&token),
            "the service-account token is never stored"
        );
    }
}
