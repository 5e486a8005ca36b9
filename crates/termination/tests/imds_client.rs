//! The IMDS client against the real amazon-ec2-metadata-mock: IMDSv2-only mode works through
//! session tokens, a token is refreshed before its TTL runs out, and a token the service no
//! longer knows (the mock restarted) is replaced transparently after the 401.

use std::time::Duration;

use stratus_termination::imds::Imds;
use stratus_testenv::tools::ec2_metadata_mock::Aemm;

fn token_requests(aemm: &Aemm) -> usize {
    aemm.log().matches("/latest/api/token").count()
}

#[tokio::test]
async fn imdsv2_tokens_are_refreshed_and_replaced() {
    let mut aemm = Aemm::start(&["spot", "-I", "-t", "2099-01-01T00:00:00Z"])
        .await
        .unwrap();
    // A 16 s token is refreshed 15 s before it expires: after one second.
    let imds = Imds::with_token_ttl(aemm.url(), 2, Duration::from_secs(16));
    let action = imds.spot_action().await.unwrap().expect("a notice");
    assert_eq!(action.action, "terminate");
    assert!(imds.uses_v2().await);
    let first = token_requests(&aemm);
    assert!(first >= 1, "no token request:\n{}", aemm.log());
    imds.spot_action().await.unwrap();
    assert_eq!(token_requests(&aemm), first, "a fresh token is reused");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    imds.spot_action().await.unwrap();
    assert!(
        token_requests(&aemm) > first,
        "the token was not refreshed:\n{}",
        aemm.log()
    );

    // A restarted service rejects the old token: 401, new token, answer.
    aemm.restart(&["spot", "-I", "-t", "2099-01-01T00:00:00Z"])
        .await
        .unwrap();
    let imds = Imds::with_token_ttl(aemm.url(), 2, Duration::from_secs(3600));
    imds.spot_action().await.unwrap();
    aemm.restart(&["spot", "-I", "-t", "2099-01-01T00:00:00Z"])
        .await
        .unwrap();
    let action = imds.spot_action().await.expect("answered after the 401");
    assert!(action.is_some());

    // Node metadata from the identity document.
    let meta = imds.node_metadata().await;
    assert_eq!(meta.instance_id, "i-1234567890abcdef0");
    assert_eq!(meta.region, "us-east-1");
    assert!(!meta.instance_type.is_empty());
}
