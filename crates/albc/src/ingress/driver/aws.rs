//! Makes AWS match one group's planned ALB, starting from what the last successful apply left
//! (remembered per group) instead of reading AWS back: the managed frontend security group, the
//! load balancer (replaced when its scheme changed; security groups, IP address type and
//! attributes changed in place), target groups (health checks and attributes changed in place)
//! with their internal TargetGroupBindings, listeners (protocol, certificates, SSL policy and
//! default action changed in place) and their rules by difference. A plan equal to the remembered one
//! costs no AWS call at all.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_sdk_elasticloadbalancingv2::types::{IpAddressType, LoadBalancerTypeEnum, ProtocolEnum};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::Api;
use stratus_aws_api::elbv2::{
    LoadBalancer, NewLoadBalancer, NewRule, NewTargetGroup, Placement, Rule,
};
use stratus_aws_api::subnets::choose_subnets;
use tokio::time::Instant;

use crate::ingress::class_params::subnets_matching;
use crate::ingress::context::{IngressCtx, IngressError};
use crate::ingress::drift;
use crate::ingress::live::{
    health_settings, listener_settings, sorted_extra, Applied, LiveListener, LiveTargetGroup,
};
use crate::ingress::plan::{load_balancer_name, AlbSpec, GroupId, TargetGroupSpec};
use crate::ingress::rules::plan_rules;
use crate::ingress::security;
use crate::ingress::tags::{CLUSTER_TAG, RESOURCE_TAG, STACK_LABEL, STACK_TAG};
use crate::ingress::target_groups::{
    hold_target_group_attributes, stack_target_groups, tagged_target_groups, target_type,
};
use crate::tgb::internal::{self, InternalBinding};
use crate::tgb::targets::service_port;

/// How long what a group's last apply left in AWS is trusted without reading it back (the
/// periodic resync of every Ingress always comes later than this, so AWS is read again).
pub const FRESH: Duration = Duration::from_secs(300);

/// `elbv2.k8s.aws/cluster` and `ingress.k8s.aws/stack` of a group.
pub fn stack_tags(ctx: &IngressCtx, group: &GroupId) -> BTreeMap<String, String> {
    BTreeMap::from([
        (CLUSTER_TAG.to_string(), ctx.settings.cluster.clone()),
        (STACK_TAG.to_string(), group.key()),
    ])
}

