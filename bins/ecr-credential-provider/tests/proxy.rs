//! The plugin behind a forward proxy, as kubelet runs it on a node whose environment names one:
//! lower-case `http_proxy` names a real proxy (proxy.py) and the ECR call to moto (plain HTTP on
//! 127.0.0.1) goes to it in absolute form; the token is still answered.

mod common;

use std::time::Duration;

use common::*;
use stratus_testenv::tools::connect_proxy::ConnectProxy;

#[tokio::test]
async fn the_token_is_fetched_through_the_proxy() {
    let w = World::start(Some(TWELVE_HOURS)).await;
    let proxy = ConnectProxy::start().await.expect("proxy.py");
    let url = proxy.url();
    let run = w.run_with_env(
        &request(V1, IMAGE, None, &[]),
        &["--no-cache"],
        &[("http_proxy", url.as_str()), ("no_proxy", "")],
    );
    assert_eq!(run.auth(HOST), ("AWS".to_owned(), NODE_PASSWORD.to_owned()));
    let moto = w
        .env
        .iter()
        .find(|(k, _)| k == "AWS_ENDPOINT_URL")
        .map(|(_, v)| {
            v.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .expect("AWS_ENDPOINT_URL");
    proxy
        .wait_for(
            "the ECR call forwarded to moto",
            Duration::from_secs(20),
            |r| r.method == "POST" && r.target.starts_with(&moto),
        )
        .await
        .unwrap();
}
