//! What the reaper deletes, as a pure function of the tagged ELBv2 resources (and managed
//! security groups) and the owners that
//! still exist: only resources carrying this cluster's tag and a stack tag whose owner is gone;
//! another cluster's, untagged or stack-less resources are never touched.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;

use crate::crd::IngressClassParams;
use kube::ResourceExt;

use crate::ingress::tags::{CLUSTER_TAG, STACK_TAG as INGRESS_STACK_TAG};
use crate::service::driver::STACK_TAG as SERVICE_STACK_TAG;
use crate::service::plan::stack_key;

/// Which kind of ELBv2 resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A load balancer (its listeners and rules go with it).
    LoadBalancer,
    /// A target group.
    TargetGroup,
    /// A managed security group (EC2; its ID in place of an ARN).
    SecurityGroup,
}

/// An ELBv2 resource with its tags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tagged {
    /// ARN.
    pub arn: String,
    /// Load balancer or target group.
    pub kind: Kind,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
}

/// Who made a resource.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Owner {
    /// An Ingress group (its stack key: the group name, or `namespace/name` of a lone Ingress).
    IngressGroup(String),
    /// An NLB Service (`namespace/name`).
    Service(String),
}

/// The owners that exist in Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveOwners {
    /// Every stack key an existing Ingress may own.
    pub ingress_groups: BTreeSet<String>,
    /// `namespace/name` of every existing Service.
    pub services: BTreeSet<String>,
}

impl LiveOwners {
    /// The owners of the listed Ingresses and Services. Conservative: an Ingress keeps both its
    /// own `namespace/name` stack and the group its `group.name` annotation names (whatever its
    /// class, even while it is being deleted), so a resource is reaped only when no object
    /// could own it.
    pub fn of(ingresses: &[Ingress], services: &[Service]) -> Self {
        let mut groups = BTreeSet::new();
        for ing in ingresses {
            let ns = ing.namespace().unwrap_or_default();
            groups.insert(stack_key(&ns, &ing.name_any()));
            if let Some(g) = ing
                .annotations()
                .get("alb.ingress.kubernetes.io/group.name")
            {
                groups.insert(g.trim().to_string());
            }
        }
        let services = services
            .iter()
            .map(|s| stack_key(&s.namespace().unwrap_or_default(), &s.name_any()))
            .collect();
        Self {
            ingress_groups: groups,
            services,
        }
    }

    /// Also keeps the group of every IngressClassParams (its Ingresses join it whatever their
    /// own annotations say; conservative again: whether or not an Ingress uses the class now).
    pub fn with_class_groups(mut self, params: &[IngressClassParams]) -> Self {
        self.ingress_groups.extend(
            params
                .iter()
                .filter_map(|p| p.spec.group.as_ref())
                .map(|g| g.name.trim().to_string()),
        );
        self
    }

    fn has(&self, owner: &Owner) -> bool {
        match owner {
            Owner::IngressGroup(k) => self.ingress_groups.contains(k),
            Owner::Service(k) => self.services.contains(k),
        }
    }
}

/// The owner a resource of `cluster` names in its tags; `None` for another cluster's, untagged
/// or stack-less resources.
pub fn owner_of(cluster: &str, tags: &BTreeMap<String, String>) -> Option<Owner> {
    if tags.get(CLUSTER_TAG).map(String::as_str) != Some(cluster) || cluster.is_empty() {
        return None;
    }
    match (tags.get(INGRESS_STACK_TAG), tags.get(SERVICE_STACK_TAG)) {
        (Some(g), None) if !g.is_empty() => Some(Owner::IngressGroup(g.clone())),
        (None, Some(s)) if !s.is_empty() => Some(Owner::Service(s.clone())),
        _ => None,
    }
}

/// What to delete, load balancers first (a target group in use by a listener cannot go).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reap {
    /// Load balancer ARNs and their owners.
    pub load_balancers: Vec<(String, Owner)>,
    /// Target group ARNs and their owners.
    pub target_groups: Vec<(String, Owner)>,
    /// Managed security group IDs and their owners (deleted after the load balancers).
    pub security_groups: Vec<(String, Owner)>,
}

impl Reap {
    /// Whether there is nothing to delete.
    pub fn is_empty(&self) -> bool {
        self.load_balancers.is_empty()
            && self.target_groups.is_empty()
            && self.security_groups.is_empty()
    }
}