/// Makes AWS match `spec`, starting from `known` (what the last apply left, if still fresh).
pub async fn apply(
    ctx: &IngressCtx,
    spec: &AlbSpec,
    known: Option<Applied>,
) -> Result<Applied, IngressError> {
    let known = known.filter(|k| k.at.elapsed() < FRESH);
    if let Some(k) = &known {
        if k.spec == *spec {
            return Ok(k.clone());
        }
    }
    let stack = stack_tags(ctx, &spec.group);
    let mut tags = ctx.settings.default_tags.clone();
    tags.extend(spec.tags.clone());
    tags.extend(stack.clone());
    // The managed frontend group, kept in step with the listeners (a changed plan only).
    let managed = spec.security_groups.is_empty();
    // With a managed frontend group (or given ones and `manage-backend-security-group-rules`),
    // the shared backend group too: it is the targets' source.
    let backend = if managed || spec.manage_backend_rules {
        backend_group(ctx).await?
    } else {
        None
    };
    let wanted_groups: Vec<String> = if managed {
        let ec2 = ctx.subnets.ec2();
        let rules = security::wanted_rules(spec);
        let owner = security::Owner::ingress(&stack);
        let frontend =
            security::ensure(ec2, &ctx.settings.vpc, &spec.name, &rules, owner, &tags).await?;
        std::iter::once(frontend).chain(backend.clone()).collect()
    } else {
        spec.security_groups
            .iter()
            .cloned()
            .chain(backend.clone())
            .collect()
    };
    let (mut lb, created) = load_balancer(ctx, spec, &known, &wanted_groups, &tags).await?;
    if !created {
        if let Some(groups) = drift::security_groups_to_set(&lb, &wanted_groups) {
            ctx.alb.set_security_groups(&lb.arn, &groups).await?;
            lb.security_groups = groups;
            if !managed {
                // Given groups replaced the managed one: it goes.
                security::remove(ctx.subnets.ec2(), security::Owner::ingress(&stack)).await?;
            }
        }
        if lb.is_dualstack() != spec.dualstack {
            let kind = ip_address_type(spec.dualstack);
            ctx.alb.set_ip_address_type(&lb.arn, kind.clone()).await?;
            lb.ip_address_type = Some(kind.as_str().to_string());
        }
    }
    let attributes_known = known
        .as_ref()
        .is_some_and(|k| k.spec.attributes == spec.attributes && !created);
    if !spec.attributes.is_empty() && !attributes_known {
        let live = if created {
            BTreeMap::new()
        } else {
            ctx.alb.load_balancer_attributes(&lb.arn).await?
        };
        let set = drift::attributes_to_set(&live, spec);
        if !set.is_empty() {
            ctx.alb
                .modify_load_balancer_attributes(&lb.arn, &set)
                .await?;
        }
    }
    let (existing, tg_arns) = target_groups(ctx, spec, &known, &tags, backend.as_deref()).await?;
    // Listeners by port (the rules of a replaced load balancer went with it), then rules.
    let (mut listeners, known_rules) = match (&known, created) {
        (_, true) => (BTreeMap::new(), BTreeMap::new()),
        (Some(k), false) => (k.listeners.clone(), k.rules.clone()),
        (None, false) => (
            ctx.alb
                .listeners(&lb.arn)
                .await?
                .iter()
                .filter_map(LiveListener::of)
                .collect(),
            BTreeMap::new(),
        ),
    };
    let wanted_ports: Vec<i32> = spec.listeners.iter().map(|l| l.port.port).collect();
    for (port, live) in listeners.clone() {
        if !wanted_ports.contains(&port) {
            ctx.alb.delete_listener(&live.arn).await?;
            listeners.remove(&port);
        }
    }
    let mut rules = BTreeMap::new();
    for l in &spec.listeners {
        let port = l.port.port;
        let (live, live_rules) = match listeners.remove(&port) {
            Some(mut live) => {
                if drift::listener_differs(&live, l) {
                    ctx.alb
                        .modify_listener(&live.arn, &listener_settings(l))
                        .await?;
                    live.https = l.port.https;
                    live.certificate = l.certificates.first().cloned();
                    live.ssl_policy = l.ssl_policy.clone().or(live.ssl_policy);
                    live.redirect_to = l.redirect_to;
                }
                let have_extra = match &live.extra_certificates {
                    Some(e) => e.clone(),
                    None if !live.https => Vec::new(),
                    None => ctx.alb.extra_certificates(&live.arn).await?,
                };
                let (add, remove) = drift::certificate_changes(&have_extra, l);
                ctx.alb.change_certificates(&live.arn, &add, true).await?;
                ctx.alb
                    .change_certificates(&live.arn, &remove, false)
                    .await?;
                live.extra_certificates = Some(sorted_extra(l));
                let live_rules = match known_rules.get(&port) {
                    Some(r) => r.clone(),
                    None => ctx.alb.rules(&live.arn).await?,
                };
                (live, live_rules)
            }
            None => {
                let arn = ctx
                    .alb
                    .create_listener(&lb.arn, &listener_settings(l))
                    .await?;
                ctx.alb
                    .change_certificates(&arn, &sorted_extra(l), true)
                    .await?;
                (LiveListener::made(arn, l), Vec::new())
            }
        };
        let changes = plan_rules(&live_rules, &l.rules, &tg_arns);
        for r in &changes.delete {
            ctx.alb.delete_rule(r).await?;
        }
        let mut now = changes.keep;
        for r in changes.create {
            let tg = &tg_arns[&r.target_group];
            let new = NewRule {
                priority: r.priority,
                hosts: &r.hosts,
                paths: &r.paths,
                target_group_arn: tg,
            };
            let arn = ctx.alb.create_rule(&live.arn, &new).await?;
            now.push(Rule {
                arn,
                priority: r.priority,
                hosts: r.hosts.clone(),
                paths: r.paths.clone(),
                target_group: tg.clone(),
            });
        }
        rules.insert(port, now);
        listeners.insert(port, live);
    }
    // Target groups no rule uses any more.
    let mut kept = BTreeMap::new();
    for (name, live) in existing {
        if spec.target_groups.contains_key(&name) {
            kept.insert(name, live);
        } else {
            internal::remove(&ctx.client, &name).await?;
            ctx.alb.delete_target_group(&live.arn).await?;
        }
    }
    Ok(Applied {
        spec: spec.clone(),
        lb,
        target_groups: kept,
        listeners,
        rules,
        backend,
        at: Instant::now(),
    })
}

