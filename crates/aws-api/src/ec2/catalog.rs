//! EC2 reads of EBS volumes and of the instance-type catalogue, across pages, each item read by
//! the caller's `read` as its page arrives (the CSI driver and the discoverer keep their own
//! compact forms).

use aws_sdk_ec2::types::{Filter, InstanceTypeInfo, Volume};
use stratus_cloud::CloudError;

use crate::ec2::Ec2;
use crate::pager::pages;

/// DescribeVolumes page size, EC2's largest.
const VOLUME_PAGE: i32 = 500;
/// DescribeInstanceTypes page size, EC2's largest.
const INSTANCE_TYPE_PAGE: i32 = 100;

impl Ec2 {
    /// All volumes matching every filter.
    pub async fn describe_volumes<T>(
        &self,
        filters: &[Filter],
        read: impl Fn(&Volume) -> Option<T>,
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeVolumes",
            |token| {
                self.client
                    .describe_volumes()
                    .set_filters(Some(filters.to_vec()))
                    .max_results(VOLUME_PAGE)
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(page.volumes().iter().filter_map(&read));
                page.next_token().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }

    /// Every instance type offered in the region.
    pub async fn describe_instance_types<T>(
        &self,
        read: impl Fn(&InstanceTypeInfo) -> Option<T>,
    ) -> Result<Vec<T>, CloudError> {
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeInstanceTypes",
            |token| {
                self.client
                    .describe_instance_types()
                    .max_results(INSTANCE_TYPE_PAGE)
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(page.instance_types().iter().filter_map(&read));
                page.next_token().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }
}
