//! NLB reconcile: the load balancer, one target group and listener per port, instance targets,
//! and the node-group rules clients and health checks need; deletion of all of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use stratus_cloud::{CloudError, Ingress, LoadBalancerRequest};

use crate::instance::Instance;
use crate::lb::annotations::LbAnnotations;
use crate::lb::elbv2_api::{NetworkLb, TargetGroupState};
use crate::lb::network_spec::{network_spec, nlb_node_rules, nlb_rule_descriptions, NetworkSpec};
use crate::lb::node_rules::node_groups;
use crate::lb::rules::{check_source_ranges, diff, source_ranges, CidrRule};
use crate::lb::subnets::choose_subnets;
use crate::lb::tags::missing_tags;
use crate::lb::{invalid, AwsLoadBalancers};

fn ids(instances: &[Arc<Instance>]) -> BTreeSet<String> {
    instances
        .iter()
        .map(|i| i.id.as_str().to_string())
        .collect()
}

impl AwsLoadBalancers {
    pub(super) async fn ensure_network(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<Vec<Ingress>, CloudError> {
        let spec = network_spec(request, ann, &self.cluster_id).map_err(invalid)?;
        check_source_ranges(&request.source_ranges).map_err(invalid)?;
        if !ann.security_groups.is_empty() {
            return Err(invalid(
                "security-groups on an NLB needs NLBSecurityGroupMode = Managed, which this build does not support; NLB clients are allowed through the node groups instead",
            ));
        }
        let instances = self.target_instances(request, ann).await?;
        let vpc = self.vpc(&instances)?;
        let all_subnets = self.subnets.subnets(&vpc).await?;
        let subnets = choose_subnets(&all_subnets, &ann.subnets, &self.cluster_id, ann.internal)
            .map_err(invalid)?;
        for (what, list) in [
            ("eip-allocations", &spec.eip_allocations),
            ("private-ipv4-addresses", &spec.private_ipv4_addresses),
        ] {
            if !list.is_empty() && list.len() != subnets.len() {
                return Err(invalid(format!(
                    "{what}: {} value(s) for {} subnet(s); give one per subnet",
                    list.len(),
                    subnets.len()
                )));
            }
        }
        let lb = match self.elbv2.describe(&spec.name).await? {
            Some(lb) if lb.internal != spec.internal => {
                tracing::info!(lb = %spec.name, "scheme changed; recreating the load balancer");
                self.delete_network(&spec.name).await?;
                None
            }
            other => other,
        };
        let lb = match lb {
            Some(lb) => {
                let tags = self.elbv2.tags(std::slice::from_ref(&lb.arn)).await?;
                let missing =
                    missing_tags(&tags.get(&lb.arn).cloned().unwrap_or_default(), &spec.tags);
                if !missing.is_empty() {
                    self.elbv2.add_tags(&lb.arn, &missing).await?;
                }
                lb
            }
            None => {
                let mappings: Vec<(String, Option<String>, Option<String>)> = subnets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        (
                            s.clone(),
                            spec.eip_allocations.get(i).cloned(),
                            spec.private_ipv4_addresses.get(i).cloned(),
                        )
                    })
                    .collect();
                self.elbv2
                    .create(&spec.name, spec.internal, &mappings, &spec.tags)
                    .await?
            }
        };
        let wanted = ids(&instances);
        let groups = self.converge_ports(&spec, &lb, &vpc, &wanted).await?;
        self.remember(&spec.name, |k| {
            k.targets = wanted.clone();
            k.target_groups = groups;
        });
        if !self.settings.disable_security_group_ingress {
            self.ensure_nlb_node_rules(&spec, request, &vpc, &instances)
                .await?;
        }
        Ok(vec![Ingress {
            hostname: Some(lb.dns_name),
            ip: None,
        }])
    }

    /// Target groups, targets and listeners; returns `(target group ARN, node port)` pairs.
    async fn converge_ports(
        &self,
        spec: &NetworkSpec,
        lb: &NetworkLb,
        vpc: &str,
        wanted: &BTreeSet<String>,
    ) -> Result<Vec<(String, i32)>, CloudError> {
        let listeners = self.elbv2.listeners(&lb.arn).await?;
        let previous: BTreeSet<String> = listeners
            .iter()
            .filter_map(|l| l.target_group_arn.clone())
            .collect();
        let mut groups = Vec::new();
        for port in &spec.ports {
            let tg = self.ensure_target_group(spec, port, vpc).await?;
            if !spec.target_group_attributes.is_empty() {
                self.elbv2
                    .set_target_group_attributes(&tg.arn, &spec.target_group_attributes)
                    .await?;
            }
            let current = self.elbv2.targets(&tg.arn).await?;
            let (register, deregister) = diff(&current, wanted);
            self.elbv2
                .register(&tg.arn, &register, port.node_port)
                .await?;
            self.elbv2
                .deregister(&tg.arn, &deregister, port.node_port)
                .await?;
            match listeners.iter().find(|l| l.port == port.port) {
                None => self.elbv2.create_listener(&lb.arn, port, &tg.arn).await?,
                Some(l)
                    if l.target_group_arn.as_deref() != Some(tg.arn.as_str())
                        || l.protocol != port.protocol
                        || l.certificate != port.certificate =>
                {
                    self.elbv2.modify_listener(&l.arn, port, &tg.arn).await?
                }
                Some(_) => {}
            }
            groups.push((tg.arn, port.node_port));
        }
        let keep_ports: BTreeSet<i32> = spec.ports.iter().map(|p| p.port).collect();
        for l in listeners.iter().filter(|l| !keep_ports.contains(&l.port)) {
            self.elbv2.delete_listener(&l.arn).await?;
        }
        let keep: BTreeSet<&String> = groups.iter().map(|(arn, _)| arn).collect();
        for arn in previous.iter().filter(|a| !keep.contains(a)) {
            self.elbv2.delete_target_group(arn).await?;
        }
        Ok(groups)
    }

    async fn ensure_target_group(
        &self,
        spec: &NetworkSpec,
        port: &crate::lb::network_spec::NetworkPort,
        vpc: &str,
    ) -> Result<TargetGroupState, CloudError> {
        if let Some(tg) = self.elbv2.target_group(&port.target_group).await? {
            if tg.health_check != spec.health_check {
                self.elbv2
                    .modify_health_check(&tg.arn, &spec.health_check)
                    .await?;
            }
            return Ok(tg);
        }
        let arn = self
            .elbv2
            .create_target_group(vpc, port, &spec.health_check, &spec.target_group_tags)
            .await?;
        Ok(TargetGroupState {
            arn,
            name: port.target_group.clone(),
            health_check: spec.health_check.clone(),
        })
    }

    /// Client, health-check and MTU rules on the node groups, described per load balancer.
    async fn ensure_nlb_node_rules(
        &self,
        spec: &NetworkSpec,
        request: &LoadBalancerRequest,
        vpc: &str,
        instances: &[Arc<Instance>],
    ) -> Result<(), CloudError> {
        let instance_groups: BTreeSet<String> = instances
            .iter()
            .flat_map(|i| i.security_groups.iter().cloned())
            .collect();
        let known: BTreeMap<String, _> = self
            .ec2
            .security_groups_by_id(&instance_groups)
            .await?
            .into_iter()
            .map(|g| (g.id.clone(), g))
            .collect();
        let per_instance: Vec<Vec<String>> = instances
            .iter()
            .map(|i| i.security_groups.clone())
            .collect();
        let wanted = node_groups(&per_instance, &known, &self.cluster_id).map_err(invalid)?;
        let cidrs = self.ec2.vpc_cidrs(vpc).await?;
        let desired = nlb_node_rules(spec, &source_ranges(&request.source_ranges), &cidrs);
        let ours = nlb_rule_descriptions(&spec.name);
        for (id, g) in &known {
            let current: BTreeSet<CidrRule> = g
                .cidr_rules
                .iter()
                .filter(|r| ours.contains(&r.description))
                .cloned()
                .collect();
            let target = if wanted.contains(id) {
                desired.clone()
            } else {
                BTreeSet::new()
            };
            let (add, remove) = diff(&current, &target);
            self.ec2.update_cidr_rules(id, &add, &remove).await?;
        }
        self.remember(&spec.name, |k| {
            k.node_groups = wanted;
            k.instance_groups = instance_groups;
        });
        Ok(())
    }

    /// Registers and deregisters only the change in every target group of the NLB.
    pub(super) async fn update_network_targets(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<bool, CloudError> {
        let name = request.service.default_load_balancer_name();
        let known = match self.recall(&name) {
            Some(k) if !k.target_groups.is_empty() => k,
            _ => {
                self.ensure_network(request, ann).await?;
                return Ok(true);
            }
        };
        let instances = self.target_instances(request, ann).await?;
        let wanted = ids(&instances);
        let (register, deregister) = diff(&known.targets, &wanted);
        for (arn, port) in &known.target_groups {
            self.elbv2.register(arn, &register, *port).await?;
            self.elbv2.deregister(arn, &deregister, *port).await?;
        }
        self.remember(&name, |k| k.targets = wanted.clone());
        let new_group = instances
            .iter()
            .flat_map(|i| i.security_groups.iter())
            .any(|g| !known.instance_groups.contains(g));
        if new_group && !self.settings.disable_security_group_ingress {
            let spec = network_spec(request, ann, &self.cluster_id).map_err(invalid)?;
            let vpc = self.vpc(&instances)?;
            self.ensure_nlb_node_rules(&spec, request, &vpc, &instances)
                .await?;
        }
        Ok(!register.is_empty() || !deregister.is_empty())
    }

    /// Deletes the NLB, its target groups and its rules on the node groups.
    pub(super) async fn delete_network(&self, name: &str) -> Result<(), CloudError> {
        let groups = self.cache.security_groups();
        let ours = nlb_rule_descriptions(name);
        for g in self.ec2.security_groups_by_id(&groups).await? {
            let remove: Vec<CidrRule> = g
                .cidr_rules
                .iter()
                .filter(|r| ours.contains(&r.description))
                .cloned()
                .collect();
            self.ec2.update_cidr_rules(&g.id, &[], &remove).await?;
        }
        let Some(lb) = self.elbv2.describe(name).await? else {
            return Ok(());
        };
        let target_groups = self.elbv2.target_groups_of(&lb.arn).await?;
        self.elbv2.delete(&lb.arn).await?;
        for tg in target_groups {
            self.elbv2.delete_target_group(&tg.arn).await?;
        }
        Ok(())
    }
}
