//! The on-disk cache across invocations of the shipped binary: a hit costs no AWS request,
//! files are private, corrupt files are replaced, a stale entry answers while AWS is down,
//! and moto's already expired tokens are answered with `cacheDuration: 0s` and not cached.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_cached_answer_costs_no_aws_request() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let cold = w.run(&request(V1, IMAGE, None, &[]), &[]);
    assert_eq!(cold.auth(HOST).1, NODE_PASSWORD);
    assert_eq!(w.count("GetAuthorizationToken").await, 1);

    // The directory and the single entry are private.
    let files = w.cache_files();
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&files[0]), 0o600);
    assert_eq!(mode(&w.cache_dir), 0o700);

    // Other images of the same registry, in every API version: no AWS request at all.
    w.reset().await;
    for (version, image) in [
        (V1, format!("{HOST}/other:v2")),
        (V1BETA1, format!("{HOST}/team/app@sha256:00ff")),
        (V1ALPHA1, IMAGE.to_owned()),
    ] {
        let hit = w.run(&request(version, &image, None, &[]), &["--v=2"]);
        assert_eq!(hit.response()["apiVersion"], version);
        assert_eq!(hit.auth(HOST), ("AWS".to_owned(), NODE_PASSWORD.to_owned()));
        assert!(hit.stderr.contains("cache hit"), "{}", hit.stderr);
        assert!(
            hit.cache_seconds() <= cold.cache_seconds()
                && hit.cache_seconds() + 10 >= cold.cache_seconds(),
            "{} vs {}",
            hit.cache_seconds(),
            cold.cache_seconds()
        );
    }
    assert_eq!(
        w.aws_requests().await,
        Default::default(),
        "a hit makes no AWS request"
    );

    // Another registry (another account) and another region are separate entries.
    let other = "210987654321.dkr.ecr.us-east-1.amazonaws.com";
    w.run(&request(V1, &format!("{other}/x"), None, &[]), &[])
        .auth(other);
    w.run(
        &request(
            V1,
            "123456789012.dkr.ecr.eu-west-1.amazonaws.com/x",
            None,
            &[],
        ),
        &[],
    );
    assert_eq!(w.count("GetAuthorizationToken").await, 2);
    assert_eq!(w.cache_files().len(), 3);

    // With --no-cache the entry is neither read nor written.
    w.reset().await;
    w.run(&request(V1, IMAGE, None, &[]), &["--no-cache"])
        .auth(HOST);
    assert_eq!(w.count("GetAuthorizationToken").await, 1);
}

#[tokio::test]
async fn a_corrupt_or_open_cache_file_is_ignored_and_replaced() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    w.run(&request(V1, IMAGE, None, &[]), &[]).auth(HOST);
    let file = w.cache_files().remove(0);
    for (damage, why) in [
        (
            &b"{\"version\": 1, \"key\": trunc"[..],
            "entry corrupt (ignored)",
        ),
        (&b""[..], "entry corrupt (ignored)"),
        (&[0xffu8, 0x00, 0x13][..], "entry corrupt (ignored)"),
    ] {
        std::fs::write(&file, damage).unwrap();
        w.reset().await;
        let run = w.run(&request(V1, IMAGE, None, &[]), &["--v=2"]);
        assert_eq!(run.auth(HOST).1, NODE_PASSWORD);
        assert!(run.stderr.contains(why), "{}", run.stderr);
        assert_eq!(w.count("GetAuthorizationToken").await, 1);
        // Replaced by a good entry: the next call is a hit.
        let text = std::fs::read_to_string(&file).unwrap();
        serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON again");
        w.reset().await;
        w.run(&request(V1, IMAGE, None, &[]), &[]).auth(HOST);
        assert_eq!(w.total().await, 0);
    }

    // A file others may read is not trusted, and is replaced by a private one.
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    w.reset().await;
    let run = w.run(&request(V1, IMAGE, None, &[]), &["--v=2"]);
    assert!(
        run.stderr
            .contains("entry not private to this user (ignored)"),
        "{}",
        run.stderr
    );
    assert_eq!(w.count("GetAuthorizationToken").await, 1);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(w.cache_files(), vec![file], "no temporary file left behind");
}

#[tokio::test]
async fn a_stale_entry_answers_while_aws_is_unreachable() {
    // Tokens of 8 s: fresh for 4 s, then stale until they expire.
    let w = World::start(Some(Duration::from_secs(8))).await;
    w.run(&request(V1, IMAGE, None, &[]), &[]).auth(HOST);
    // Taken after the token was issued, so the entry is surely stale 4.5 s and expired 8.5 s
    // from here.
    let started = tokio::time::Instant::now();

    // AWS goes away.
    let unreachable = [("AWS_ENDPOINT_URL", "http://127.0.0.1:9")];
    let fresh = w.run_with_env(&request(V1, IMAGE, None, &[]), &[], &unreachable);
    assert_eq!(fresh.auth(HOST).1, NODE_PASSWORD, "fresh: no AWS needed");
    assert!(fresh.stderr.is_empty(), "{fresh:#?}");

    tokio::time::sleep(Duration::from_millis(4500).saturating_sub(started.elapsed())).await;
    let stale = w.run_with_env(&request(V1, IMAGE, None, &[]), &[], &unreachable);
    assert_eq!(stale.auth(HOST).1, NODE_PASSWORD, "{stale:#?}");
    assert!(
        stale
            .stderr
            .contains("warning: ecr:GetAuthorizationToken in us-east-1 failed")
            && stale
                .stderr
                .contains("answering with the cached token, which expires in"),
        "{}",
        stale.stderr
    );
    assert!(stale.cache_seconds() <= 2, "{}", stale.cache_seconds());

    tokio::time::sleep(Duration::from_millis(8500).saturating_sub(started.elapsed())).await;
    let expired = w.run_with_env(&request(V1, IMAGE, None, &[]), &[], &unreachable);
    expired.assert_failed_with(&format!(
        "error: no credentials for {HOST} (ecr, us-east-1): ecr:GetAuthorizationToken in us-east-1 failed"
    ));

    // AWS is back: a new token, cached again.
    let back = w.run(&request(V1, IMAGE, None, &[]), &[]);
    assert_eq!(back.auth(HOST).1, NODE_PASSWORD);
    assert!(back.cache_seconds() >= 3, "{}", back.cache_seconds());
}

#[tokio::test]
async fn an_expired_token_has_zero_cache_duration_and_is_not_cached() {
    // moto's own answer: expiresAt 2015-01-01.
    let w = World::start(None).await;
    for n in 1..=2 {
        let run = w.run(&request(V1, IMAGE, None, &[]), &["--v=2"]);
        assert_eq!(run.response()["cacheDuration"], "0s");
        assert_eq!(run.auth(HOST).1, NODE_PASSWORD);
        assert!(
            run.stderr
                .contains("got a token that has already expired: cacheDuration 0, not cached"),
            "{}",
            run.stderr
        );
        assert_eq!(w.count("GetAuthorizationToken").await, n);
    }
    assert!(w.cache_files().is_empty(), "{:?}", w.cache_files());
    // Same for ECR Public.
    let run = w.run(&request(V1, "public.ecr.aws/a/b", None, &[]), &[]);
    assert_eq!(run.response()["cacheDuration"], "0s");
    assert!(w.cache_files().is_empty());
}
