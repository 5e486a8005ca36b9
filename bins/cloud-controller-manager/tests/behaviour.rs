//! The provider-neutral behavioural scenarios (`stratus_scenarios::behaviour`) on AWS: the CCM
//! binary under the shipped RBAC against moto, through the AWS [`CloudFixture`]. The same
//! scenarios run on the fake cloud in `crates/ccm/tests`, and on each new provider.
//!
//! [`CloudFixture`]: stratus_scenarios::cloud_fixture::CloudFixture

mod common;

use common::{setup, ZONE};
use stratus_scenarios::cloud_fixture::AwsFixture;
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::route_fixture as rf;
use stratus_scenarios::{behaviour, ec2_fixture};

#[tokio::test]
async fn aws_passes_the_behavioural_scenarios() {
    let s = setup("behaviour", true).await;
    ec2_fixture::make_public(&s.ec2, &s.subnet).await.unwrap();
    let node_group = ec2_fixture::node_security_group(&s.ec2, &s.subnet, &s.cluster_id)
        .await
        .unwrap();
    let vpc = rf::vpc_of_subnet(&s.ec2, &s.subnet).await.unwrap();
    let table = rf::cluster_route_table(&s.ec2, &vpc, &s.cluster_id)
        .await
        .unwrap();
    let fixture = AwsFixture {
        ec2: s.ec2.clone(),
        lb: LbClients::new(s.env.moto_endpoint()).await,
        subnet: s.subnet.clone(),
        zone: ZONE.into(),
        cluster_id: s.cluster_id.clone(),
        route_tables: vec![table],
        node_group,
        proxy: s.env.aws_endpoint().into(),
    };
    let ccm = s.start_ccm(&["--cluster-cidr=10.244.0.0/16"]);
    let result = async {
        behaviour::nodes_join_stop_and_leave(&fixture, &s.admin).await?;
        behaviour::load_balancer_follows_its_service(&fixture, &s.admin, "default").await?;
        behaviour::pod_cidr_is_routed_to_its_machine(&fixture, &s.admin, "10.244.7.0/24").await
    }
    .await;
    if let Err(e) = result {
        panic!("{e:#}\n--- ccm log ---\n{}", ccm.log());
    }
}

#[tokio::test]
async fn aws_lifecycle_is_prompt_and_cheap_at_the_default_flags() {
    let s = setup("behaviour-defaults", true).await;
    let node_group = ec2_fixture::node_security_group(&s.ec2, &s.subnet, &s.cluster_id)
        .await
        .unwrap();
    let fixture = AwsFixture {
        ec2: s.ec2.clone(),
        lb: LbClients::new(s.env.moto_endpoint()).await,
        subnet: s.subnet.clone(),
        zone: ZONE.into(),
        cluster_id: s.cluster_id.clone(),
        route_tables: Vec::new(),
        node_group,
        proxy: s.env.aws_endpoint().into(),
    };
    let ccm = s.start_ccm_at_defaults(&[]);
    match behaviour::lifecycle_is_prompt_and_cheap(&fixture, &s.admin).await {
        Ok(cost) => eprintln!("AWS lifecycle at the default flags: {cost:?}"),
        Err(e) => panic!(
            "{e:#}\n--- requests ---\n{:?}\n--- ccm log ---\n{}",
            s.env.aws_request_counts().await,
            ccm.log()
        ),
    }
}
