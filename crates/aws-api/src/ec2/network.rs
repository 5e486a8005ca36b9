//! EC2 calls the load balancers need: subnets of a VPC, security groups with their rules, and
//! the network interfaces of targets with their groups.
//! Every describe is filtered on the server (by VPC, name, tag or ID).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_ec2::types::{
    IpPermission, IpRange, Ipv6Range, ResourceType, Tag, TagSpecification, UserIdGroupPair,
};
use stratus_cloud::CloudError;

use crate::ec2::{filter, Ec2};
use crate::pager::pages;
use crate::sg_rules::{CidrRule, GroupRule};
use crate::subnets::SubnetInfo;

/// A network interface's address, instance and security groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceGroups {
    /// Its primary private address.
    pub private_ip: String,
    /// The instance it is attached to.
    pub instance_id: Option<String>,
    /// The instance's primary interface (device index 0).
    pub primary: bool,
    /// Its security groups.
    pub groups: Vec<String>,
}

/// A security group with its ingress rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecurityGroup {
    /// The group ID.
    pub id: String,
    /// The group name.
    pub name: String,
    /// Its VPC.
    pub vpc_id: String,
    /// Its tags.
    pub tags: BTreeMap<String, String>,
    /// Its ingress rules from CIDRs.
    pub cidr_rules: BTreeSet<CidrRule>,
    /// Its ingress rules from groups.
    pub group_rules: BTreeSet<GroupRule>,
}

fn tags_of(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or("").to_string())))
        .collect()
}

fn from_sdk(g: &aws_sdk_ec2::types::SecurityGroup) -> SecurityGroup {
    let mut cidr_rules = BTreeSet::new();
    let mut group_rules = BTreeSet::new();
    for p in g.ip_permissions() {
        let protocol = p.ip_protocol().unwrap_or("-1").to_string();
        let from = p.from_port().unwrap_or(-1);
        let to = p.to_port().unwrap_or(-1);
        let cidrs = p
            .ip_ranges()
            .iter()
            .filter_map(|r| Some((r.cidr_ip()?, r.description())))
            .chain(
                p.ipv6_ranges()
                    .iter()
                    .filter_map(|r| Some((r.cidr_ipv6()?, r.description()))),
            );
        for (cidr, description) in cidrs {
            cidr_rules.insert(CidrRule {
                protocol: protocol.clone(),
                from,
                to,
                cidr: cidr.to_string(),
                description: description.unwrap_or("").to_string(),
            });
        }
        for pair in p.user_id_group_pairs() {
            if let Some(source) = pair.group_id() {
                group_rules.insert(GroupRule {
                    protocol: protocol.clone(),
                    from,
                    to,
                    source_group: source.to_string(),
                    description: pair.description().unwrap_or("").to_string(),
                });
            }
        }
    }
    SecurityGroup {
        id: g.group_id().unwrap_or("").to_string(),
        name: g.group_name().unwrap_or("").to_string(),
        vpc_id: g.vpc_id().unwrap_or("").to_string(),
        tags: tags_of(g.tags()),
        cidr_rules,
        group_rules,
    }
}

fn ports_of(protocol: &str, from: i32, to: i32) -> (Option<i32>, Option<i32>) {
    if protocol == "-1" {
        (None, None)
    } else {
        (Some(from), Some(to))
    }
}

fn cidr_permission(rule: &CidrRule) -> IpPermission {
    let (from, to) = ports_of(&rule.protocol, rule.from, rule.to);
    let b = IpPermission::builder()
        .ip_protocol(&rule.protocol)
        .set_from_port(from)
        .set_to_port(to);
    let description = (!rule.description.is_empty()).then(|| rule.description.clone());
    if rule.is_ipv6() {
        b.ipv6_ranges(
            Ipv6Range::builder()
                .cidr_ipv6(&rule.cidr)
                .set_description(description)
                .build(),
        )
        .build()
    } else {
        b.ip_ranges(
            IpRange::builder()
                .cidr_ip(&rule.cidr)
                .set_description(description)
                .build(),
        )
        .build()
    }
}

