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
    /// Instance ID.
    pub id: String,
    /// Primary private IP.
    pub private_ip: String,
    /// Private DNS name.
    pub private_dns: String,
    /// Availability zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
}

/// A VPC with one subnet in `zone`; returns the subnet ID.
pub async fn subnet(ec2: &Client, zone: &str) -> anyhow::Result<String> {
    Ok(subnets(ec2, &[zone]).await?.remove(0))
}

/// One VPC (10.0.0.0/16) with a /20 subnet in each zone; returns the subnet IDs in order.
/// moto, loaded by the suites running beside each other, now and then resets a connection in
/// the middle of an answer: the set-up is tried up to three times (a retry at worst leaves an
/// unused VPC behind).
pub async fn subnets(ec2: &Client, zones: &[&str]) -> anyhow::Result<Vec<String>> {
    let mut attempt = 1;
    loop {
        match try_subnets(ec2, zones).await {
            Ok(ids) => return Ok(ids),
            Err(e) if attempt < 3 => {
                eprintln!("subnet set-up failed (attempt {attempt}), trying again: {e:#}");
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn try_subnets(ec2: &Client, zones: &[&str]) -> anyhow::Result<Vec<String>> {
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
/// Launches `count` instances in batches of 250 (moto's and EC2's comfortable request size).
pub async fn launch_many(
    ec2: &Client,
    subnet: &str,
    zone: &str,
    count: usize,
    cluster_id: Option<&str>,
    instance_type: &str,
) -> anyhow::Result<Vec<Launched>> {
    let mut launched = Vec::with_capacity(count);
    while launched.len() < count {
        let n = (count - launched.len()).min(250) as i32;
        launched.extend(launch(ec2, subnet, zone, n, cluster_id, instance_type).await?);
    }
    Ok(launched)
}

/// Launches `count` instances into `subnet`, tagged for `cluster_id` when given.
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
                        .key(stratus_cloud::tags::cluster_tag_key(id))
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

/// Makes every subnet of the subnet's VPC public: an internet gateway and a default route in the
/// main route table (what internet-facing load balancers need).
pub async fn make_public(ec2: &Client, subnet: &str) -> anyhow::Result<String> {
    let out = ec2.describe_subnets().subnet_ids(subnet).send().await?;
    let vpc = out
        .subnets()
        .first()
        .and_then(|s| s.vpc_id())
        .context("subnet vpc")?
        .to_string();
    let igw = ec2.create_internet_gateway().send().await?;
    let igw_id = igw
        .internet_gateway()
        .and_then(|g| g.internet_gateway_id())
        .context("igw id")?
        .to_string();
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw_id)
        .vpc_id(&vpc)
        .send()
        .await?;
    let tables = ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(&vpc).build())
        .filters(
            Filter::builder()
                .name("association.main")
                .values("true")
                .build(),
        )
        .send()
        .await?;
    let main = tables
        .route_tables()
        .first()
        .and_then(|t| t.route_table_id())
        .context("main route table")?
        .to_string();
    ec2.create_route()
        .route_table_id(&main)
        .destination_cidr_block("0.0.0.0/0")
        .gateway_id(&igw_id)
        .send()
        .await?;
    Ok(vpc)
}

/// Every security group whose name starts with `prefix`.
pub async fn security_groups_named(ec2: &Client, prefix: &str) -> anyhow::Result<Vec<String>> {
    let out = ec2.describe_security_groups().send().await?;
    Ok(out
        .security_groups()
        .iter()
        .filter_map(|g| g.group_name())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect())
}

/// The ID of the security group named exactly `name`, if any.
pub async fn security_group_id(ec2: &Client, name: &str) -> anyhow::Result<Option<String>> {
    let out = ec2
        .describe_security_groups()
        .filters(Filter::builder().name("group-name").values(name).build())
        .send()
        .await?;
    Ok(out
        .security_groups()
        .first()
        .and_then(|g| g.group_id())
        .map(str::to_string))
}

/// Ingress rules of a group that have another group as their source: (source, description).
pub async fn group_sources(ec2: &Client, group: &str) -> anyhow::Result<Vec<(String, String)>> {
    let out = ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await?;
    Ok(out
        .security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| p.user_id_group_pairs())
        .filter_map(|p| {
            Some((
                p.group_id()?.to_string(),
                p.description().unwrap_or("").to_string(),
            ))
        })
        .collect())
}

/// Ingress rules of a group with an address range as source: (protocol, from port, CIDR), sorted.
pub async fn cidr_rules(ec2: &Client, group: &str) -> anyhow::Result<Vec<(String, i32, String)>> {
    let out = ec2
        .describe_security_groups()
        .group_ids(group)
        .send()
        .await?;
    let mut rules: Vec<(String, i32, String)> = out
        .security_groups()
        .iter()
        .flat_map(|g| g.ip_permissions())
        .flat_map(|p| {
            p.ip_ranges().iter().filter_map(|r| {
                Some((
                    p.ip_protocol().unwrap_or("").to_string(),
                    p.from_port().unwrap_or(-1),
                    r.cidr_ip()?.to_string(),
                ))
            })
        })
        .collect();
    rules.sort();
    Ok(rules)
}

/// The security groups of an instance.
pub async fn instance_groups(ec2: &Client, id: &str) -> anyhow::Result<Vec<String>> {
    let out = ec2.describe_instances().instance_ids(id).send().await?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .flat_map(|i| i.security_groups())
        .filter_map(|g| g.group_id().map(str::to_string))
        .collect())
}

/// A security group for nodes in the subnet's VPC, tagged for the cluster (the one that gets
/// load-balancer rules).
pub async fn node_security_group(
    ec2: &Client,
    subnet: &str,
    cluster: &str,
) -> anyhow::Result<String> {
    let out = ec2.describe_subnets().subnet_ids(subnet).send().await?;
    let vpc = out
        .subnets()
        .first()
        .and_then(|s| s.vpc_id())
        .context("subnet vpc")?
        .to_string();
    let group = ec2
        .create_security_group()
        .vpc_id(vpc)
        .group_name(format!("nodes-{cluster}"))
        .description("cluster nodes")
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::SecurityGroup)
                .tags(
                    Tag::builder()
                        .key(stratus_cloud::tags::cluster_tag_key(cluster))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await?;
    Ok(group.group_id().context("group id")?.to_string())
}

/// Puts an instance in exactly these security groups.
pub async fn set_instance_groups(ec2: &Client, id: &str, groups: &[String]) -> anyhow::Result<()> {
    ec2.modify_instance_attribute()
        .instance_id(id)
        .set_groups(Some(groups.to_vec()))
        .send()
        .await?;
    Ok(())
}
