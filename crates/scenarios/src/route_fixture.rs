//! Route tables in moto: tables in a subnet's VPC, tagged or not, foreign routes that must
//! survive, and reads of what the tables and instances hold.

use std::collections::BTreeMap;

use anyhow::Context;
use aws_sdk_ec2::types::{ResourceType, Tag, TagSpecification};
use aws_sdk_ec2::Client;

/// The VPC of `subnet`.
pub async fn vpc_of_subnet(ec2: &Client, subnet: &str) -> anyhow::Result<String> {
    let out = ec2.describe_subnets().subnet_ids(subnet).send().await?;
    Ok(out
        .subnets()
        .first()
        .and_then(|s| s.vpc_id())
        .context("subnet without VPC")?
        .to_string())
}

/// A route table in `vpc` with `tags`; returns its ID.
pub async fn route_table(ec2: &Client, vpc: &str, tags: &[(&str, &str)]) -> anyhow::Result<String> {
    let mut req = ec2.create_route_table().vpc_id(vpc);
    if !tags.is_empty() {
        let mut spec = TagSpecification::builder().resource_type(ResourceType::RouteTable);
        for (k, v) in tags {
            spec = spec.tags(Tag::builder().key(*k).value(*v).build());
        }
        req = req.tag_specifications(spec.build());
    }
    let out = req.send().await.context("CreateRouteTable")?;
    Ok(out
        .route_table()
        .and_then(|t| t.route_table_id())
        .context("route table ID")?
        .to_string())
}

/// A route table tagged `kubernetes.io/cluster/<cluster_id>=owned`.
pub async fn cluster_route_table(
    ec2: &Client,
    vpc: &str,
    cluster_id: &str,
) -> anyhow::Result<String> {
    route_table(
        ec2,
        vpc,
        &[(&stratus_cloud::tags::cluster_tag_key(cluster_id), "owned")],
    )
    .await
}

/// An internet gateway attached to `vpc`; returns its ID.
pub async fn internet_gateway(ec2: &Client, vpc: &str) -> anyhow::Result<String> {
    let out = ec2.create_internet_gateway().send().await?;
    let igw = out
        .internet_gateway()
        .and_then(|g| g.internet_gateway_id())
        .context("internet gateway ID")?
        .to_string();
    ec2.attach_internet_gateway()
        .internet_gateway_id(&igw)
        .vpc_id(vpc)
        .send()
        .await?;
    Ok(igw)
}

/// Adds a route to a gateway (a route the CCM must never touch).
pub async fn add_gateway_route(
    ec2: &Client,
    table: &str,
    destination: &str,
    gateway: &str,
) -> anyhow::Result<()> {
    ec2.create_route()
        .route_table_id(table)
        .destination_cidr_block(destination)
        .gateway_id(gateway)
        .send()
        .await
        .with_context(|| format!("CreateRoute {destination} -> {gateway}"))?;
    Ok(())
}

/// Adds an IPv4 or IPv6 route to an instance.
pub async fn add_instance_route(
    ec2: &Client,
    table: &str,
    destination: &str,
    instance: &str,
) -> anyhow::Result<()> {
    let mut req = ec2
        .create_route()
        .route_table_id(table)
        .instance_id(instance);
    req = if destination.contains(':') {
        req.destination_ipv6_cidr_block(destination)
    } else {
        req.destination_cidr_block(destination)
    };
    req.send()
        .await
        .with_context(|| format!("CreateRoute {destination} -> {instance}"))?;
    Ok(())
}

/// Destination → target (instance ID, gateway ID, or `blackhole`) of every route of `table`.
pub async fn routes(ec2: &Client, table: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let out = ec2
        .describe_route_tables()
        .route_table_ids(table)
        .send()
        .await?;
    let table = out.route_tables().first().context("no such route table")?;
    Ok(table
        .routes()
        .iter()
        .filter_map(|r| {
            let dest = r
                .destination_cidr_block()
                .or(r.destination_ipv6_cidr_block())?;
            let target = if r.state() == Some(&aws_sdk_ec2::types::RouteState::Blackhole) {
                "blackhole"
            } else {
                r.instance_id()
                    .or(r.gateway_id())
                    .or(r.nat_gateway_id())
                    .unwrap_or("?")
            };
            Some((dest.to_string(), target.to_string()))
        })
        .collect())
}

/// The instance's SourceDestCheck attribute.
pub async fn source_dest_check(ec2: &Client, instance: &str) -> anyhow::Result<Option<bool>> {
    let out = ec2
        .describe_instance_attribute()
        .instance_id(instance)
        .attribute(aws_sdk_ec2::types::InstanceAttributeName::SourceDestCheck)
        .send()
        .await?;
    Ok(out.source_dest_check().and_then(|v| v.value()))
}
