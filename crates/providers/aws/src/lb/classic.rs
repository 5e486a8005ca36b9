//! Classic ELB reconcile: create or converge one load balancer, its security group, its targets
//! and the node rules; delete them all again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use stratus_cloud::{CloudError, Ingress, LoadBalancerRequest};

use crate::instance::Instance;
use crate::lb::backend_memo::BackendRuleMemo;
use crate::lb::classic_spec::{classic_spec, ssl_policy_name, ClassicSpec, PROXY_PROTOCOL_POLICY};
use crate::lb::{invalid, AwsLoadBalancers};
use stratus_aws_api::annotations::LbAnnotations;
use stratus_aws_api::elb::ClassicLb;
use stratus_aws_api::node_rules::{allow_all_from, has_rule, node_groups};
use stratus_aws_api::sg_rules::{check_source_ranges, diff, listener_rules, source_ranges};
use stratus_aws_api::subnets::choose_subnets;
use stratus_aws_api::tags::{cluster_tag_key, missing_tags, OWNED};

/// Name of the security group made for one Classic ELB (as upstream).
pub fn managed_group_name(lb_name: &str) -> String {
    format!("k8s-elb-{lb_name}")
}

/// Name of the cluster's backend group, the source of every node rule.
pub fn backend_group_name(cluster_id: &str) -> String {
    format!("k8s-elb-backend-{cluster_id}")
}

/// Tag marking what a cluster-wide group is for.
pub const ROLE_TAG: &str = "stratus.io/role";
/// [`ROLE_TAG`] value of the backend group.
pub const BACKEND_ROLE: &str = "elb-backend";
/// Description of the node rules whose source is the backend group.
pub const BACKEND_RULE_DESCRIPTION: &str = "kubernetes.io/rule/elb/backend";

fn ids(instances: &[Arc<Instance>]) -> BTreeSet<String> {
    instances
        .iter()
        .map(|i| i.id.as_str().to_string())
        .collect()
}

