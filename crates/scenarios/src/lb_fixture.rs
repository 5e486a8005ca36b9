//! Reads of the load balancers in moto, straight from the emulator (not counted as CCM traffic).

use std::collections::BTreeMap;

use aws_config::{BehaviorVersion, Region};
use aws_sdk_elasticloadbalancing as elb;
use aws_sdk_elasticloadbalancingv2 as elbv2;

use crate::ec2_fixture::REGION;

async fn sdk_config(endpoint: &str) -> aws_config::SdkConfig {
    let creds = aws_sdk_ec2::config::Credentials::new("testing", "testing", None, None, "scenario");
    aws_config::defaults(BehaviorVersion::latest())
        .region(Region::new(REGION))
        .endpoint_url(endpoint)
        .credentials_provider(creds)
        .load()
        .await
}

/// Clients for both ELB APIs.
pub struct LbClients {
    /// Classic ELB.
    pub elb: elb::Client,
    /// Elastic Load Balancing v2 (NLB, target groups).
    pub elbv2: elbv2::Client,
}

impl LbClients {
    /// Clients talking to moto at `endpoint`.
    pub async fn new(endpoint: &str) -> Self {
        let conf = sdk_config(endpoint).await;
        Self {
            elb: elb::Client::new(&conf),
            elbv2: elbv2::Client::new(&conf),
        }
    }

    /// The Classic ELB named `name`, if it exists.
    pub async fn classic(
        &self,
        name: &str,
    ) -> anyhow::Result<Option<elb::types::LoadBalancerDescription>> {
        match self
            .elb
            .describe_load_balancers()
            .load_balancer_names(name)
            .send()
            .await
        {
            Ok(out) => Ok(out.load_balancer_descriptions().first().cloned()),
            Err(e) if format!("{e:?}").contains("LoadBalancerNotFound") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Tags of a Classic ELB.
    pub async fn classic_tags(&self, name: &str) -> anyhow::Result<BTreeMap<String, String>> {
        let out = self
            .elb
            .describe_tags()
            .load_balancer_names(name)
            .send()
            .await?;
        Ok(out
            .tag_descriptions()
            .iter()
            .flat_map(|d| d.tags())
            .map(|t| (t.key().to_string(), t.value().unwrap_or("").to_string()))
            .collect())
    }

    /// Attributes of a Classic ELB.
    pub async fn classic_attributes(
        &self,
        name: &str,
    ) -> anyhow::Result<elb::types::LoadBalancerAttributes> {
        let out = self
            .elb
            .describe_load_balancer_attributes()
            .load_balancer_name(name)
            .send()
            .await?;
        Ok(out
            .load_balancer_attributes()
            .cloned()
            .unwrap_or_else(|| elb::types::LoadBalancerAttributes::builder().build()))
    }

    /// Names of every Classic ELB (all pages: moto pages by 50).
    pub async fn classic_names(&self) -> anyhow::Result<Vec<String>> {
        let all = self
            .elb
            .describe_load_balancers()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        Ok(all
            .iter()
            .filter_map(|d| d.load_balancer_name().map(str::to_string))
            .collect())
    }

    /// Names of every NLB/ALB (all pages).
    pub async fn v2_names(&self) -> anyhow::Result<Vec<String>> {
        let all = self
            .elbv2
            .describe_load_balancers()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        Ok(all
            .iter()
            .filter_map(|d| d.load_balancer_name().map(str::to_string))
            .collect())
    }

    /// Names of every target group (all pages).
    pub async fn target_group_names(&self) -> anyhow::Result<Vec<String>> {
        let all = self
            .elbv2
            .describe_target_groups()
            .into_paginator()
            .items()
            .send()
            .try_collect()
            .await?;
        Ok(all
            .iter()
            .filter_map(|d| d.target_group_name().map(str::to_string))
            .collect())
    }
}