/// The load balancer of `spec`: the remembered or found one (replaced when its scheme is not
/// the planned one: AWS cannot change it in place), else a new one; and whether it is new.
async fn load_balancer(
    ctx: &IngressCtx,
    spec: &AlbSpec,
    known: &Option<Applied>,
    groups: &[String],
    tags: &BTreeMap<String, String>,
) -> Result<(LoadBalancer, bool), IngressError> {
    let found = match known {
        Some(k) => Some(k.lb.clone()),
        None => ctx.alb.load_balancer(&spec.name).await?,
    };
    match found {
        Some(lb) if lb.is_internet_facing() == spec.internet_facing => return Ok((lb, false)),
        Some(lb) => {
            tracing::info!(load_balancer = %spec.name, "scheme changed: replacing the load balancer");
            ctx.alb.delete_load_balancer(&lb.arn).await?;
        }
        None => {}
    }
    let all = ctx.subnets.subnets(&ctx.settings.vpc).await?;
    let asked = if spec.subnet_tags.is_empty() {
        spec.subnets.clone()
    } else {
        subnets_matching(&all, &spec.subnet_tags).map_err(IngressError::Subnets)?
    };
    let chosen = choose_subnets(&all, &asked, &ctx.settings.cluster, !spec.internet_facing)
        .map_err(IngressError::Subnets)?;
    let mut lb_tags = tags.clone();
    lb_tags.insert(RESOURCE_TAG.into(), "LoadBalancer".into());
    let lb = ctx
        .alb
        .create_load_balancer(&NewLoadBalancer {
            name: &spec.name,
            kind: LoadBalancerTypeEnum::Application,
            internet_facing: spec.internet_facing,
            ip_address_type: Some(ip_address_type(spec.dualstack)),
            placement: Placement::Subnets(chosen),
            security_groups: groups,
            tags: &lb_tags,
        })
        .await?;
    Ok((lb, true))
}

/// The stack's target groups as they are (remembered, or one paged read whose list also finds
/// a leftover of a planned name without tags, adopted) and the planned ones' ARNs by name:
/// missing ones created, changed health checks modified, bindings ensured.
async fn target_groups(
    ctx: &IngressCtx,
    spec: &AlbSpec,
    known: &Option<Applied>,
    tags: &BTreeMap<String, String>,
    backend: Option<&str>,
) -> Result<(BTreeMap<String, LiveTargetGroup>, BTreeMap<String, String>), IngressError> {
    let (mut existing, by_name) = match known {
        Some(k) => (k.target_groups.clone(), BTreeMap::new()),
        None => {
            let (all, tagged) =
                stack_target_groups(&ctx.alb, &stack_tags(ctx, &spec.group)).await?;
            let by_name: BTreeMap<String, LiveTargetGroup> =
                all.into_iter().map(|g| (g.name.clone(), g)).collect();
            let existing = tagged
                .into_iter()
                .filter_map(|(name, _)| Some((name.clone(), by_name.get(&name)?.clone())))
                .collect();
            (existing, by_name)
        }
    };
    let mut arns = BTreeMap::new();
    for tg in spec.target_groups.values() {
        let live = match existing.get(&tg.name).or_else(|| by_name.get(&tg.name)) {
            Some(live) => {
                let mut live = live.clone();
                if drift::health_differs(&live.health, &tg.health) {
                    ctx.alb
                        .modify_health_check(&live.arn, &health_settings(&tg.health))
                        .await?;
                    live.health = tg.health.clone();
                }
                let held = known.as_ref().is_some_and(|k| {
                    k.spec.target_groups.get(&tg.name).map(|t| &t.attributes)
                        == Some(&tg.attributes)
                });
                if !held {
                    hold_target_group_attributes(&ctx.alb, &live.arn, &tg.attributes, false)
                        .await?;
                }
                live
            }
            None => {
                let mut t = tags.clone();
                t.insert(
                    RESOURCE_TAG.into(),
                    format!("{}/{}:{}", tg.namespace, tg.service, port_str(&tg.port)),
                );
                let arn = ctx
                    .alb
                    .create_target_group(&NewTargetGroup {
                        name: &tg.name,
                        protocol: ProtocolEnum::Http,
                        port: 80,
                        vpc_id: &ctx.settings.vpc,
                        target_type: target_type(tg.ip),
                        health_check: &health_settings(&tg.health),
                        tags: &t,
                    })
                    .await?;
                hold_target_group_attributes(&ctx.alb, &arn, &tg.attributes, true).await?;
                LiveTargetGroup {
                    name: tg.name.clone(),
                    arn,
                    health: tg.health.clone(),
                }
            }
        };
        // A binding made by a fresh earlier apply stays made.
        let bound = known.as_ref().is_some_and(|k| {
            k.spec.target_groups.get(&tg.name) == Some(tg) && k.backend.as_deref() == backend
        });
        if !bound {
            ensure_binding(ctx, tg, &live.arn, &spec.group, backend).await?;
        }
        arns.insert(tg.name.clone(), live.arn.clone());
        existing.insert(tg.name.clone(), live);
    }
    Ok((existing, arns))
}