/// The resources of `cluster` whose owner is not among `live`.
pub fn plan_reap(cluster: &str, resources: &[Tagged], live: &LiveOwners) -> Reap {
    let mut reap = Reap::default();
    for r in resources {
        let Some(owner) = owner_of(cluster, &r.tags) else {
            continue;
        };
        if live.has(&owner) {
            continue;
        }
        let list = match r.kind {
            Kind::LoadBalancer => &mut reap.load_balancers,
            Kind::TargetGroup => &mut reap.target_groups,
            Kind::SecurityGroup => &mut reap.security_groups,
        };
        list.push((r.arn.clone(), owner));
    }
    reap
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(arn: &str, kind: Kind, tags: &[(&str, &str)]) -> Tagged {
        Tagged {
            arn: arn.into(),
            kind,
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn ingress(ns: &str, name: &str, group: Option<&str>) -> Ingress {
        let mut ann = serde_json::Map::new();
        if let Some(g) = group {
            ann.insert("alb.ingress.kubernetes.io/group.name".into(), g.into());
        }
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": ns, "name": name, "annotations": ann}}))
        .unwrap()
    }

    fn service(ns: &str, name: &str) -> Service {
        serde_json::from_value(serde_json::json!({"metadata": {"namespace": ns, "name": name}}))
            .unwrap()
    }

    #[test]
    fn only_this_clusters_stacks_whose_owner_is_gone() {
        use Kind::*;
        let c = CLUSTER_TAG;
        let (i, s) = (INGRESS_STACK_TAG, SERVICE_STACK_TAG);
        let resources = vec![
            res("lb-shop", LoadBalancer, &[(c, "prod"), (i, "shop")]),
            res("tg-shop", TargetGroup, &[(c, "prod"), (i, "shop")]),
            res("lb-gone", LoadBalancer, &[(c, "prod"), (i, "gone")]),
            res("tg-gone", TargetGroup, &[(c, "prod"), (i, "gone")]),
            res("lb-lone", LoadBalancer, &[(c, "prod"), (i, "default/lone")]),
            res(
                "lb-lone-gone",
                LoadBalancer,
                &[(c, "prod"), (i, "default/x")],
            ),
            res("lb-nlb", LoadBalancer, &[(c, "prod"), (s, "default/dns")]),
            res(
                "tg-nlb-gone",
                TargetGroup,
                &[(c, "prod"), (s, "kube-system/old")],
            ),
            // Another cluster's, untagged, stack-less, both stacks: never.
            res("lb-other", LoadBalancer, &[(c, "dev"), (i, "gone")]),
            res("tg-untagged", TargetGroup, &[]),
            res("tg-no-stack", TargetGroup, &[(c, "prod")]),
            res(
                "tg-both",
                TargetGroup,
                &[(c, "prod"), (i, "gone"), (s, "a/b")],
            ),
            res("tg-empty", TargetGroup, &[(c, "prod"), (i, "")]),
            res("sg-shop", SecurityGroup, &[(c, "prod"), (i, "shop")]),
            res("sg-gone", SecurityGroup, &[(c, "prod"), (i, "gone")]),
            res("sg-other", SecurityGroup, &[(c, "dev"), (i, "gone")]),
        ];
        let live = LiveOwners::of(
            &[
                ingress("default", "web", Some("shop")),
                ingress("default", "lone", None),
            ],
            &[service("default", "dns")],
        );
        let reap = plan_reap("prod", &resources, &live);
        assert_eq!(
            reap.load_balancers,
            vec![
                ("lb-gone".to_string(), Owner::IngressGroup("gone".into())),
                (
                    "lb-lone-gone".to_string(),
                    Owner::IngressGroup("default/x".into())
                ),
            ]
        );
        assert_eq!(
            reap.target_groups,
            vec![
                ("tg-gone".to_string(), Owner::IngressGroup("gone".into())),
                (
                    "tg-nlb-gone".to_string(),
                    Owner::Service("kube-system/old".into())
                ),
            ]
        );
        assert_eq!(
            reap.security_groups,
            vec![("sg-gone".to_string(), Owner::IngressGroup("gone".into()))]
        );
    }

    #[test]
    fn an_ingress_keeps_its_own_stack_and_its_group() {
        let live = LiveOwners::of(&[ingress("ns", "a", Some(" shop "))], &[]);
        assert!(live.ingress_groups.contains("shop"));
        assert!(live.ingress_groups.contains("ns/a"));
        let res = vec![res(
            "lb",
            Kind::LoadBalancer,
            &[(CLUSTER_TAG, "prod"), (INGRESS_STACK_TAG, "ns/a")],
        )];
        assert!(plan_reap("prod", &res, &live).is_empty());
    }

    #[test]
    fn a_class_params_group_is_kept() {
        let params: IngressClassParams = serde_json::from_value(serde_json::json!(
            {"metadata": {"name": "p"}, "spec": {"group": {"name": "edge"}}}))
        .unwrap();
        let res = vec![res(
            "lb",
            Kind::LoadBalancer,
            &[(CLUSTER_TAG, "prod"), (INGRESS_STACK_TAG, "edge")],
        )];
        let without = LiveOwners::of(&[], &[]);
        assert_eq!(plan_reap("prod", &res, &without).load_balancers.len(), 1);
        let with = without.with_class_groups(&[params]);
        assert!(plan_reap("prod", &res, &with).is_empty());
    }

    #[test]
    fn an_empty_cluster_name_reaps_nothing() {
        let res = vec![res(
            "lb",
            Kind::LoadBalancer,
            &[(CLUSTER_TAG, ""), (INGRESS_STACK_TAG, "g")],
        )];
        assert!(plan_reap("", &res, &LiveOwners::default()).is_empty());
    }

    #[test]
    fn nothing_live_reaps_every_stack_of_the_cluster() {
        let res = vec![
            res(
                "tg",
                Kind::TargetGroup,
                &[(CLUSTER_TAG, "prod"), (SERVICE_STACK_TAG, "a/b")],
            ),
            res(
                "lb",
                Kind::LoadBalancer,
                &[(CLUSTER_TAG, "prod"), (INGRESS_STACK_TAG, "g")],
            ),
        ];
        let reap = plan_reap("prod", &res, &LiveOwners::default());
        assert_eq!(reap.load_balancers.len(), 1);
        assert_eq!(reap.target_groups.len(), 1);
    }
}
