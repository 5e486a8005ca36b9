//! The cloud-controller-manager started exactly as Deckhouse's modules start it. AWS: as the
//! cloud-provider-aws module
//! starts it: the helm_lib fixed args (`--leader-elect=true --bind-address=127.0.0.1
//! --secure-port=…`) and the module's (`--cluster-cidr --allocate-node-cidrs=true
//! --configure-cloud-routes=true --cloud-config --cloud-provider=aws --v=2`), the cloud-config
//! keys Deckhouse's Secret holds (quoted `KubernetesClusterID`, `ElbSecurityGroup`, the
//! lower-case `publicNetworkAllowList`, no region), under the shipped RBAC. It must answer the
//! HTTPS `/healthz` probe, initialise a node (pod CIDR from the cluster CIDR included) and stay
//! up. Test stand-ins: a free loopback port for 10471, `AWS_REGION` and the endpoint of moto for
//! IMDS's region, the kubeconfig of the ServiceAccount's identity. DVP: as cloud-provider-dvp
//! (`--allow-untagged-cloud=true --configure-cloud-routes=false
//! --controllers=cloud-node,cloud-node-lifecycle,service-lb-controller --v=4`, the parent's
//! kubeconfig in `DVP_KUBERNETES_CONFIG_BASE64`, `DVP_NAMESPACE`, `CLUSTER_UUID`).

mod common;

use common::serving::{first_answer, free_port};
use common::{ccm_binary, setup, WAIT};
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::dvp_fixture::DvpFixture;
use stratus_scenarios::dvp_rbac::parent_role_rules;
use stratus_scenarios::https::Trust;
use stratus_scenarios::{ec2_fixture, kube_fixture, wait_for};
use stratus_testenv::{DvpEnv, Identity};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_ccm_under_deckhouses_container_spec() {
    let s = setup("deckhouse-aws", true).await;
    let elb_group = ec2_fixture::node_security_group(&s.ec2, &s.subnet, &s.cluster_id)
        .await
        .unwrap();
    let config = s.env.dir().join("deckhouse-cloud-config");
    std::fs::write(
        &config,
        format!(
            "[Global]\nKubernetesClusterID = \"{}\"\nElbSecurityGroup = \"{elb_group}\"\npublicNetworkAllowList = \"10.0.0.0/8,192.168.0.0/16\"\n",
            s.cluster_id
        ),
    )
    .unwrap();
    let port = free_port();
    let args: Vec<String> = [
        "--leader-elect=true".to_string(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--cluster-cidr=10.111.0.0/16".into(),
        "--allocate-node-cidrs=true".into(),
        "--configure-cloud-routes=true".into(),
        format!("--cloud-config={}", config.display()),
        "--cloud-provider=aws".into(),
        "--v=2".into(),
    ]
    .into();
    let ccm = CcmProcess::start(&ccm_binary(), &s.env, &args).expect("start");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let healthz = first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert_eq!(healthz.status, 200, "{}", ccm.log());

    let name = s.launch(1).await[0].id.clone();
    kube_fixture::create_uninitialized_node(&s.admin, &name, &[], Default::default())
        .await
        .unwrap();
    let node = wait_for("the node initialised with a pod CIDR", WAIT, || async {
        Ok(kube_fixture::get_node(&s.admin, &name).await?.filter(|n| {
            !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)
                && n.spec.as_ref().and_then(|s| s.pod_cidr.as_ref()).is_some()
        }))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    let spec = node.spec.unwrap();
    assert!(
        spec.provider_id.unwrap().starts_with("aws:///"),
        "{}",
        ccm.log()
    );
    assert!(spec.pod_cidr.unwrap().starts_with("10.111."));
    let mut ccm = ccm;
    assert!(ccm.try_exit().is_none(), "exited:\n{}", ccm.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dvp_ccm_under_deckhouses_container_spec() {
    let env = DvpEnv::start().await.expect("DVP environment");
    let mut vars = env
        .bound_account_env(
            "stratus-dvp-cloud-controller-manager",
            parent_role_rules().unwrap(),
        )
        .await
        .expect("the shipped parent Role");
    vars.push((
        "CLUSTER_UUID".into(),
        "c0ffee00-0000-4000-8000-0000000000d8".into(),
    ));
    let admin = env.tenant.kube_client(Identity::Admin).await.unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &kube_fixture::repo_root().join("deploy/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let port = free_port();
    let args: Vec<String> = [
        "--leader-elect=true".to_string(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--cloud-provider=dvp".into(),
        "--allow-untagged-cloud=true".into(),
        "--configure-cloud-routes=false".into(),
        "--controllers=cloud-node,cloud-node-lifecycle,service-lb-controller".into(),
        "--v=4".into(),
    ]
    .into();
    let ccm = CcmProcess::start_on(&ccm_binary(), &env.tenant, vars, &args).expect("start");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let healthz = first_answer(&ccm, addr, "/healthz", None, &Trust::Any).await;
    assert_eq!(healthz.status, 200, "{}", ccm.log());

    let fixture = DvpFixture::new(env.parent_admin().await.unwrap(), env.namespace(), "dh");
    fixture.create_vm("dh-vm", "dh-node").await.unwrap();
    kube_fixture::create_uninitialized_node(&admin, "dh-node", &[], Default::default())
        .await
        .unwrap();
    let node = wait_for("dh-node initialised", WAIT, || async {
        Ok(kube_fixture::get_node(&admin, "dh-node")
            .await?
            .filter(|n| !kube_fixture::has_taint(n, kube_fixture::UNINITIALIZED)))
    })
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n{}", ccm.log()));
    assert_eq!(
        node.spec.and_then(|s| s.provider_id).as_deref(),
        Some("dvp://dh-vm")
    );
    // service-lb-controller (upstream's name) runs: its informer is a readiness condition.
    let ready = first_answer(&ccm, addr, "/readyz?verbose", None, &Trust::Any).await;
    assert!(
        ready.body.contains("service-informer-sync"),
        "{}\n{}",
        ready.body,
        ccm.log()
    );
    let mut ccm = ccm;
    assert!(ccm.try_exit().is_none(), "exited:\n{}", ccm.log());
}
