//! `--use-service-account-credentials` against a real kube-apiserver: each controller writes as
//! its own kube-system ServiceAccount (authorised only by the apiserver's bootstrap
//! `system:controller:*` roles), while the CCM's identity only watches and mints the tokens.

mod common;

use std::collections::BTreeMap;

use common::lb::{lb_setup, NS};
use common::WAIT;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::Api;
use stratus_scenarios::service_fixture::create_lb_service;
use stratus_scenarios::wait_for;
use stratus_testenv::Identity;

fn account(name: &str) -> String {
    format!("system:serviceaccount:kube-system:{name}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_controller_writes_as_its_own_service_account() {
    let lb = lb_setup("sa-creds", 1).await;
    let ccm = lb.s.start_ccm(&[
        "--controllers=cloud-node,service",
        "--use-service-account-credentials",
    ]);
    create_lb_service(&lb.s.admin, NS, "web", &[80], BTreeMap::new())
        .await
        .unwrap();
    lb.s.initialized_node().await;
    let ingress = wait_for("ingress of web", WAIT, || async {
        Ok(
            stratus_scenarios::service_fixture::get_service(&lb.s.admin, NS, "web")
                .await?
                .filter(|s| stratus_scenarios::service_fixture::ingress_hostname(s).is_some()),
        )
    })
    .await;
    assert!(ingress.is_ok(), "{ingress:?}\n{}", ccm.log());

    let env = &lb.s.env;
    let node_controller = account("node-controller");
    let service_controller = account("service-controller");
    assert!(env.kube_writes_to(&node_controller, "nodes").unwrap() > 0);
    assert!(env.kube_writes_to(&service_controller, "services").unwrap() > 0);
    assert_eq!(env.kube_writes_to(&service_controller, "nodes").unwrap(), 0);
    assert_eq!(env.kube_writes_to(&node_controller, "services").unwrap(), 0);
    // The CCM's own identity made the accounts and their tokens, and wrote nothing else but
    // leases (left out of the count).
    let ccm = Identity::CloudControllerManager.username();
    assert_eq!(env.kube_writes_to(ccm, "nodes").unwrap(), 0);
    assert_eq!(env.kube_writes_to(ccm, "services").unwrap(), 0);
    let minted = env.kube_writes_to(ccm, "serviceaccounts").unwrap();
    // Two accounts created and one token each (the subresource counts as the resource).
    assert_eq!(minted, 4, "creates and TokenRequests by the CCM");
    assert_eq!(env.kube_writes_by(ccm).unwrap(), minted);

    let accounts: Api<ServiceAccount> = Api::namespaced(lb.s.admin.clone(), "kube-system");
    for sa in ["node-controller", "service-controller"] {
        assert!(accounts.get_opt(sa).await.unwrap().is_some(), "{sa}");
    }
}
