//! `type: none` Services (Deckhouse's patch): their target groups made, checked and filled with
//! the nodes on the node port; recreated when the protocol changes; deleted with the Service or
//! when the Service stops asking for them. No load balancer, no security-group rule.

use std::collections::BTreeSet;

use aws_sdk_elasticloadbalancingv2::types::{ProtocolEnum, TargetTypeEnum};
use stratus_cloud::{CloudError, Ingress, LoadBalancerRequest};

use stratus_aws_api::annotations::LbAnnotations;
use stratus_aws_api::elbv2::{NewTargetGroup, TargetRef};
use stratus_aws_api::sg_rules::diff;

use crate::lb::network_calls::{health_settings, live_health};
use crate::lb::target_groups_spec::{
    none_ingress, target_groups_spec, PortGroup, TargetGroupsSpec,
};
use crate::lb::{invalid, AwsLoadBalancers};

/// Instance targets on one port.
fn on_port(ids: &BTreeSet<String>, port: i32) -> BTreeSet<TargetRef> {
    ids.iter()
        .map(|id| TargetRef {
            id: id.clone(),
            port,
        })
        .collect()
}

impl AwsLoadBalancers {
    /// Makes every group of the spec current and returns Deckhouse's status marker.
    pub(super) async fn ensure_target_groups_only(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<Vec<Ingress>, CloudError> {
        let spec = target_groups_spec(request, ann, &self.cluster_id).map_err(invalid)?;
        let instances = self.target_instances(request, ann).await?;
        let vpc = self.vpc(&instances)?;
        let wanted: BTreeSet<String> = instances
            .iter()
            .map(|i| i.id.as_str().to_string())
            .collect();
        let mut groups = Vec::new();
        for g in &spec.groups {
            let arn = self.ensure_port_group(&spec, g, &vpc).await?;
            let current: BTreeSet<TargetRef> = self
                .elbv2
                .target_health(&arn)
                .await?
                .into_iter()
                .map(|t| t.target)
                .collect();
            let (register, deregister) = diff(&current, &on_port(&wanted, g.node_port));
            self.elbv2.register_targets(&arn, &register).await?;
            self.elbv2.deregister_targets(&arn, &deregister).await?;
            groups.push((arn, g.node_port));
        }
        // Groups of ports the Service no longer has (known since this process made them).
        let keep: BTreeSet<&String> = groups.iter().map(|(arn, _)| arn).collect();
        let stale: Vec<String> = self
            .recall(&spec.name)
            .map(|k| k.only_target_groups)
            .unwrap_or_default()
            .into_iter()
            .filter(|arn| !keep.contains(arn))
            .collect();
        for arn in &stale {
            self.elbv2.delete_target_group(arn).await?;
        }
        self.remember(&spec.name, |k| {
            k.targets = wanted.clone();
            k.only_target_groups = groups.iter().map(|(arn, _)| arn.clone()).collect();
            k.target_groups = groups;
        });
        Ok(vec![none_ingress()])
    }

    /// One port's group: found by name, recreated when its protocol changed, its health check
    /// rewritten when it drifted; its ARN.
    async fn ensure_port_group(
        &self,
        spec: &TargetGroupsSpec,
        g: &PortGroup,
        vpc: &str,
    ) -> Result<String, CloudError> {
        let health = health_settings(&spec.health_check);
        if let Some(tg) = self.elbv2.target_group(&g.name).await? {
            if tg.protocol.as_deref() == Some(g.protocol) {
                if live_health(&tg.health_check) != spec.health_check {
                    self.elbv2.modify_health_check(&tg.arn, &health).await?;
                }
                return Ok(tg.arn);
            }
            tracing::info!(target_group = %g.name, from = ?tg.protocol, to = g.protocol, "protocol changed; recreating the target group");
            self.elbv2.delete_target_group(&tg.arn).await?;
        }
        self.elbv2
            .create_target_group(&NewTargetGroup {
                name: &g.name,
                protocol: ProtocolEnum::from(g.protocol),
                port: g.node_port,
                vpc_id: vpc,
                target_type: TargetTypeEnum::Instance,
                health_check: &health,
                tags: &spec.tags,
            })
            .await
    }

    /// Registers and deregisters only the change, when the groups are known; else ensures.
    pub(super) async fn update_target_groups_only(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<bool, CloudError> {
        let name = request.service.default_load_balancer_name();
        let known = match self.recall(&name) {
            Some(k) if !k.only_target_groups.is_empty() => k,
            _ => {
                self.ensure_target_groups_only(request, ann).await?;
                return Ok(true);
            }
        };
        let wanted: BTreeSet<String> = self
            .target_instances(request, ann)
            .await?
            .iter()
            .map(|i| i.id.as_str().to_string())
            .collect();
        let (register, deregister) = diff(&known.targets, &wanted);
        let register: BTreeSet<String> = register.into_iter().collect();
        let deregister: BTreeSet<String> = deregister.into_iter().collect();
        for (arn, port) in &known.target_groups {
            let add: Vec<TargetRef> = on_port(&register, *port).into_iter().collect();
            let remove: Vec<TargetRef> = on_port(&deregister, *port).into_iter().collect();
            self.elbv2.register_targets(arn, &add).await?;
            self.elbv2.deregister_targets(arn, &remove).await?;
        }
        self.remember(&name, |k| k.targets = wanted.clone());
        Ok(!register.is_empty() || !deregister.is_empty())
    }

    /// Deletes the `type: none` groups this process made for `name` (a Service deleted or no
    /// longer of `type: none`). Groups made before a restart go with the reaper once their
    /// Service is gone (they carry its tags).
    pub(super) async fn delete_target_groups_only(&self, name: &str) -> Result<(), CloudError> {
        let Some(known) = self
            .recall(name)
            .filter(|k| !k.only_target_groups.is_empty())
        else {
            return Ok(());
        };
        for arn in &known.only_target_groups {
            self.elbv2.delete_target_group(arn).await?;
        }
        self.remember(name, |k| {
            k.only_target_groups.clear();
            k.target_groups.clear();
            k.targets.clear();
        });
        Ok(())
    }
}
