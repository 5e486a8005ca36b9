//! The cloud-controller-manager started exactly as Deckhouse's cloud-provider-openstack module
//! starts it: `--leader-elect=true --cluster-cidr --allocate-node-cidrs=true
//! --configure-cloud-routes=true --cloud-config --cloud-provider=openstack --bind-address=$(HOST_IP)
//! --secure-port=10471` with the `--tls-cipher-suites` list of the older revision and `--v=2`,
//! and the cloud-config Deckhouse's Secret holds (every key it emits: quoted values, repeated
//! network names, the fixed `[Networking]`, `[LoadBalancer]` and `[BlockStorage]` keys), under the
//! shipped RBAC, against a real Keystone and the Nova/Neutron simulators. It must answer the
//! HTTPS `/healthz` probe with one of the listed suites, initialise a node (its addresses from
//! the named internal network, a pod CIDR from the cluster CIDR) and stay up. Test stand-ins: a
//! free loopback port for 10471 and 127.0.0.1 for `$(HOST_IP)`; routes stay unconfigured since
//! the cloud-config names no router (as Deckhouse's does not).

mod openstack_common;

use std::net::SocketAddr;
use std::time::Duration;

use openstack_common::{setup, shared};
use stratus_openstack_sim::ServerSpec;
use stratus_scenarios::https::{self, Trust};
use stratus_scenarios::kube_fixture::addresses;
use stratus_scenarios::wait_for;

/// The older revision's list: Go's modern suites and two RSA-key-exchange ones (accepted, not
/// offered).
const CIPHER_SUITES: &str = "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_256_GCM_SHA384,TLS_RSA_WITH_AES_128_GCM_SHA256";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// `[Global]` as Deckhouse writes it from the connection settings (values quoted).
fn global(conf: &str) -> String {
    conf.lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| format!("{k} = \"{v}\"\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openstack_ccm_under_deckhouses_container_spec() {
    let cloud = shared().await;
    let s = setup(cloud, "deckhouse").await;
    let name = s.name("worker");
    s.sim()
        .create_servers(&[ServerSpec {
            fixed_ip: Some("10.0.207.11".into()),
            ..ServerSpec::active(name.clone())
        }])
        .expect("server");
    let conf = s.cluster.dir().join("deckhouse-cloud-config");
    std::fs::write(
        &conf,
        format!(
            "[Global]\n{}\
             [Networking]\n\
             public-network-name = \"public\"\n\
             internal-network-name = \"stratus-internal\"\n\
             internal-network-name = \"stratus-internal-2\"\n\
             ipv6-support-disabled = true\n\
             [LoadBalancer]\n\
             create-monitor = \"true\"\n\
             monitor-delay = \"2s\"\n\
             monitor-timeout = \"1s\"\n\
             enable-ingress-hostname = true\n\
             [BlockStorage]\n\
             ignore-volume-microversion = false\n\
             rescan-on-resize = true\n",
            global(s.cloud.cloud_conf().trim_start_matches("[Global]\n"))
        ),
    )
    .expect("cloud-config");
    let port = free_port();
    let args: Vec<String> = [
        "--leader-elect=true".to_string(),
        "--cluster-cidr=10.111.0.0/16".into(),
        "--allocate-node-cidrs=true".into(),
        "--configure-cloud-routes=true".into(),
        format!("--cloud-config={}", conf.display()),
        "--cloud-provider=openstack".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--tls-cipher-suites={CIPHER_SUITES}"),
        "--v=2".into(),
    ]
    .into();
    let mut ccm = stratus_scenarios::ccm::CcmProcess::start_on(
        &openstack_common::ccm_binary(),
        &s.cluster,
        Vec::new(),
        &args,
    )
    .expect("start");
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let healthz = wait_for("HTTPS /healthz", Duration::from_secs(60), || async {
        Ok(https::get(addr, "/healthz", None, &Trust::Any)
            .await
            .ok()
            .filter(|a| a.status == 200))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(healthz.body.trim(), "ok");

    s.node(&name, None, &[]).await;
    let node = s.initialized(&name, &ccm).await;
    let spec = node.spec.clone().unwrap_or_default();
    assert!(
        spec.provider_id
            .as_deref()
            .is_some_and(|p| p.starts_with("openstack:///")),
        "{spec:?}"
    );
    assert!(
        addresses(&node).contains(&("InternalIP".to_string(), "10.0.207.11".to_string())),
        "{:?}",
        addresses(&node)
    );
    wait_for("a pod CIDR", Duration::from_secs(30), || async {
        let n = stratus_scenarios::kube_fixture::get_node(&s.admin, &name).await?;
        Ok(n.and_then(|n| n.spec?.pod_cidr)
            .filter(|c| c.starts_with("10.111.")))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert!(ccm.try_exit().is_none(), "exited:\n{}", ccm.log());
}
