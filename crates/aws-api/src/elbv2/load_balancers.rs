//! The load-balancer calls of the ELBv2 client: describe by name or all (paged), create,
//! delete, and the settings changed in place (security groups, IP address type, subnets,
//! attributes).

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{IpAddressType, LoadBalancerAttribute, LoadBalancerSchemeEnum};
use stratus_cloud::CloudError;

use super::values::{LoadBalancer, NewLoadBalancer, Placement, SubnetMapping};
use super::{gone, missing, tags, ElbV2Api, PAGE_SIZE};
use crate::pager::pages;

impl ElbV2Api {
    /// The load balancer named `name`, if it exists.
    pub async fn load_balancer(&self, name: &str) -> Result<Option<LoadBalancer>, CloudError> {
        match self
            .api
            .call("DescribeLoadBalancers", || {
                self.client.describe_load_balancers().names(name).send()
            })
            .await
        {
            Ok(out) => Ok(out.load_balancers().first().map(LoadBalancer::of)),
            Err(e) if gone(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every load balancer of the region (all pages).
    pub async fn all_load_balancers(&self) -> Result<Vec<LoadBalancer>, CloudError> {
        let mut all = Vec::new();
        self.each_load_balancer(|l| {
            all.push(LoadBalancer::of(l));
            true
        })
        .await?;
        Ok(all)
    }

    /// Whether any load balancer of the region matches `test`; the pages after the first match
    /// are not read.
    pub async fn any_load_balancer(
        &self,
        test: impl Fn(&LoadBalancer) -> bool,
    ) -> Result<bool, CloudError> {
        let mut found = false;
        self.each_load_balancer(|l| {
            found = found || test(&LoadBalancer::of(l));
            !found
        })
        .await?;
        Ok(found)
    }

    /// Hands every load balancer to `each`, page by page, while it answers `true` at the end of
    /// a page.
    async fn each_load_balancer(
        &self,
        mut each: impl FnMut(&elbv2::types::LoadBalancer) -> bool,
    ) -> Result<(), CloudError> {
        pages(
            &self.api,
            "DescribeLoadBalancers",
            |marker| {
                self.client
                    .describe_load_balancers()
                    .page_size(PAGE_SIZE)
                    .set_marker(marker)
                    .send()
            },
            |page| {
                let mut more = true;
                for l in page.load_balancers() {
                    more = each(l);
                }
                page.next_marker().filter(|_| more).map(str::to_string)
            },
        )
        .await
    }

    /// Creates a load balancer.
    pub async fn create_load_balancer(
        &self,
        new: &NewLoadBalancer<'_>,
    ) -> Result<LoadBalancer, CloudError> {
        let scheme = if new.internet_facing {
            LoadBalancerSchemeEnum::InternetFacing
        } else {
            LoadBalancerSchemeEnum::Internal
        };
        let (subnets, mappings) = match &new.placement {
            Placement::Subnets(s) => (Some(s.clone()), None),
            Placement::Mappings(m) => (None, Some(subnet_mappings(m))),
        };
        let out = self
            .api
            .call("CreateLoadBalancer", || {
                self.client
                    .create_load_balancer()
                    .name(new.name)
                    .r#type(new.kind.clone())
                    .scheme(scheme.clone())
                    .set_ip_address_type(new.ip_address_type.clone())
                    .set_subnets(subnets.clone())
                    .set_subnet_mappings(mappings.clone())
                    .set_security_groups(
                        Some(new.security_groups.to_vec()).filter(|s| !s.is_empty()),
                    )
                    .set_tags(Some(tags(new.tags)))
                    .send()
            })
            .await?;
        let l = out
            .load_balancers()
            .first()
            .ok_or_else(|| missing("CreateLoadBalancer"))?;
        Ok(LoadBalancer::of(l))
    }

    /// Deletes a load balancer (its listeners and rules go with it); gone counts as deleted.
    pub async fn delete_load_balancer(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteLoadBalancer", || {
                self.client
                    .delete_load_balancer()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Replaces the security groups of a load balancer.
    pub async fn set_security_groups(
        &self,
        arn: &str,
        groups: &[String],
    ) -> Result<(), CloudError> {
        self.api
            .call("SetSecurityGroups", || {
                self.client
                    .set_security_groups()
                    .load_balancer_arn(arn)
                    .set_security_groups(Some(groups.to_vec()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Switches a load balancer between `ipv4` and `dualstack`.
    pub async fn set_ip_address_type(
        &self,
        arn: &str,
        kind: IpAddressType,
    ) -> Result<(), CloudError> {
        self.api
            .call("SetIpAddressType", || {
                self.client
                    .set_ip_address_type()
                    .load_balancer_arn(arn)
                    .ip_address_type(kind.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Puts a network load balancer on these subnets (AWS adds subnets in place; what it
    /// refuses comes back as the error).
    pub async fn set_subnets(
        &self,
        arn: &str,
        mappings: &[SubnetMapping],
    ) -> Result<(), CloudError> {
        let mappings = subnet_mappings(mappings);
        self.api
            .call("SetSubnets", || {
                self.client
                    .set_subnets()
                    .load_balancer_arn(arn)
                    .set_subnet_mappings(Some(mappings.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }

    /// The attributes of a load balancer.
    pub async fn load_balancer_attributes(
        &self,
        arn: &str,
    ) -> Result<BTreeMap<String, String>, CloudError> {
        let out = self
            .api
            .call("DescribeLoadBalancerAttributes", || {
                self.client
                    .describe_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await?;
        Ok(out
            .attributes()
            .iter()
            .filter_map(|a| Some((a.key()?.to_string(), a.value()?.to_string())))
            .collect())
    }

    /// Sets the given attributes of a load balancer (the others stay).
    pub async fn modify_load_balancer_attributes(
        &self,
        arn: &str,
        wanted: &BTreeMap<String, String>,
    ) -> Result<(), CloudError> {
        let attrs: Vec<LoadBalancerAttribute> = wanted
            .iter()
            .map(|(k, v)| LoadBalancerAttribute::builder().key(k).value(v).build())
            .collect();
        self.api
            .call("ModifyLoadBalancerAttributes", || {
                self.client
                    .modify_load_balancer_attributes()
                    .load_balancer_arn(arn)
                    .set_attributes(Some(attrs.clone()))
                    .send()
            })
            .await?;
        Ok(())
    }
}

fn subnet_mappings(mappings: &[SubnetMapping]) -> Vec<elbv2::types::SubnetMapping> {
    mappings
        .iter()
        .map(|m| {
            elbv2::types::SubnetMapping::builder()
                .subnet_id(&m.subnet)
                .set_allocation_id(m.allocation_id.clone())
                .set_private_ipv4_address(m.private_ipv4_address.clone())
                .build()
        })
        .collect()
}
