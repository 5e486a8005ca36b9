//! NLB reconcile: the load balancer, one target group and listener per port, instance targets,
//! and the node-group rules clients and health checks need; deletion of all of it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use stratus_cloud::{CloudError, Ingress, LoadBalancerRequest};

use aws_sdk_elasticloadbalancingv2::types::LoadBalancerTypeEnum;
use stratus_aws_api::annotations::LbAnnotations;
use stratus_aws_api::elbv2::{LoadBalancer, NewLoadBalancer, NewTargetGroup, Placement};
use stratus_aws_api::elbv2::{SubnetMapping, TargetRef};
use stratus_aws_api::node_rules::node_groups;
use stratus_aws_api::sg_rules::{check_source_ranges, client_ranges, diff, CidrRule};
use stratus_aws_api::subnets::choose_subnets;
use stratus_aws_api::tags::missing_tags;

use crate::instance::Instance;
use crate::lb::network_calls::{
    forwards_to, health_settings, listener_matches, live_health, new_listener, repointed_listener,
};
use crate::lb::network_spec::{
    network_spec, nlb_node_rules, nlb_rule_descriptions, NetworkPort, NetworkSpec,
};
use crate::lb::{invalid, AwsLoadBalancers};

fn ids(instances: &[Arc<Instance>]) -> BTreeSet<String> {
    instances
        .iter()
        .map(|i| i.id.as_str().to_string())
        .collect()
}

/// Instance targets on one port.
fn on_port(ids: &[String], port: i32) -> Vec<TargetRef> {
    ids.iter()
        .map(|id| TargetRef {
            id: id.clone(),
            port,
        })
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
        let lb = match self.elbv2.load_balancer(&spec.name).await? {
            Some(lb) if lb.is_internal() != spec.internal => {
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
                let mappings: Vec<SubnetMapping> = subnets
                    .iter()
                    .enumerate()
                    .map(|(i, s)| SubnetMapping {
                        subnet: s.clone(),
                        allocation_id: spec.eip_allocations.get(i).cloned(),
                        private_ipv4_address: spec.private_ipv4_addresses.get(i).cloned(),
                    })
                    .collect();
                self.elbv2
                    .create_load_balancer(&NewLoadBalancer {
                        name: &spec.name,
                        kind: LoadBalancerTypeEnum::Network,
                        internet_facing: !spec.internal,
                        ip_address_type: None,
                        placement: Placement::Mappings(mappings),
                        security_groups: &[],
                        tags: &spec.tags,
                    })
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
        lb: &LoadBalancer,
        vpc: &str,
        wanted: &BTreeSet<String>,
    ) -> Result<Vec<(String, i32)>, CloudError> {
        let listeners = self.elbv2.listeners(&lb.arn).await?;
        let previous: BTreeSet<String> = listeners
            .iter()
            .filter_map(|l| forwards_to(l).map(str::to_string))
            .collect();
        let mut groups = Vec::new();
        for port in &spec.ports {
            let tg = self.ensure_target_group(spec, port, vpc).await?;
            if !spec.target_group_attributes.is_empty() {
                self.elbv2
                    .modify_target_group_attributes(&tg, &spec.target_group_attributes)
                    .await?;
            }
            let current: BTreeSet<String> = self
                .elbv2
                .target_health(&tg)
                .await?
                .into_iter()
                .map(|t| t.target.id)
                .collect();
            let (register, deregister) = diff(&current, wanted);
            self.elbv2
                .register_targets(&tg, &on_port(&register, port.node_port))
                .await?;
            self.elbv2
                .deregister_targets(&tg, &on_port(&deregister, port.node_port))
                .await?;
            match listeners.iter().find(|l| l.port.unwrap_or(0) == port.port) {
                None => {
                    self.elbv2
                        .create_listener(&lb.arn, &new_listener(port, &tg))
                        .await?;
                }
                Some(l) if !listener_matches(l, port, &tg) => {
                    let arn = l.arn.as_deref().unwrap_or("");
                    self.elbv2
                        .modify_listener(arn, &repointed_listener(port, &tg))
                        .await?
                }
                Some(_) => {}
            }
            groups.push((tg, port.node_port));
        }
        let keep_ports: BTreeSet<i32> = spec.ports.iter().map(|p| p.port).collect();
        for l in listeners
            .iter()
            .filter(|l| !keep_ports.contains(&l.port.unwrap_or(0)))
        {
            self.elbv2
                .delete_listener(l.arn.as_deref().unwrap_or(""))
                .await?;
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
        port: &NetworkPort,
        vpc: &str,
    ) -> Result<String, CloudError> {
        let health = health_settings(&spec.health_check);
        if let Some(tg) = self.elbv2.target_group(&port.target_group).await? {
            if live_health(&tg.health_check) != spec.health_check {
                self.elbv2.modify_health_check(&tg.arn, &health).await?;
            }
            return Ok(tg.arn);
        }
        self.elbv2
            .create_target_group(&NewTargetGroup {
                name: &port.target_group,
                protocol: port.target_protocol.as_str().into(),
                port: port.node_port,
                vpc_id: vpc,
                target_type: aws_sdk_elasticloadbalancingv2::types::TargetTypeEnum::Instance,
                health_check: &health,
                tags: &spec.target_group_tags,
            })
            .await
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
        let clients = client_ranges(
            &request.source_ranges,
            &self.settings.public_network_allow_list,
        );
        let desired = nlb_node_rules(spec, &clients, &cidrs);
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
            self.elbv2
                .register_targets(arn, &on_port(&register, *port))
                .await?;
            self.elbv2
                .deregister_targets(arn, &on_port(&deregister, *port))
                .await?;
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
        let Some(lb) = self.elbv2.load_balancer(name).await? else {
            return Ok(());
        };
        let target_groups = self.elbv2.target_groups_of(&lb.arn).await?;
        self.elbv2.delete_load_balancer(&lb.arn).await?;
        for tg in target_groups {
            self.elbv2.delete_target_group(&tg.arn).await?;
        }
        Ok(())
    }
}
