//! The node and node-lifecycle controllers with `--cloud-provider=dvp`: a real tenant
//! kube-apiserver, a real parent kube-apiserver with the generated virtualization CRDs and the
//! platform simulator, the CCM binary as a process under the shipped RBAC in the tenant and the
//! shipped least-privilege parent Role (`deploy/dvp/parent-rbac.yaml`) in the parent, its
//! kubeconfig passed base64 in `DVP_KUBERNETES_CONFIG_BASE64` as Deckhouse does.

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::{Api, DeleteParams};
use kube::Client;
use stratus_dvp_api::VirtualMachine;
use stratus_scenarios::behaviour;
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::parent_role_rules;
use stratus_scenarios::kube_fixture::{self, addresses, get_node, has_taint, UNINITIALIZED};
use stratus_scenarios::{service_fixture, wait_for};
use stratus_testenv::{DvpEnv, Identity};

const WAIT: Duration = Duration::from_secs(60);

fn ccm_binary() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_BIN_EXE_cloud-controller-manager"))
}

/// The parent identity the CCM runs as: a ServiceAccount bound to the shipped parent Role.
const PARENT_ACCOUNT: &str = "stratus-dvp-cloud-controller-manager";

async fn setup() -> (DvpEnv, Client, Vec<(String, String)>) {
    let env = DvpEnv::start().await.expect("DVP environment");
    let vars = env
        .bound_account_env(PARENT_ACCOUNT, parent_role_rules().unwrap())
        .await
        .expect("the shipped parent Role");
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    (env, admin, vars)
}

fn start_ccm(env: &DvpEnv, vars: &[(String, String)]) -> CcmProcess {
    start_ccm_with(
        env,
        vars,
        &[
            "--node-monitor-period=500ms",
            "--leader-elect-lease-duration=2s",
            "--leader-elect-renew-deadline=1500ms",
            "--leader-elect-retry-period=500ms",
        ],
    )
}

/// The CCM with the node controllers and `extra` flags (none: the default periods).
fn start_ccm_with(env: &DvpEnv, vars: &[(String, String)], extra: &[&str]) -> CcmProcess {
    let args: Vec<String> = [
        "--cloud-provider=dvp",
        "--controllers=cloud-node,cloud-node-lifecycle",
        "--v=4",
    ]
    .iter()
    .chain(extra)
    .map(|s| s.to_string())
    .collect();
    CcmProcess::start_on(&ccm_binary(), &env.tenant, vars.to_vec(), &args).expect("start ccm")
}

async fn fixture(env: &DvpEnv, prefix: &str) -> DvpFixture {
    DvpFixture::new(env.parent_admin().await.unwrap(), env.namespace(), prefix)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_nodes_are_initialised_tainted_when_stopped_and_deleted_with_their_vm() {
    let (env, admin, vars) = setup().await;
    let fixture = fixture(&env, "join").await;
    let ccm = start_ccm(&env, &vars);

    // A node found by its hostname label gets the VM's address three ways and its providerID.
    fixture.create_vm("named-vm", "named-node").await.unwrap();
    let ip = fixture.running_ip("named-vm").await.unwrap();
    kube_fixture::create_uninitialized_node(&admin, "named-node", &[], BTreeMap::new())
        .await
        .unwrap();
    let node = wait_for("named-node initialised", WAIT, || async {
        Ok(get_node(&admin, "named-node")
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    assert_eq!(
        node.spec.as_ref().and_then(|s| s.provider_id.as_deref()),
        Some("dvp://named-vm")
    );
    let mut got = addresses(&node);
    got.sort();
    let mut want = vec![
        ("ExternalIP".to_string(), ip.clone()),
        ("Hostname".to_string(), "named-node".to_string()),
        ("InternalIP".to_string(), ip),
    ];
    want.sort();
    assert_eq!(got, want);

    // The scenario every provider passes: join, stop → shutdown taint, start → untaint,
    // VM deleted → Node deleted.
    behaviour::nodes_join_stop_and_leave(&fixture, &admin)
        .await
        .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_lifecycle_is_prompt_and_cheap_at_the_default_flags() {
    let (env, admin, vars) = setup().await;
    let user = format!("system:serviceaccount:{}:{PARENT_ACCOUNT}", env.namespace());
    let fixture = fixture(&env, "defaults")
        .await
        .counting_reads_of(env.parent.audit_log(), &user);
    let ccm = start_ccm_with(&env, &vars, &[]);
    match behaviour::lifecycle_is_prompt_and_cheap(&fixture, &admin).await {
        Ok(cost) => eprintln!("DVP lifecycle at the default flags: {cost:?}"),
        Err(e) => panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()),
    }
}

/// How long the parent apiserver stays down.
const PARENT_OUTAGE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_parent_outage_deletes_no_node_and_converges_after() {
    let (mut env, admin, vars) = setup().await;
    let fixture = fixture(&env, "outage").await;
    fixture.create_vm("outage-vm", "outage-node").await.unwrap();
    fixture.running_ip("outage-vm").await.unwrap();
    kube_fixture::create_uninitialized_node(&admin, "outage-node", &[], BTreeMap::new())
        .await
        .unwrap();
    let ccm = start_ccm(&env, &vars);
    wait_for("outage-node initialised", WAIT, || async {
        Ok(get_node(&admin, "outage-node")
            .await?
            .filter(|n| !has_taint(n, UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
    drop(ccm);

    // The parent goes away; a CCM (re)started now has an empty cache and must not take "no VM
    // in my cache" for "VM gone" while the node is NotReady.
    service_fixture::set_ready(&admin, "outage-node", false)
        .await
        .unwrap();
    env.parent.stop_apiserver();
    let ccm = start_ccm(&env, &vars);
    // As long as the issue asks: a minute of outage, many lifecycle passes.
    let hold = tokio::time::Instant::now() + PARENT_OUTAGE;
    while tokio::time::Instant::now() < hold {
        let node = get_node(&admin, "outage-node").await.unwrap();
        assert!(
            node.is_some(),
            "the node was deleted while the parent was unreachable\n--- ccm log ---\n{}",
            ccm.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        ccm.log().contains("outage-node"),
        "the lifecycle controller looked at the node during the outage\n--- ccm log ---\n{}",
        ccm.log()
    );

    // The parent is back: deleting the VM now deletes the node.
    env.parent.start_apiserver().await.unwrap();
    Api::<VirtualMachine>::namespaced(env.parent_admin().await.unwrap(), env.namespace())
        .delete("outage-vm", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("outage-node deleted after the outage", WAIT, || async {
        Ok(get_node(&admin, "outage-node")
            .await?
            .is_none()
            .then_some(()))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- ccm log ---\n{}", ccm.log()));
}
