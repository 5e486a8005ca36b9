//! Keeps every binding's `spec.networking` as ingress rules on its targets' security groups, as
//! upstream's backend rules: each target's network interface (the pod address's, or an
//! instance's primary one) is looked up once, its group chosen like the CCM chooses a node's
//! (the one tagged for the cluster, else its only one), and each group then holds the union of
//! the rules every binding wants there, described `elbv2.k8s.aws/targetGroupBinding=shared`.
//! Nothing is called while a binding's wanted rules stay the same; a change reads the affected
//! groups once and adds and removes the difference. Rules are removed only once every binding
//! has been applied since start-up (another binding not seen yet may still want them).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Mutex;

use stratus_aws_api::ec2::SecurityGroup;
use stratus_aws_api::elbv2::TargetRef;
use stratus_aws_api::node_rules::node_group_of;
use stratus_aws_api::sg_rules::{CidrRule, GroupRule};
use stratus_aws_api::Ec2;
use stratus_cloud::CloudError;

use crate::crd::Networking;
use crate::tgb::networking::{union_by_group, wanted_rules, Rules, SHARED_DESCRIPTION};

/// Why the rules of a binding could not be kept.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// The networking spec or a target's groups are unusable.
    #[error("{0}")]
    Spec(String),
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] CloudError),
}

/// The rules of every binding and the group of every target seen.
pub struct NetworkingRules {
    ec2: Ec2,
    cluster: String,
    /// Target (IP or instance ID) → the group its rules go to (None: no interface or group
    /// found, not looked up again: overlay pod addresses have no interface).
    target_group: Mutex<HashMap<String, Option<String>>>,
    /// Binding → wanted rules per group.
    wanted: Mutex<HashMap<String, BTreeMap<String, Rules>>>,
    /// Bindings applied since start-up.
    seen: Mutex<HashSet<String>>,
    /// One change of groups at a time (they are shared between bindings).
    serial: tokio::sync::Mutex<()>,
}

