//! Making a load balancer's floating IP: on the floating subnet given by id, or, with
//! `floating-subnet`/`floating-subnet-tags`, on the first matching subnet of the floating network
//! that still has an address (each is tried in turn, as OCCM does).

use serde_json::Value;
use stratus_cloud::CloudError;

use super::annotations::LbOptions;
use super::floating_subnets::{tag_query, NameMatcher};
use super::{invalid, OpenStackLoadBalancers};

impl OpenStackLoadBalancers {
    /// Creates our floating IP on `network` for `port` (optionally with `address`).
    pub(super) async fn create_fip(
        &self,
        network: &str,
        options: &LbOptions,
        address: Option<&str>,
        port: &str,
        description: &str,
    ) -> Result<Value, CloudError> {
        let by_pattern =
            options.floating_subnet.is_some() || options.floating_subnet_tags.is_some();
        if options.floating_subnet_id.is_some() || address.is_some() || !by_pattern {
            return self
                .fips
                .create(
                    network,
                    options.floating_subnet_id.as_deref(),
                    address,
                    port,
                    description,
                )
                .await;
        }
        let matcher = options
            .floating_subnet
            .as_deref()
            .map(NameMatcher::parse)
            .transpose()
            .map_err(|e| invalid(format!("floating-subnet: {e}")))?;
        let tags = options.floating_subnet_tags.as_deref().map(tag_query);
        let subnets = self
            .fips
            .subnets_of(network, tags.as_ref().map(|(k, v)| (*k, v.as_str())))
            .await?;
        let candidates: Vec<&(String, String)> = subnets
            .iter()
            .filter(|(_, name)| matcher.as_ref().is_none_or(|m| m.matches(name)))
            .collect();
        let spec = format!(
            "pattern {:?}, tags {:?}",
            options.floating_subnet.as_deref().unwrap_or(""),
            options.floating_subnet_tags.as_deref().unwrap_or("")
        );
        if candidates.is_empty() {
            return Err(invalid(format!(
                "no subnet of floating network {network} matches {spec}"
            )));
        }
        let mut last = None;
        for (id, name) in candidates {
            match self
                .fips
                .create(network, Some(id), None, port, description)
                .await
            {
                Ok(fip) => return Ok(fip),
                Err(e @ CloudError::Rejected { .. }) => {
                    tracing::debug!(subnet = %name, error = %e, "floating subnet refused; trying the next");
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(invalid(format!(
            "no subnet matching {spec} in floating network {network} has a free address (last: {})",
            last.map(|e| e.to_string()).unwrap_or_default()
        )))
    }
}