fn ip_address_type(dualstack: bool) -> IpAddressType {
    if dualstack {
        IpAddressType::Dualstack
    } else {
        IpAddressType::Ipv4
    }
}

fn port_str(p: &IntOrString) -> String {
    match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

/// The shared backend group's ID (made or found once per process), if ALBs get one.
async fn backend_group(ctx: &IngressCtx) -> Result<Option<String>, IngressError> {
    Ok(ctx
        .settings
        .backend
        .id(ctx.subnets.ec2(), &ctx.settings.vpc, &ctx.settings.cluster)
        .await?)
}

/// The port the backend group must reach on the targets of `tg`: the Service port's target
/// port (`ip`; a name is resolved by the binding to the ports it registers) or its NodePort
/// (`instance`). None while the Service or its port is missing (the next read-back sets it).
async fn reached_port(
    ctx: &IngressCtx,
    tg: &TargetGroupSpec,
) -> Result<Option<IntOrString>, kube::Error> {
    let Some(svc) = Api::<Service>::namespaced(ctx.client.clone(), &tg.namespace)
        .get_opt(&tg.service)
        .await?
    else {
        return Ok(None);
    };
    let Ok(port) = service_port(&svc, &tg.port) else {
        return Ok(None);
    };
    Ok(if tg.ip {
        Some(
            port.target_port
                .clone()
                .unwrap_or(IntOrString::Int(port.port)),
        )
    } else {
        port.node_port.map(IntOrString::Int)
    })
}

/// The internal TargetGroupBinding of a backend (named after its target group), with the
/// backend group's `spec.networking` when there is one.
async fn ensure_binding(
    ctx: &IngressCtx,
    tg: &TargetGroupSpec,
    arn: &str,
    group: &GroupId,
    backend: Option<&str>,
) -> Result<(), kube::Error> {
    let networking = match backend {
        Some(b) => reached_port(ctx, tg)
            .await?
            .map(|port| internal::backend_networking(b, port, &["TCP"])),
        None => None,
    };
    let binding = InternalBinding {
        namespace: &tg.namespace,
        name: &tg.name,
        arn,
        ip: tg.ip,
        service: &tg.service,
        port: tg.port.clone(),
        vpc: &ctx.settings.vpc,
        labels: BTreeMap::from([(
            STACK_LABEL.to_string(),
            load_balancer_name(&ctx.settings.cluster, group),
        )]),
        networking,
        node_selector: None,
    };
    internal::ensure(&ctx.client, &binding).await
}

/// Removes everything of a group with no member left.
pub async fn teardown(ctx: &IngressCtx, group: &GroupId) -> Result<(), IngressError> {
    let name = load_balancer_name(&ctx.settings.cluster, group);
    if let Some(lb) = ctx.alb.load_balancer(&name).await? {
        ctx.alb.delete_load_balancer(&lb.arn).await?;
    }
    for (tg, arn) in tagged_target_groups(&ctx.alb, &stack_tags(ctx, group)).await? {
        internal::remove(&ctx.client, &tg).await?;
        ctx.alb.delete_target_group(&arn).await?;
    }
    let stack = stack_tags(ctx, group);
    security::remove(ctx.subnets.ec2(), security::Owner::ingress(&stack)).await?;
    ctx.settings
        .backend
        .release_if_unused(ctx.subnets.ec2(), &ctx.alb, &ctx.settings.cluster)
        .await?;
    Ok(())
}
