//! The AWS side of the end-to-end suite: moto (inside the test's network namespace) holding the
//! node's instance — a VPC and subnet around the node IP and an instance whose private address
//! is the node IP, tagged for the cluster — and the values that point a chart's pods at it.

use anyhow::{Context, Result};
use aws_sdk_ec2::types::{Placement, ResourceType, Tag, TagSpecification};
use stratus_testenv::node::netns::NODE_IP;

/// The cluster ID the instance is tagged with and the CCM is configured with.
pub const CLUSTER_ID: &str = "e2e";
/// The node's zone.
pub const ZONE: &str = "us-east-1a";

/// The node's instance: its ID.
pub async fn node_instance(ec2: &aws_sdk_ec2::Client) -> Result<String> {
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.30.0.0/16")
        .send()
        .await
        .context("CreateVpc")?;
    let vpc = vpc.vpc().and_then(|v| v.vpc_id()).context("a VPC ID")?;
    let subnet = ec2
        .create_subnet()
        .vpc_id(vpc)
        .cidr_block("10.30.1.0/24")
        .availability_zone(ZONE)
        .send()
        .await
        .context("CreateSubnet")?;
    let subnet = subnet
        .subnet()
        .and_then(|s| s.subnet_id())
        .context("a subnet ID")?;
    // Internet-facing load balancers go to public subnets (a route to an internet gateway).
    stratus_scenarios::ec2_fixture::make_public(ec2, subnet).await?;
    let image = stratus_scenarios::ec2_fixture::any_image(ec2).await?;
    let out = ec2
        .run_instances()
        .image_id(image)
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet)
        .private_ip_address(NODE_IP.to_string())
        .instance_type("m5.large".into())
        .placement(Placement::builder().availability_zone(ZONE).build())
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(
                    Tag::builder()
                        .key(format!("kubernetes.io/cluster/{CLUSTER_ID}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .context("RunInstances")?;
    let instance = out.instances().first().context("an instance")?;
    anyhow::ensure!(
        instance.private_ip_address() == Some(NODE_IP.to_string().as_str()),
        "moto gave the instance {:?}, not the node IP",
        instance.private_ip_address()
    );
    Ok(instance.instance_id().context("an instance ID")?.to_owned())
}

/// A chart's `env:` list pointing the AWS SDK at the test's AWS endpoint with moto's
/// credentials (the pods run on the host network of the test's namespace, where the endpoint
/// listens).
pub fn env_values(vars: &[(String, String)]) -> serde_json::Value {
    serde_json::Value::Array(
        vars.iter()
            .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
            .collect(),
    )
}

/// The AWS variables for a pod on the pod network: moto's credentials with the endpoint
/// replaced by `relay` (the node IP's relay to the test's loopback endpoint).
pub fn pod_env(
    aws: &stratus_testenv::AwsEnv,
    relay: &stratus_testenv::node::forward::NodeForward,
) -> Vec<(String, String)> {
    aws.env_vars()
        .into_iter()
        .map(|(k, v)| {
            if k == "AWS_ENDPOINT_URL" {
                (k, relay.http_url())
            } else {
                (k, v)
            }
        })
        .collect()
}

/// A relay on the node IP to the test's AWS endpoint (kept alive by the caller) and the AWS
/// variables that send a pod on the pod network through it.
pub async fn pod_network_access(
    aws: &stratus_testenv::AwsEnv,
) -> Result<(
    stratus_testenv::node::forward::NodeForward,
    Vec<(String, String)>,
)> {
    let endpoint = aws.aws_endpoint().trim_start_matches("http://").parse()?;
    let relay = stratus_testenv::node::forward::NodeForward::start(endpoint).await?;
    let env = pod_env(aws, &relay);
    Ok((relay, env))
}
