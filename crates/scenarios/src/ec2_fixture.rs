//! EC2 set-up in moto: a VPC and subnet, tagged instances, state changes.

use anyhow::Context;
use aws_config::{BehaviorVersion, Region};
use aws_sdk_ec2::types::{
    Filter, InstanceStateName, InstanceType, Placement, ResourceType, Tag, TagSpecification,
};
use aws_sdk_ec2::Client;

/// The region every scenario uses.
pub const REGION: &str = "us-east-1";

/// An EC2 client talking to `endpoint` with moto's test credentials.
pub async fn client(endpoint: &str) -> Client {
    let creds = aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "scenario");
    let conf = aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(creds)
        .load()
        .await;
    Client::new(&conf)
}

/// One launched instance.
#[derive(Debug, Clone)]
pub struct Launched {
    pub id: String,
    pub private_ip: String,
    pub private_dns: String,
    pub zone: String,
    pub instance_type: String,
}

/// A VPC with one subnet in `zone`; returns the subnet ID.
pub async fn subnet(ec2: &Client, zone: &str) -> anyhow::Result<String> {
    Ok(subnets(ec2, &[zone]).await?.remove(0))
}

/// One VPC (10.0.0.0/16) with a /20 subnet in each zone; returns the subnet IDs in order.
pub async fn subnets(ec2: &Client, zones: &[&str]) -> anyhow::Result<Vec<String>> {
    let vpc = ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).context("vpc id")?;
    let mut out = Vec::new();
    for (n, zone) in zones.iter().enumerate() {
        let subnet = ec2
            .create_subnet()
            .vpc_id(vpc_id)
            .cidr_block(format!("10.0.{}.0/20", n * 16))
            .availability_zone(*zone)
            .send()
            .await?;
        out.push(
            subnet
                .subnet()
                .and_then(|s| s.subnet_id())
                .context("subnet id")?
                .to_string(),
        );
    }
    Ok(out)
}

/// An image ID moto knows.
pub async fn any_image(ec2: &Client) -> anyhow::Result<String> {
    let images = ec2.describe_images().owners("amazon").send().await?;
    Ok(images
        .images()
        .iter()
        .find_map(|i| i.image_id())
        .context("moto has no AMI")?
        .to_string())
}

/// Launches `count` instances tagged for `cluster_id` (when given) in `subnet`.
pub async fn launch(
    ec2: &Client,
    subnet: &str,
    zone: &str,
    count: i32,
    cluster_id: Option<&str>,
    instance_type: &str,
) -> anyhow::Result<Vec<Launched>> {
    let image = any_image(ec2).await?;
    let mut req = ec2
        .run_instances()
        .image_id(image)
        .min_count(count)
        .max_count(count)
        .subnet_id(subnet)
        .instance_type(InstanceType::from(instance_type))
        .placement(Placement::builder().availability_zone(zone).build());
    if let Some(id) = cluster_id {
        req = req.tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(
                    Tag::builder()
                        .key(format!("kubernetes.io/cluster/{id}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        );
    }
    let out = req.send().await.context("RunInstances")?;
    Ok(out
        .instances()
        .iter()
        .map(|i| Launched {
            id: i.instance_id().unwrap_or_default().to_string(),
            private_ip: i.private_ip_address().unwrap_or_default().to_string(),
            private_dns: i.private_dns_name().unwrap_or_default().to_string(),
            zone: i
                .placement()
                .and_then(|p| p.availability_zone())
                .unwrap_or(zone)
                .to_string(),
            instance_type: instance_type.to_string(),
        })
        .collect())
}

/// Stops instances.
pub async fn stop(ec2: &Client, ids: &[String]) -> anyhow::Result<()> {
    ec2.stop_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await?;
    Ok(())
}

/// Starts instances.
pub async fn start(ec2: &Client, ids: &[String]) -> anyhow::Result<()> {
    ec2.start_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await?;
    Ok(())
}

/// Terminates instances.
pub async fn terminate(ec2: &Client, ids: &[String]) -> anyhow::Result<()> {
    ec2.terminate_instances()
        .set_instance_ids(Some(ids.to_vec()))
        .send()
        .await?;
    Ok(())
}

/// The state of one instance.
pub async fn state(ec2: &Client, id: &str) -> anyhow::Result<Option<InstanceStateName>> {
    let out = ec2
        .describe_instances()
        .filters(Filter::builder().name("instance-id").values(id).build())
        .send()
        .await?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.state().and_then(|s| s.name()).cloned()))
}
