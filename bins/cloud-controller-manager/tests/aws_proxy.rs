//! The AWS CCM behind a forward proxy: `HTTP_PROXY` names a real proxy (proxy.py) and the AWS
//! SDK's calls to moto (plain HTTP on 127.0.0.1, the endpoint override Stratus's tests use) go to
//! it in absolute form; the apiserver (https, `HTTPS_PROXY` unset) stays direct; a node still
//! initialises. The SDK's default HTTP client reads the variables itself (behavior version
//! `latest`); this proves every Stratus binary built that way honours them.

mod common;

use common::{setup, WAIT};
use stratus_scenarios::ccm::{write_cloud_config_with, CcmProcess};
use stratus_scenarios::{kube_fixture, wait_for};
use stratus_testenv::tools::connect_proxy::ConnectProxy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sdk_calls_go_through_the_proxy() {
    let s = setup("proxied", true).await;
    let proxy = ConnectProxy::start().await.expect("proxy.py");
    let mut vars = s.env.aws().env_vars();
    vars.extend([
        ("HTTP_PROXY".to_string(), proxy.url()),
        ("NO_PROXY".to_string(), String::new()),
    ]);
    let config = write_cloud_config_with(s.env.dir(), &s.cluster_id, "").expect("cloud config");
    let args: Vec<String> = vec![
        "--cloud-provider=aws".into(),
        format!("--cloud-config={}", config.display()),
        "--controllers=cloud-node".into(),
        "--v=4".into(),
    ];
    let ccm = CcmProcess::start_on(&common::ccm_binary(), s.env.cluster(), vars, &args)
        .expect("start ccm");

    let instance = s.launch(1).await[0].id.clone();
    kube_fixture::create_uninitialized_node(&s.admin, &instance, &[], Default::default())
        .await
        .unwrap();
    wait_for(&format!("{instance} initialised"), WAIT, || async {
        Ok(kube_fixture::get_node(&s.admin, &instance)
            .await?
            .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));

    let moto = s
        .env
        .aws()
        .env_vars()
        .into_iter()
        .find(|(k, _)| k == "AWS_ENDPOINT_URL")
        .map(|(_, v)| {
            v.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_string()
        })
        .expect("AWS_ENDPOINT_URL");
    proxy
        .wait_for("an EC2 call forwarded to moto", WAIT, |r| {
            r.method == "POST" && r.target.starts_with(&moto)
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
}