impl NetworkingRules {
    /// Rules kept through `ec2`, which also finds the targets' interfaces; groups tagged
    /// `kubernetes.io/cluster/<cluster>` are preferred.
    pub fn new(ec2: Ec2, cluster: String) -> Self {
        Self {
            ec2,
            cluster,
            target_group: Mutex::new(HashMap::new()),
            wanted: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashSet::new()),
            serial: tokio::sync::Mutex::new(()),
        }
    }

    /// Whether `binding` has rules kept.
    pub fn has(&self, binding: &str) -> bool {
        self.wanted.lock().expect("wanted").contains_key(binding)
    }

    /// Makes the groups of `targets` hold `networking` for `binding`; `all` are the keys of
    /// every binding that exists now.
    pub async fn apply(
        &self,
        binding: &str,
        networking: Option<&Networking>,
        ip: bool,
        targets: &BTreeSet<TargetRef>,
        all: &[String],
    ) -> Result<(), RulesError> {
        self.seen.lock().expect("seen").insert(binding.to_string());
        let had = self.wanted.lock().expect("wanted").contains_key(binding);
        let networking = match networking {
            Some(n) if !n.ingress.is_empty() => n,
            _ if !had => return Ok(()),
            _ => return self.forget(binding, all).await,
        };
        let ports: BTreeSet<i32> = targets.iter().map(|t| t.port).collect();
        let rules = wanted_rules(networking, &ports).map_err(RulesError::Spec)?;
        let groups = self.groups_of(ip, targets).await?;
        let per_group: BTreeMap<String, Rules> =
            groups.into_iter().map(|g| (g, rules.clone())).collect();
        self.set(binding, per_group, all).await
    }

    /// Drops the rules `binding` wanted (it is deleted or wants none any more).
    pub async fn forget(&self, binding: &str, all: &[String]) -> Result<(), RulesError> {
        if !self.wanted.lock().expect("wanted").contains_key(binding) {
            return Ok(());
        }
        self.set(binding, BTreeMap::new(), all).await
    }

    /// Records `binding`'s wanted rules and brings the groups they touch (now or before) to the
    /// union over every binding.
    async fn set(
        &self,
        binding: &str,
        per_group: BTreeMap<String, Rules>,
        all: &[String],
    ) -> Result<(), RulesError> {
        let _one = self.serial.lock().await;
        let previous = {
            let mut wanted = self.wanted.lock().expect("wanted");
            let previous = wanted.get(binding).cloned();
            if previous.as_ref() == Some(&per_group) {
                return Ok(());
            }
            if per_group.is_empty() {
                wanted.remove(binding);
            } else {
                wanted.insert(binding.to_string(), per_group.clone());
            }
            previous.unwrap_or_default()
        };
        let affected: BTreeSet<String> = previous.keys().chain(per_group.keys()).cloned().collect();
        let union = {
            let wanted = self.wanted.lock().expect("wanted");
            union_by_group(wanted.values())
        };
        let all_seen = {
            let seen = self.seen.lock().expect("seen");
            all.iter().all(|k| seen.contains(k))
        };
        let result = self.sync_groups(&affected, &union, all_seen).await;
        if result.is_err() {
            // Tried again in full by the binding's retry.
            let mut wanted = self.wanted.lock().expect("wanted");
            if previous.is_empty() {
                wanted.remove(binding);
            } else {
                wanted.insert(binding.to_string(), previous);
            }
        }
        result
    }

    async fn sync_groups(
        &self,
        affected: &BTreeSet<String>,
        union: &BTreeMap<String, Rules>,
        remove: bool,
    ) -> Result<(), RulesError> {
        let empty = Rules::default();
        for group in self.ec2.security_groups_by_id(affected).await? {
            let want = union.get(&group.id).unwrap_or(&empty);
            let have = managed_rules(&group);
            for r in want.groups.difference(&have.groups) {
                self.ec2.authorize_group_rule(&group.id, r).await?;
            }
            let add: Vec<CidrRule> = want.cidrs.difference(&have.cidrs).cloned().collect();
            let gone: Vec<CidrRule> = if remove {
                have.cidrs.difference(&want.cidrs).cloned().collect()
            } else {
                Vec::new()
            };
            self.ec2.update_cidr_rules(&group.id, &add, &gone).await?;
            if remove {
                for r in have.groups.difference(&want.groups) {
                    self.ec2.revoke_group_rule(&group.id, r).await?;
                }
            }
            tracing::debug!(group = %group.id, "networking rules kept");
        }
        Ok(())
    }

    /// The groups the targets' rules go to; targets looked up once, the unknown ones in one
    /// paged DescribeNetworkInterfaces (and one DescribeSecurityGroups when an interface has
    /// several groups). A target without a network interface is skipped with a warning.
    async fn groups_of(
        &self,
        ip: bool,
        targets: &BTreeSet<TargetRef>,
    ) -> Result<BTreeSet<String>, RulesError> {
        let unknown: Vec<String> = {
            let known = self.target_group.lock().expect("targets");
            let ids: BTreeSet<&String> = targets.iter().map(|t| &t.id).collect();
            ids.into_iter()
                .filter(|id| !known.contains_key(*id))
                .cloned()
                .collect()
        };
        if !unknown.is_empty() {
            let filter = if ip {
                "addresses.private-ip-address"
            } else {
                "attachment.instance-id"
            };
            let interfaces = self.ec2.interfaces_by(filter, &unknown).await?;
            let several: BTreeSet<String> = interfaces
                .iter()
                .filter(|i| i.groups.len() > 1)
                .flat_map(|i| i.groups.iter().cloned())
                .collect();
            let described: BTreeMap<String, SecurityGroup> = self
                .ec2
                .security_groups_by_id(&several)
                .await?
                .into_iter()
                .map(|g| (g.id.clone(), g))
                .collect();
            let mut known = self.target_group.lock().expect("targets");
            for i in interfaces.iter().filter(|i| ip || i.primary) {
                let id = if ip {
                    i.private_ip.clone()
                } else {
                    i.instance_id.clone().unwrap_or_default()
                };
                match node_group_of(&i.groups, &described, &self.cluster) {
                    Ok(g) => {
                        known.insert(id, g);
                    }
                    Err(e) => return Err(RulesError::Spec(format!("target {id}: {e}"))),
                }
            }
            let missing: Vec<&String> = unknown
                .iter()
                .filter(|id| !known.contains_key(*id))
                .collect();
            if !missing.is_empty() {
                tracing::warn!(targets = ?missing, "no network interface found: their security groups get no rule");
            }
            for id in missing {
                known.insert(id.clone(), None);
            }
        }
        let known = self.target_group.lock().expect("targets");
        Ok(targets
            .iter()
            .filter_map(|t| known.get(&t.id).cloned().flatten())
            .collect())
    }
}

/// The rules of `group` this controller manages (by their description).
fn managed_rules(group: &SecurityGroup) -> Rules {
    Rules {
        groups: group
            .group_rules
            .iter()
            .filter(|r| r.description == SHARED_DESCRIPTION)
            .cloned()
            .collect::<BTreeSet<GroupRule>>(),
        cidrs: group
            .cidr_rules
            .iter()
            .filter(|r| r.description == SHARED_DESCRIPTION)
            .cloned()
            .collect(),
    }
}
