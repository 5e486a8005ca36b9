//! The narrow seam over the EC2 SDK: instances, their topology and the zones here; security
//! groups, subnets and network interfaces in [`network`], route tables in [`routes`], volumes
//! and instance types in [`catalog`], tags on existing resources in `tags`; paging inside.

use std::collections::HashMap;

use aws_sdk_ec2::types::Filter;
use stratus_cloud::CloudError;

use crate::call::AwsApi;
use crate::pager::pages;

mod catalog;
mod network;
mod routes;
mod tags;

pub use network::{ec2_tags, ignore_code, InterfaceGroups, SecurityGroup};
pub use tags::MAX_TAG_RESOURCES;

/// DescribeInstances page size, EC2's largest: one call lists a cluster of 1000 instances, so
/// the periodic listing of an idle cluster of that size costs one request.
const PAGE_SIZE: i32 = 1000;

/// EC2 access through the shared call guard.
#[derive(Debug, Clone)]
pub struct Ec2 {
    client: aws_sdk_ec2::Client,
    api: AwsApi,
}

/// Builds one server-side filter.
pub fn filter(name: &str, values: impl IntoIterator<Item = impl Into<String>>) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.into_iter().map(Into::into).collect()))
        .build()
}

impl Ec2 {
    /// Wraps an SDK client.
    pub fn new(client: aws_sdk_ec2::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// All instances matching every filter, across pages, each read by `read` as its page
    /// arrives (so a large listing keeps only the caller's compact form).
    pub async fn describe_instances<T>(
        &self,
        filters: &[Filter],
        read: impl Fn(&aws_sdk_ec2::types::Instance) -> Option<T>,
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeInstances",
            |token| {
                self.client
                    .describe_instances()
                    .set_filters(Some(filters.to_vec()))
                    .max_results(PAGE_SIZE)
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(
                    page.reservations()
                        .iter()
                        .flat_map(|r| r.instances())
                        .filter_map(&read),
                );
                page.next_token().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }

    /// The network nodes of these instances (at most 100 IDs), farthest first, for those EC2
    /// describes a topology of; across pages.
    pub async fn instance_topology(
        &self,
        ids: &[&str],
    ) -> Result<Vec<(String, Vec<String>)>, CloudError> {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeInstanceTopology",
            |token| {
                self.client
                    .describe_instance_topology()
                    .set_instance_ids(Some(ids.clone()))
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(page.instances().iter().filter_map(|t| {
                    Some((t.instance_id()?.to_string(), t.network_nodes().to_vec()))
                }));
                page.next_token().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }

    /// Zone name → zone ID for every zone of the region.
    pub async fn zone_ids(&self) -> Result<HashMap<String, String>, CloudError> {
        let out = self
            .api
            .call("DescribeAvailabilityZones", || {
                self.client.describe_availability_zones().send()
            })
            .await?;
        Ok(out
            .availability_zones()
            .iter()
            .filter_map(|z| Some((z.zone_name()?.to_string(), z.zone_id()?.to_string())))
            .collect())
    }
}