fn group_permission(rule: &GroupRule) -> IpPermission {
    let (from, to) = ports_of(&rule.protocol, rule.from, rule.to);
    IpPermission::builder()
        .ip_protocol(&rule.protocol)
        .set_from_port(from)
        .set_to_port(to)
        .user_id_group_pairs(
            UserIdGroupPair::builder()
                .group_id(&rule.source_group)
                .description(&rule.description)
                .build(),
        )
        .build()
}

/// Tags in the EC2 SDK shape.
pub fn ec2_tags(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// How often a security group still in use by a just-deleted load balancer is retried.
const DELETE_ATTEMPTS: u32 = 30;
const DELETE_RETRY: Duration = Duration::from_secs(2);

impl Ec2 {
    /// Subnets of a VPC with whether each routes to an internet gateway (two calls).
    pub async fn vpc_subnets(&self, vpc: &str) -> Result<Vec<SubnetInfo>, CloudError> {
        let subnets = self
            .api
            .call("DescribeSubnets", || {
                self.client
                    .describe_subnets()
                    .filters(filter("vpc-id", [vpc]))
                    .send()
            })
            .await?;
        let tables = self
            .api
            .call("DescribeRouteTables", || {
                self.client
                    .describe_route_tables()
                    .filters(filter("vpc-id", [vpc]))
                    .send()
            })
            .await?;
        let mut main_public = false;
        let mut explicit: BTreeMap<String, bool> = BTreeMap::new();
        for t in tables.route_tables() {
            let public = t
                .routes()
                .iter()
                .any(|r| r.gateway_id().is_some_and(|g| g.starts_with("igw")));
            for a in t.associations() {
                if a.main() == Some(true) {
                    main_public = public;
                }
                if let Some(s) = a.subnet_id() {
                    explicit.insert(s.to_string(), public);
                }
            }
        }
        Ok(subnets
            .subnets()
            .iter()
            .filter_map(|s| {
                let id = s.subnet_id()?.to_string();
                Some(SubnetInfo {
                    public: explicit.get(&id).copied().unwrap_or(main_public),
                    zone: s.availability_zone().unwrap_or("").to_string(),
                    tags: tags_of(s.tags()),
                    cidr: s.cidr_block().unwrap_or_default().to_string(),
                    id,
                })
            })
            .collect())
    }

    /// The CIDR blocks of a VPC.
    pub async fn vpc_cidrs(&self, vpc: &str) -> Result<Vec<String>, CloudError> {
        let out = self
            .api
            .call("DescribeVpcs", || {
                self.client.describe_vpcs().vpc_ids(vpc).send()
            })
            .await?;
        Ok(out
            .vpcs()
            .iter()
            .flat_map(|v| {
                v.cidr_block_association_set()
                    .iter()
                    .filter_map(|a| a.cidr_block().map(str::to_string))
                    .chain(v.cidr_block().map(str::to_string))
            })
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect())
    }

    /// The network interfaces whose `filter_name` (`addresses.private-ip-address` or
    /// `attachment.instance-id`) is one of `values`, with their security groups (200 values
    /// per call, every page).
    pub async fn interfaces_by(
        &self,
        filter_name: &str,
        values: &[String],
    ) -> Result<Vec<InterfaceGroups>, CloudError> {
        let mut found = Vec::new();
        for chunk in values.chunks(200) {
            let filter = filter(filter_name, chunk.iter().cloned());
            pages(
                &self.api,
                "DescribeNetworkInterfaces",
                |token| {
                    self.client
                        .describe_network_interfaces()
                        .filters(filter.clone())
                        .set_next_token(token)
                        .send()
                },
                |out| {
                    found.extend(out.network_interfaces().iter().map(|n| {
                        InterfaceGroups {
                            private_ip: n.private_ip_address().unwrap_or_default().to_string(),
                            instance_id: n
                                .attachment()
                                .and_then(|a| a.instance_id())
                                .map(str::to_string),
                            primary: n.attachment().and_then(|a| a.device_index()) == Some(0),
                            groups: n
                                .groups()
                                .iter()
                                .filter_map(|g| g.group_id().map(str::to_string))
                                .collect(),
                        }
                    }));
                    out.next_token().map(str::to_string)
                },
            )
            .await?;
        }
        Ok(found)
    }

    /// The security group named `name` in `vpc`, if any.
    pub async fn security_group_by_name(
        &self,
        vpc: &str,
        name: &str,
    ) -> Result<Option<SecurityGroup>, CloudError> {
        let out = self
            .api
            .call("DescribeSecurityGroups", || {
                self.client
                    .describe_security_groups()
                    .filters(filter("vpc-id", [vpc]))
                    .filters(filter("group-name", [name]))
                    .send()
            })
            .await?;
        Ok(out.security_groups().first().map(from_sdk))
    }

    /// Groups of that name in any VPC (deletion, when the load balancer and its VPC are gone).
    pub async fn security_groups_named(
        &self,
        name: &str,
    ) -> Result<Vec<SecurityGroup>, CloudError> {
        let out = self
            .api
            .call("DescribeSecurityGroups", || {
                self.client
                    .describe_security_groups()
                    .filters(filter("group-name", [name]))
                    .send()
            })
            .await?;
        Ok(out.security_groups().iter().map(from_sdk).collect())
    }

    /// Security groups by ID (one call; unknown IDs are an error from EC2).
    pub async fn security_groups_by_id(
        &self,
        ids: &BTreeSet<String>,
    ) -> Result<Vec<SecurityGroup>, CloudError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .api
            .call("DescribeSecurityGroups", || {
                self.client
                    .describe_security_groups()
                    .filters(filter("group-id", ids.iter().cloned()))
                    .send()
            })
            .await?;
        Ok(out.security_groups().iter().map(from_sdk).collect())
    }

    /// Groups in `vpc` with an ingress rule whose source is `source_group`.
    pub async fn security_groups_referencing(
        &self,
        vpc: Option<&str>,
        source_group: &str,
    ) -> Result<Vec<SecurityGroup>, CloudError> {
        let out = self
            .api
            .call("DescribeSecurityGroups", || {
                let mut req = self
                    .client
                    .describe_security_groups()
                    .filters(filter("ip-permission.group-id", [source_group]));
                if let Some(vpc) = vpc {
                    req = req.filters(filter("vpc-id", [vpc]));
                }
                req.send()
            })
            .await?;
        Ok(out.security_groups().iter().map(from_sdk).collect())
    }

    /// Groups carrying tag `key` (any value) and, when given, `key2=value2`.
    pub async fn security_groups_tagged(
        &self,
        key: &str,
        also: Option<(&str, &str)>,
    ) -> Result<Vec<SecurityGroup>, CloudError> {
        let out = self
            .api
            .call("DescribeSecurityGroups", || {
                let mut req = self
                    .client
                    .describe_security_groups()
                    .filters(filter("tag-key", [key]));
                if let Some((k, v)) = also {
                    req = req.filters(filter(&format!("tag:{k}"), [v]));
                }
                req.send()
            })
            .await?;
        Ok(out.security_groups().iter().map(from_sdk).collect())
    }

    /// Creates a tagged group; when one of that name already exists (a create that raced or
    /// was interrupted after AWS made it), returns the existing one instead.
    pub async fn create_security_group(
        &self,
        vpc: &str,
        name: &str,
        description: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let created = self
            .api
            .call("CreateSecurityGroup", || {
                self.client
                    .create_security_group()
                    .vpc_id(vpc)
                    .group_name(name)
                    .description(description)
                    .tag_specifications(
                        TagSpecification::builder()
                            .resource_type(ResourceType::SecurityGroup)
                            .set_tags(Some(ec2_tags(tags)))
                            .build(),
                    )
                    .send()
            })
            .await;
        match created {
            Ok(out) => Ok(out.group_id().unwrap_or("").to_string()),
            Err(CloudError::Rejected { code, .. }) if code == "InvalidGroup.Duplicate" => self
                .security_group_by_name(vpc, name)
                .await?
                .map(|g| g.id)
                .ok_or_else(|| CloudError::Unavailable {
                    operation: "CreateSecurityGroup".into(),
                    message: format!("group {name} reported duplicate but not found"),
                }),
            Err(e) => Err(e),
        }
    }

    /// Adds and removes address-range rules of a group (one call each, only when needed).
    pub async fn update_cidr_rules(
        &self,
        group: &str,
        add: &[CidrRule],
        remove: &[CidrRule],
    ) -> Result<(), CloudError> {
        if !add.is_empty() {
            let perms: Vec<IpPermission> = add.iter().map(cidr_permission).collect();
            self.api
                .call("AuthorizeSecurityGroupIngress", || {
                    self.client
                        .authorize_security_group_ingress()
                        .group_id(group)
                        .set_ip_permissions(Some(perms.clone()))
                        .send()
                })
                .await
                .map(|_| ())
                .or_else(ignore_code("InvalidPermission.Duplicate"))?;
        }
        if !remove.is_empty() {
            let perms: Vec<IpPermission> = remove.iter().map(cidr_permission).collect();
            self.api
                .call("RevokeSecurityGroupIngress", || {
                    self.client
                        .revoke_security_group_ingress()
                        .group_id(group)
                        .set_ip_permissions(Some(perms.clone()))
                        .send()
                })
                .await
                .map(|_| ())
                .or_else(ignore_code("InvalidPermission.NotFound"))?;
        }
        Ok(())
    }

    /// Adds a rule whose source is another group.
    pub async fn authorize_group_rule(
        &self,
        group: &str,
        rule: &GroupRule,
    ) -> Result<(), CloudError> {
        self.api
            .call("AuthorizeSecurityGroupIngress", || {
                self.client
                    .authorize_security_group_ingress()
                    .group_id(group)
                    .ip_permissions(group_permission(rule))
                    .send()
            })
            .await
            .map(|_| ())
            .or_else(ignore_code("InvalidPermission.Duplicate"))
    }

    /// Removes a rule whose source is another group.
    pub async fn revoke_group_rule(&self, group: &str, rule: &GroupRule) -> Result<(), CloudError> {
        self.api
            .call("RevokeSecurityGroupIngress", || {
                self.client
                    .revoke_security_group_ingress()
                    .group_id(group)
                    .ip_permissions(group_permission(rule))
                    .send()
            })
            .await
            .map(|_| ())
            .or_else(ignore_code("InvalidPermission.NotFound"))
            // Either group is gone: nothing is left to revoke.
            .or_else(ignore_code("InvalidGroup.NotFound"))
    }

    /// Deletes a group, waiting while a just-deleted load balancer still holds it; a group
    /// that is already gone counts as deleted.
    pub async fn delete_security_group(&self, id: &str) -> Result<(), CloudError> {
        let mut attempt = 0;
        loop {
            let r = self
                .api
                .call("DeleteSecurityGroup", || {
                    self.client.delete_security_group().group_id(id).send()
                })
                .await;
            match r {
                Ok(_) => return Ok(()),
                Err(CloudError::Rejected { code, .. }) if code == "InvalidGroup.NotFound" => {
                    return Ok(())
                }
                Err(CloudError::Rejected { code, .. })
                    if code == "DependencyViolation" && attempt < DELETE_ATTEMPTS =>
                {
                    attempt += 1;
                    tokio::time::sleep(DELETE_RETRY).await;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Turns one AWS error code into success (for idempotent adds and removes).
pub fn ignore_code<T: Default>(
    code: &'static str,
) -> impl FnOnce(CloudError) -> Result<T, CloudError> {
    move |e| match &e {
        CloudError::Rejected { code: c, .. } if c == code => Ok(T::default()),
        _ => Err(e),
    }
}
