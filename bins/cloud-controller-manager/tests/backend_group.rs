//! The cluster's shared backend security group under concurrency: Classic ELBs created at once by
//! eight service workers on a cold start make the group exactly once (counted at the AWS proxy).

mod common;

use std::collections::BTreeMap;

use common::lb::{lb_setup, NS};
use stratus_scenarios::ec2_fixture;
use stratus_scenarios::service_fixture::create_lb_service;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_elbs_created_at_once_make_the_backend_group_once() {
    const SERVICES: usize = 20;
    let lb = lb_setup("race", 2).await;
    let names: Vec<String> = (0..SERVICES).map(|i| format!("web-{i:02}")).collect();
    for name in &names {
        create_lb_service(&lb.s.admin, NS, name, &[80], BTreeMap::new())
            .await
            .unwrap();
    }
    lb.s.env.reset_aws_request_counts().await.unwrap();
    // Cold start: no group exists and the CCM knows none; eight workers take the first eight
    // Services at once.
    let ccm = lb.ccm(&["--concurrent-service-syncs=8"]);
    for name in &names {
        lb.wait_ingress(name).await;
    }
    let counts = lb.s.env.aws_request_counts().await.unwrap();
    let creates = counts.get("ec2:CreateSecurityGroup").copied().unwrap_or(0);
    assert_eq!(
        creates,
        SERVICES as u64 + 1,
        "one group per ELB and one backend group, each created once: {counts:?}\n{}",
        ccm.log()
    );
    let backend = ec2_fixture::security_groups_named(&lb.s.ec2, "k8s-elb-backend-")
        .await
        .unwrap();
    assert_eq!(backend.len(), 1, "{backend:?}");
    let own = ec2_fixture::security_groups_named(&lb.s.ec2, "k8s-elb-a")
        .await
        .unwrap();
    assert_eq!(own.len(), SERVICES, "{own:?}");
    // The node group lets the backend group in once.
    let backend_id = ec2_fixture::security_group_id(&lb.s.ec2, &backend[0])
        .await
        .unwrap()
        .expect("backend group id");
    let sources = lb.node_group_sources().await;
    let rules = sources.iter().filter(|(g, _)| *g == backend_id).count();
    assert_eq!(rules, 1, "{sources:?}");
}
