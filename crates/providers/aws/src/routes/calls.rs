//! The EC2 calls of the route capability, on the shared [`Ec2`] seam (counted, retried and
//! classified like every other call).

use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, RouteTable};
use stratus_cloud::{Cidr, CloudError};

use crate::ec2::Ec2;

/// DescribeRouteTables page size (the API's maximum).
const PAGE_SIZE: i32 = 100;

impl Ec2 {
    /// Every route table matching all `filters`, across pages.
    pub(crate) async fn describe_route_tables(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<RouteTable>, CloudError> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self
                .api
                .call("DescribeRouteTables", || {
                    self.client
                        .describe_route_tables()
                        .set_filters(Some(filters.to_vec()))
                        .max_results(PAGE_SIZE)
                        .set_next_token(token.clone())
                        .send()
                })
                .await?;
            out.extend(page.route_tables().iter().cloned());
            token = page
                .next_token()
                .filter(|t| !t.is_empty())
                .map(str::to_string);
            if token.is_none() {
                return Ok(out);
            }
        }
    }

    /// CreateRoute: `destination` (IPv4 or IPv6) to `instance` in `table`.
    pub(crate) async fn create_route(
        &self,
        table: &str,
        destination: &Cidr,
        instance: &str,
    ) -> Result<(), CloudError> {
        let (v4, v6) = split(destination);
        self.api
            .call("CreateRoute", || {
                self.client
                    .create_route()
                    .route_table_id(table)
                    .set_destination_cidr_block(v4.clone())
                    .set_destination_ipv6_cidr_block(v6.clone())
                    .instance_id(instance)
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// ReplaceRoute: points the route for `destination` in `table` at `instance`.
    pub(crate) async fn replace_route(
        &self,
        table: &str,
        destination: &Cidr,
        instance: &str,
    ) -> Result<(), CloudError> {
        let (v4, v6) = split(destination);
        self.api
            .call("ReplaceRoute", || {
                self.client
                    .replace_route()
                    .route_table_id(table)
                    .set_destination_cidr_block(v4.clone())
                    .set_destination_ipv6_cidr_block(v6.clone())
                    .instance_id(instance)
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// DeleteRoute; a route that is already gone counts as deleted.
    pub(crate) async fn delete_route(
        &self,
        table: &str,
        destination: &Cidr,
    ) -> Result<(), CloudError> {
        let (v4, v6) = split(destination);
        let result = self
            .api
            .call("DeleteRoute", || {
                self.client
                    .delete_route()
                    .route_table_id(table)
                    .set_destination_cidr_block(v4.clone())
                    .set_destination_ipv6_cidr_block(v6.clone())
                    .send()
            })
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(CloudError::Rejected { code, .. }) if code == "InvalidRoute.NotFound" => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// ModifyInstanceAttribute SourceDestCheck=false: the instance may forward pod traffic.
    pub(crate) async fn disable_source_dest_check(&self, instance: &str) -> Result<(), CloudError> {
        self.api
            .call("ModifyInstanceAttribute", || {
                self.client
                    .modify_instance_attribute()
                    .instance_id(instance)
                    .source_dest_check(AttributeBooleanValue::builder().value(false).build())
                    .send()
            })
            .await
            .map(|_| ())
    }
}

/// `(DestinationCidrBlock, DestinationIpv6CidrBlock)` for a destination.
fn split(destination: &Cidr) -> (Option<String>, Option<String>) {
    let text = destination.to_string();
    if destination.is_ipv6() {
        (None, Some(text))
    } else {
        (Some(text), None)
    }
}
