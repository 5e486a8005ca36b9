//! The OpenStack CCM behind a forward proxy: `HTTP_PROXY` names a real proxy (proxy.py), and
//! Keystone and the Nova/Neutron simulators (plain HTTP on 127.0.0.1) are reached through it in
//! absolute form (the apiserver is https and `HTTPS_PROXY` is unset); a node still initialises.

mod openstack_common;

use openstack_common::{setup, shared, WAIT};
use stratus_openstack_sim::ServerSpec;
use stratus_scenarios::openstack_fixture::provider_id;
use stratus_testenv::tools::connect_proxy::ConnectProxy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keystone_and_nova_are_reached_through_the_proxy() {
    let cloud = shared().await;
    let s = setup(cloud, "proxied").await;
    let proxy = ConnectProxy::start().await.expect("proxy.py");
    let ids = s
        .sim()
        .create_servers(&[ServerSpec {
            fixed_ip: Some("10.0.209.11".into()),
            ..ServerSpec::active(s.name("vm"))
        }])
        .expect("server");
    let name = s.name("vm");
    s.node(&name, None, &[]).await;
    let vars = [("HTTP_PROXY", proxy.url()), ("NO_PROXY", String::new())];
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ccm = s.start_ccm_with_env("", &[], &vars);
    let node = s.initialized(&name, &ccm).await;
    assert_eq!(
        node.spec.as_ref().and_then(|n| n.provider_id.as_deref()),
        Some(provider_id(&ids[0]).as_str())
    );

    // Keystone's token request and a Nova call went to the proxy in absolute form.
    let authority = cloud
        .auth_url()
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    for (what, method, path) in [
        ("the token request", "POST", "/v3/auth/tokens"),
        ("a Nova request", "GET", "/servers"),
    ] {
        proxy
            .wait_for(what, WAIT, |r| {
                r.method == method && r.target.starts_with(&authority) && r.target.contains(path)
            })
            .await
            .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_proxy_variable_stops_the_ccm_naming_it() {
    let cloud = shared().await;
    let s = setup(cloud, "badproxy").await;
    let mut ccm = s.start_ccm_with_env("", &[], &[("https_proxy", "ftp://user:secret@proxy:21")]);
    let status = stratus_scenarios::wait_for("the CCM to exit", WAIT, || {
        let exited = ccm.try_exit();
        async move { Ok(exited) }
    })
    .await
    .unwrap();
    assert!(!status.success());
    let log = ccm.log();
    assert!(
        log.contains("https_proxy: unsupported proxy scheme \"ftp\""),
        "{log}"
    );
    assert!(!log.contains("secret"), "{log}");
}
