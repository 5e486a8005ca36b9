//! The one EC2 read the networking rules need beyond the shared seam: the network interfaces
//! of targets (by private address or by instance) with their security groups, through the
//! shared call guard. Kept here, not in the AWS provider, so the CCM's IAM policy does not grant
//! an action only this controller calls.

use aws_sdk_ec2::types::Filter;
use stratus_aws_api::pager::pages;
use stratus_aws_api::AwsApi;
use stratus_cloud::CloudError;

/// A network interface's address, instance and security groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceGroups {
    /// Its primary private address.
    pub private_ip: String,
    /// The instance it is attached to.
    pub instance_id: Option<String>,
    /// The instance's primary interface (device index 0).
    pub primary: bool,
    /// Its security groups.
    pub groups: Vec<String>,
}

/// EC2 access for network interfaces.
#[derive(Debug, Clone)]
pub struct EniApi {
    client: aws_sdk_ec2::Client,
    api: AwsApi,
}

impl EniApi {
    /// Wraps an SDK client.
    pub fn new(client: aws_sdk_ec2::Client, api: AwsApi) -> Self {
        Self { client, api }
    }

    /// The network interfaces whose `filter_name` (`addresses.private-ip-address` or
    /// `attachment.instance-id`) is one of `values`, with their security groups (200 values
    /// per call, every page).
    pub async fn interfaces_by(
        &self,
        filter_name: &str,
        values: &[String],
    ) -> Result<Vec<InterfaceGroups>, CloudError> {
        let mut found = Vec::new();
        for chunk in values.chunks(200) {
            let filter = Filter::builder()
                .name(filter_name)
                .set_values(Some(chunk.to_vec()))
                .build();
            pages(
                &self.api,
                "DescribeNetworkInterfaces",
                |token| {
                    self.client
                        .describe_network_interfaces()
                        .filters(filter.clone())
                        .set_next_token(token)
                        .send()
                },
                |out| {
                    found.extend(out.network_interfaces().iter().map(|n| {
                        InterfaceGroups {
                            private_ip: n.private_ip_address().unwrap_or_default().to_string(),
                            instance_id: n
                                .attachment()
                                .and_then(|a| a.instance_id())
                                .map(str::to_string),
                            primary: n.attachment().and_then(|a| a.device_index()) == Some(0),
                            groups: n
                                .groups()
                                .iter()
                                .filter_map(|g| g.group_id().map(str::to_string))
                                .collect(),
                        }
                    }));
                    out.next_token().map(str::to_string)
                },
            )
            .await?;
        }
        Ok(found)
    }
}
