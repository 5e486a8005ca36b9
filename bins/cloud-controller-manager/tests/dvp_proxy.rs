//! The DVP CCM behind a forward proxy, as Deckhouse runs it with `helm_lib_envs_for_proxy`:
//! lower-case `https_proxy` names a real proxy (proxy.py) and `no_proxy` names the tenant
//! apiserver (`host:port`, both apiservers are on 127.0.0.1), so the parent cluster is reached
//! through a CONNECT tunnel while the tenant client stays direct, and a node still initialises.

use std::collections::BTreeMap;
use std::time::Duration;

use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::parent_role_rules;
use stratus_scenarios::kube_fixture::{self, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::wait_for;
use stratus_testenv::tools::connect_proxy::ConnectProxy;
use stratus_testenv::{DvpEnv, Identity};

const WAIT: Duration = Duration::from_secs(60);

fn host_port(url: &str) -> String {
    url.trim_start_matches("https://")
        .trim_end_matches('/')
        .to_string()
}

/// Opens a CONNECT tunnel through the proxy to `target` (`host:port`) and closes it; returns
/// `target` as the proxy logs it.
async fn barrier(proxy_port: u16, target: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", proxy_port))
        .await
        .unwrap();
    tcp.write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut answer = [0u8; 64];
    let n = tcp.read(&mut answer).await.unwrap();
    assert!(
        answer[..n].starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&answer[..n])
    );
    drop(tcp);
    target.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_parent_cluster_is_reached_through_the_proxy_and_the_tenant_directly() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let mut vars = env
        .bound_account_env(
            "stratus-dvp-cloud-controller-manager",
            parent_role_rules().unwrap(),
        )
        .await
        .expect("the shipped parent Role");
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let proxy = ConnectProxy::start().await.expect("proxy.py");
    let parent = host_port(env.parent.apiserver_url());
    let tenant = host_port(env.tenant.apiserver_url());
    vars.extend([
        ("https_proxy".to_string(), proxy.url()),
        ("no_proxy".to_string(), tenant.clone()),
    ]);
    let args: Vec<String> = ["--cloud-provider=dvp", "--controllers=cloud-node", "--v=4"]
        .map(String::from)
        .to_vec();
    let ccm = CcmProcess::start_on(
        std::path::Path::new(env!("CARGO_BIN_EXE_cloud-controller-manager")),
        &env.tenant,
        vars,
        &args,
    )
    .expect("start ccm");

    let fixture = DvpFixture::new(env.parent_admin().await.unwrap(), env.namespace(), "proxy");
    fixture
        .create_vm("proxied-vm", "proxied-node")
        .await
        .unwrap();
    kube_fixture::create_uninitialized_node(&admin, "proxied-node", &[], BTreeMap::new())
        .await
        .unwrap();
    let node = wait_for("proxied-node initialised", WAIT, || async {
        Ok(get_node(&admin, "proxied-node")
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some("dvp://proxied-vm")
    );

    proxy
        .wait_for("CONNECT to the parent apiserver", WAIT, |r| {
            r.method == "CONNECT" && r.target == parent
        })
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    // The proxy logs a tunnel when it closes: stop the CCM (closing every connection), then
    // send a last tunnel of our own and wait for it, so every CCM tunnel is logged before it.
    drop(ccm);
    let barrier = barrier(proxy.port(), &parent).await;
    proxy
        .wait_for("the barrier tunnel", WAIT, |r| {
            r.method == "CONNECT" && r.target == barrier
        })
        .await
        .unwrap();
    let to_tenant: Vec<_> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.target.starts_with(&tenant))
        .collect();
    assert!(
        to_tenant.is_empty(),
        "the tenant went through the proxy: {to_tenant:?}"
    );
}
