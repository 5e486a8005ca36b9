//! The route-table calls of the EC2 seam: list route tables, create, replace and delete a route,
//! let an instance forward traffic.

use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, RouteTable};
use stratus_cloud::{Cidr, CloudError};

use crate::ec2::Ec2;
use crate::pager::pages;

/// DescribeRouteTables page size (the API's maximum).
const PAGE_SIZE: i32 = 100;

impl Ec2 {
    /// Every route table matching all `filters`, across pages.
    pub async fn describe_route_tables(
        &self,
        filters: &[Filter],
    ) -> Result<Vec<RouteTable>, CloudError> {
        let mut out = Vec::new();
        pages(
            &self.api,
            "DescribeRouteTables",
            |token| {
                self.client
                    .describe_route_tables()
                    .set_filters(Some(filters.to_vec()))
                    .max_results(PAGE_SIZE)
                    .set_next_token(token)
                    .send()
            },
            |page| {
                out.extend(page.route_tables().iter().cloned());
                page.next_token().map(str::to_string)
            },
        )
        .await?;
        Ok(out)
    }

    /// CreateRoute: `destination` (IPv4 or IPv6) to `instance` in `table`.
    pub async fn create_route(
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
    pub async fn replace_route(
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
    pub async fn delete_route(&self, table: &str, destination: &Cidr) -> Result<(), CloudError> {
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
    pub async fn disable_source_dest_check(&self, instance: &str) -> Result<(), CloudError> {
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