impl AwsLoadBalancers {
    pub(super) async fn ensure_classic(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<Vec<Ingress>, CloudError> {
        let spec = classic_spec(request, ann, &self.cluster_id).map_err(invalid)?;
        check_source_ranges(&request.source_ranges).map_err(invalid)?;
        let instances = self.target_instances(request, ann).await?;
        let vpc = self.vpc(&instances)?;
        let all_subnets = self.subnets.subnets(&vpc).await?;
        let subnets =
            match choose_subnets(&all_subnets, &ann.subnets, &self.cluster_id, ann.internal) {
                Ok(s) => s,
                Err(e) => {
                    self.subnets.invalidate().await;
                    return Err(invalid(e));
                }
            };
        let mut groups = if !ann.security_groups.is_empty() {
            ann.security_groups.clone()
        } else if let Some(g) = &self.settings.elb_security_group {
            vec![g.clone()]
        } else {
            vec![self.ensure_managed_group(&vpc, request, &spec).await?]
        };
        for g in &ann.extra_security_groups {
            if !groups.contains(g) {
                groups.push(g.clone());
            }
        }
        // The cluster's backend group: the one source the node groups let in, whatever the
        // number of load balancers (one node rule per node group, not one per load balancer).
        let backend = if self.settings.disable_security_group_ingress {
            None
        } else {
            Some(self.ensure_backend_group(&vpc).await?)
        };
        groups.extend(
            backend
                .iter()
                .filter(|b| !groups.contains(b))
                .cloned()
                .collect::<Vec<_>>(),
        );
        let existing = match self.elb.describe(&spec.name).await? {
            Some(lb) if (lb.scheme == "internal") != spec.internal => {
                tracing::info!(lb = %spec.name, "scheme changed; recreating the load balancer");
                self.elb.delete(&spec.name).await?;
                None
            }
            other => other,
        };
        let wanted = ids(&instances);
        let dns = match existing {
            None => {
                let dns = self
                    .elb
                    .create(
                        &spec.name,
                        spec.internal,
                        &spec.listeners,
                        &subnets,
                        &groups,
                        &spec.tags,
                    )
                    .await?;
                self.elb
                    .configure_health_check(&spec.name, &spec.health_check)
                    .await?;
                if spec.attributes != crate::lb::classic_spec::default_attributes() {
                    self.elb
                        .set_attributes(&spec.name, &spec.attributes)
                        .await?;
                }
                self.converge_proxy(&spec, &BTreeSet::new()).await?;
                self.converge_ssl_policy(&spec, &BTreeMap::new()).await?;
                let add: Vec<String> = wanted.iter().cloned().collect();
                self.elb.register(&spec.name, &add).await?;
                dns
            }
            Some(lb) => {
                self.converge_classic(&spec, &lb, &subnets, &groups, &wanted)
                    .await?;
                lb.dns_name
            }
        };
        self.remember(&spec.name, |k| k.targets = wanted.clone());
        if let Some(backend) = &backend {
            self.ensure_backend_rules(&spec.name, backend, &instances)
                .await?;
        }
        Ok(vec![Ingress {
            hostname: Some(dns),
            ip: None,
        }])
    }

    /// Brings an existing load balancer to the spec, one call per difference.
    async fn converge_classic(
        &self,
        spec: &ClassicSpec,
        lb: &ClassicLb,
        subnets: &[String],
        groups: &[String],
        wanted: &BTreeSet<String>,
    ) -> Result<(), CloudError> {
        let name = &spec.name;
        let (add, remove) = diff(&lb.listeners, &spec.listeners);
        if !remove.is_empty() {
            let ports: BTreeSet<i32> = remove.iter().map(|l| l.port).collect();
            self.elb
                .delete_listeners(name, &ports.into_iter().collect::<Vec<_>>())
                .await?;
        }
        if !add.is_empty() {
            self.elb.create_listeners(name, &add).await?;
        }
        let want_subnets: BTreeSet<String> = subnets.iter().cloned().collect();
        let (attach, detach) = diff(&lb.subnets, &want_subnets);
        self.elb.update_subnets(name, &attach, &detach).await?;
        let have_groups: BTreeSet<&String> = lb.security_groups.iter().collect();
        if have_groups != groups.iter().collect() {
            self.elb.apply_security_groups(name, groups).await?;
        }
        let tags = self.elb.tags(std::slice::from_ref(name)).await?;
        let missing = missing_tags(&tags.get(name).cloned().unwrap_or_default(), &spec.tags);
        if !missing.is_empty() {
            self.elb.add_tags(name, &missing).await?;
        }
        if lb.health_check.as_ref() != Some(&spec.health_check) {
            self.elb
                .configure_health_check(name, &spec.health_check)
                .await?;
        }
        if self.elb.attributes(name).await? != spec.attributes {
            self.elb.set_attributes(name, &spec.attributes).await?;
        }
        self.converge_proxy(spec, &lb.proxy_ports).await?;
        self.converge_ssl_policy(spec, &lb.listener_policies)
            .await?;
        let (register, deregister) = diff(&lb.instances, wanted);
        self.elb.register(name, &register).await?;
        self.elb.deregister(name, &deregister).await?;
        Ok(())
    }

    async fn converge_proxy(
        &self,
        spec: &ClassicSpec,
        current: &BTreeSet<i32>,
    ) -> Result<(), CloudError> {
        let (on, off) = diff(current, &spec.proxy_ports);
        if !on.is_empty() {
            self.elb.ensure_proxy_policy(&spec.name).await?;
        }
        for port in on {
            self.elb
                .set_backend_policies(&spec.name, port, &[PROXY_PROTOCOL_POLICY.to_string()])
                .await?;
        }
        for port in off {
            self.elb.set_backend_policies(&spec.name, port, &[]).await?;
        }
        Ok(())
    }

    /// Puts the SSL negotiation policy on every TLS listener that lacks it.
    async fn converge_ssl_policy(
        &self,
        spec: &ClassicSpec,
        current: &BTreeMap<i32, Vec<String>>,
    ) -> Result<(), CloudError> {
        let Some(predefined) = &spec.ssl_policy else {
            return Ok(());
        };
        let policy = ssl_policy_name(predefined);
        let mut created = false;
        for l in spec.listeners.iter().filter(|l| l.certificate.is_some()) {
            if current
                .get(&l.port)
                .is_some_and(|p| p == std::slice::from_ref(&policy))
            {
                continue;
            }
            if !created {
                self.elb
                    .ensure_ssl_policy(&spec.name, &policy, predefined)
                    .await?;
                created = true;
            }
            self.elb
                .set_listener_policies(&spec.name, l.port, std::slice::from_ref(&policy))
                .await?;
        }
        Ok(())
    }

    /// The load balancer's own group with exactly the listener rules; found by name first, so
    /// a create interrupted after AWS made the group never makes a second one.
    async fn ensure_managed_group(
        &self,
        vpc: &str,
        request: &LoadBalancerRequest,
        spec: &ClassicSpec,
    ) -> Result<String, CloudError> {
        let group_name = managed_group_name(&spec.name);
        let ports: Vec<u16> = request.ports.iter().map(|p| p.port).collect();
        let desired = listener_rules(&ports, &source_ranges(&request.source_ranges));
        let (id, current) = match self.ec2.security_group_by_name(vpc, &group_name).await? {
            Some(g) => (g.id, g.cidr_rules),
            None => {
                let description = format!(
                    "Security group for Kubernetes ELB {} ({}/{})",
                    spec.name, request.service.namespace, request.service.name
                );
                let tags = BTreeMap::from([
                    (cluster_tag_key(&self.cluster_id), OWNED.to_string()),
                    (
                        stratus_aws_api::tags::SERVICE_NAME_TAG.to_string(),
                        format!("{}/{}", request.service.namespace, request.service.name),
                    ),
                ]);
                let id = self
                    .ec2
                    .create_security_group(vpc, &group_name, &description, &tags)
                    .await?;
                (id, BTreeSet::new())
            }
        };
        let (add, remove) = diff(&current, &desired);
        self.ec2.update_cidr_rules(&id, &add, &remove).await?;
        Ok(id)
    }

    /// The cluster-wide backend group, found by name or made (tagged, no rules of its own).
    /// Single flight: the lock is held across the look-up and the create, so however many
    /// Services sync at once, the group is created once.
    async fn ensure_backend_group(&self, vpc: &str) -> Result<String, CloudError> {
        let mut backend = self.backend.lock().await;
        if let Some((v, id)) = backend.as_ref() {
            if v == vpc {
                return Ok(id.clone());
            }
        }
        let name = backend_group_name(&self.cluster_id);
        let id = match self.ec2.security_group_by_name(vpc, &name).await? {
            Some(g) => g.id,
            None => {
                let tags = BTreeMap::from([
                    (cluster_tag_key(&self.cluster_id), OWNED.to_string()),
                    (ROLE_TAG.to_string(), BACKEND_ROLE.to_string()),
                ]);
                let description = format!(
                    "Kubernetes ELBs of cluster {} reach the nodes through this group",
                    self.cluster_id
                );
                self.ec2
                    .create_security_group(vpc, &name, &description, &tags)
                    .await?
            }
        };
        *backend = Some((vpc.to_string(), id.clone()));
        Ok(id)
    }

    /// Lets the backend group into every node group of the targets (one rule per node group,
    /// shared by all load balancers; removed by the reaper once no load balancer is left).
    async fn ensure_backend_rules(
        &self,
        lb_name: &str,
        backend: &str,
        instances: &[Arc<Instance>],
    ) -> Result<(), CloudError> {
        let mut memo = self.backend_rules.lock().await;
        let instance_groups: BTreeSet<String> = instances
            .iter()
            .flat_map(|i| i.security_groups.iter().cloned())
            .collect();
        let now = tokio::time::Instant::now();
        if let Some(wanted) =
            BackendRuleMemo::covered(memo.as_ref(), backend, &instance_groups, now)
        {
            self.remember(lb_name, |k| {
                k.node_groups = wanted;
                k.instance_groups = instance_groups;
                k.source_group = Some((backend.to_string(), true));
            });
            return Ok(());
        }
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
        let rule = allow_all_from(backend, BACKEND_RULE_DESCRIPTION);
        for g in &wanted {
            if !known.get(g).is_some_and(|sg| has_rule(sg, &rule)) {
                self.ec2.authorize_group_rule(g, &rule).await?;
            }
        }
        *memo = Some(BackendRuleMemo::after_check(
            memo.take(),
            backend,
            &instance_groups,
            &wanted,
            now,
        ));
        self.remember(lb_name, |k| {
            k.node_groups = wanted;
            k.instance_groups = instance_groups;
            k.source_group = Some((backend.to_string(), true));
        });
        Ok(())
    }

    /// Removes the backend rules from every group and deletes the backend group (when no
    /// load balancer of the cluster is left).
    pub(super) async fn delete_backend_group(&self) -> Result<bool, CloudError> {
        // Held throughout: no sync reuses the group while it goes.
        let mut backend = self.backend.lock().await;
        let name = backend_group_name(&self.cluster_id);
        let mut deleted = false;
        for g in self.ec2.security_groups_named(&name).await? {
            if g.tags
                .get(&cluster_tag_key(&self.cluster_id))
                .map(String::as_str)
                != Some(OWNED)
            {
                continue;
            }
            for user in self.ec2.security_groups_referencing(None, &g.id).await? {
                for r in user.group_rules.iter().filter(|r| r.source_group == g.id) {
                    self.ec2.revoke_group_rule(&user.id, r).await?;
                }
            }
            self.ec2.delete_security_group(&g.id).await?;
            deleted = true;
        }
        *backend = None;
        *self.backend_rules.lock().await = None;
        Ok(deleted)
    }

    /// Registers and deregisters only the change; the node groups are touched only when a
    /// target sits in a group not seen before. Two ELB calls at most in steady state.
    pub(super) async fn update_classic_targets(
        &self,
        request: &LoadBalancerRequest,
        ann: &LbAnnotations,
    ) -> Result<bool, CloudError> {
        let name = request.service.default_load_balancer_name();
        let instances = self.target_instances(request, ann).await?;
        let wanted = ids(&instances);
        let known = match self.recall(&name) {
            Some(k) => k,
            None => match self.elb.describe(&name).await? {
                Some(lb) => crate::lb::Known {
                    targets: lb.instances,
                    ..Default::default()
                },
                None => return Ok(false),
            },
        };
        let (register, deregister) = diff(&known.targets, &wanted);
        self.elb.register(&name, &register).await?;
        self.elb.deregister(&name, &deregister).await?;
        self.remember(&name, |k| k.targets = wanted.clone());
        let new_group = instances
            .iter()
            .flat_map(|i| i.security_groups.iter())
            .any(|g| !known.instance_groups.contains(g));
        if new_group && !self.settings.disable_security_group_ingress {
            if let Some((backend, _)) = &known.source_group {
                self.ensure_backend_rules(&name, backend, &instances)
                    .await?;
            }
        }
        Ok(!register.is_empty() || !deregister.is_empty())
    }

    /// Deletes the load balancer and its own group (with any rule elsewhere that names that
    /// group, e.g. per-load-balancer node rules an upstream CCM left). Groups Stratus did not
    /// make are never deleted, and no rule from a shared group is touched.
    pub(super) async fn delete_classic(&self, name: &str) -> Result<(), CloudError> {
        let lb = self.elb.describe(name).await?;
        let managed = self
            .ec2
            .security_groups_named(&managed_group_name(name))
            .await?;
        for own in &managed {
            for g in self.ec2.security_groups_referencing(None, &own.id).await? {
                for r in g.group_rules.iter().filter(|r| r.source_group == own.id) {
                    self.ec2.revoke_group_rule(&g.id, r).await?;
                }
            }
        }
        if lb.is_some() {
            self.elb.delete(name).await?;
        }
        for g in managed {
            if g.tags
                .get(&cluster_tag_key(&self.cluster_id))
                .map(String::as_str)
                == Some(OWNED)
            {
                self.ec2.delete_security_group(&g.id).await?;
            }
        }
        Ok(())
    }
}
