//! The Neutron calls of `manage-security-groups`: the Service's group found or made, its rules
//! brought to the wanted set, the group put on the member ports of the nodes and taken off the
//! ports of nodes that are no longer members, and the group removed with the Service. Decisions
//! come from [`super::secgroups`].

use std::collections::BTreeSet;

use http::Method;
use serde_json::{json, Value};
use stratus_cloud::{CloudError, ServiceRef};

use super::secgroups::{self, MemberPort, PortChange, RuleSpec};
use crate::compute::encode;
use stratus_openstack_api::client::errors::is_not_found;
use stratus_openstack_api::client::ServiceClient;

/// Neutron security groups of load balancers.
#[derive(Debug, Clone)]
pub struct SecurityGroups {
    client: ServiceClient,
}

fn text(v: &Value, key: &str) -> String {
    v[key].as_str().unwrap_or_default().to_owned()
}

fn is_conflict(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code == "409")
}

impl SecurityGroups {
    /// Over `client` (Neutron).
    pub fn new(client: ServiceClient) -> SecurityGroups {
        SecurityGroups { client }
    }

    /// The group named `name`, if any.
    pub async fn find(&self, name: &str) -> Result<Option<Value>, CloudError> {
        let list: Vec<Value> = self
            .client
            .list(
                "ListSecurityGroups",
                &format!("/v2.0/security-groups?name={}", encode(name)),
                "security_groups",
            )
            .await?;
        Ok(list.into_iter().next())
    }

    /// Every group of the project.
    pub async fn all(&self) -> Result<Vec<Value>, CloudError> {
        self.client
            .list(
                "ListSecurityGroups",
                "/v2.0/security-groups?fields=id&fields=name&fields=description",
                "security_groups",
            )
            .await
    }

    async fn create(&self, name: &str, description: &str) -> Result<String, CloudError> {
        let r = self
            .client
            .send(
                "CreateSecurityGroup",
                Method::POST,
                "/v2.0/security-groups",
                Some(&json!({"security_group": {"name": name, "description": description}})),
            )
            .await?;
        let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let id = text(&v["security_group"], "id");
        if id.is_empty() {
            return Err(CloudError::Unavailable {
                operation: "CreateSecurityGroup".into(),
                message: "the answer carries no security group id".into(),
            });
        }
        Ok(id)
    }

    async fn rules(&self, sg: &str) -> Result<Vec<Value>, CloudError> {
        self.client
            .list(
                "ListSecurityGroupRules",
                &format!(
                    "/v2.0/security-group-rules?security_group_id={}",
                    encode(sg)
                ),
                "security_group_rules",
            )
            .await
    }

    async fn create_rule(&self, sg: &str, rule: &RuleSpec) -> Result<(), CloudError> {
        let body = json!({"security_group_rule": {
            "security_group_id": sg, "direction": "ingress", "ethertype": rule.ethertype,
            "protocol": rule.protocol, "remote_ip_prefix": rule.remote_ip_prefix,
            "port_range_min": rule.port, "port_range_max": rule.port}});
        match self
            .client
            .send(
                "CreateSecurityGroupRule",
                Method::POST,
                "/v2.0/security-group-rules",
                Some(&body),
            )
            .await
        {
            // 409: the rule exists already (a lost answer, or another writer).
            Err(e) if is_conflict(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    async fn delete_rule(&self, id: &str) -> Result<(), CloudError> {
        match self
            .client
            .send(
                "DeleteSecurityGroupRule",
                Method::DELETE,
                &format!("/v2.0/security-group-rules/{}", encode(id)),
                None,
            )
            .await
        {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    async fn ports(&self, query: &str) -> Result<Vec<Value>, CloudError> {
        self.client
            .list("ListPorts", &format!("/v2.0/ports?{query}"), "ports")
            .await
    }

    async fn apply(&self, change: &PortChange) -> Result<(), CloudError> {
        match self
            .client
            .send(
                "UpdatePort",
                Method::PUT,
                &format!("/v2.0/ports/{}", encode(&change.port)),
                Some(&json!({"port": {"security_groups": change.groups}})),
            )
            .await
        {
            // A port deleted meanwhile holds no group.
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Brings the Service's group to `rules` on the ports of `members` (`subnet`: the member
    /// subnet, when configured); returns the group's id.
    pub async fn reconcile(
        &self,
        cluster: &str,
        service: &ServiceRef,
        rules: &[RuleSpec],
        members: &[MemberPort],
        subnet: Option<&str>,
    ) -> Result<String, CloudError> {
        let name = secgroups::group_name(service);
        let sg = match self.find(&name).await? {
            Some(g) => text(&g, "id"),
            None => {
                let id = self
                    .create(&name, &secgroups::group_description(cluster, service))
                    .await?;
                tracing::info!(group = %id, name = %name, "created the Service's security group");
                id
            }
        };
        let (create, delete) = secgroups::rule_diff(rules, &self.rules(&sg).await?);
        for rule in &create {
            self.create_rule(&sg, rule).await?;
        }
        for id in &delete {
            self.delete_rule(id).await?;
        }
        let holding = self
            .ports(&format!("security_groups={}", encode(&sg)))
            .await?;
        let mut keep = BTreeSet::new();
        for member in members {
            if let Some(p) = holding.iter().find(|p| {
                p["device_id"] == member.server.as_str()
                    && secgroups::is_member_port(p, &member.address, subnet)
            }) {
                keep.insert(text(p, "id"));
                continue;
            }
            let ports = self
                .ports(&format!("device_id={}", encode(&member.server)))
                .await?;
            let Some(port) = ports
                .iter()
                .find(|p| secgroups::is_member_port(p, &member.address, subnet))
            else {
                tracing::debug!(server = %member.server, address = %member.address, "no port with port security carries the member address");
                continue;
            };
            keep.insert(text(port, "id"));
            if let Some(change) = secgroups::attach(port, &sg) {
                self.apply(&change).await?;
            }
        }
        for change in secgroups::detach(&holding, &sg, &keep) {
            self.apply(&change).await?;
        }
        Ok(sg)
    }

    /// Takes the group off every port and deletes it (a missing group is fine).
    pub async fn remove_group(&self, sg: &str) -> Result<(), CloudError> {
        let holding = self
            .ports(&format!("security_groups={}", encode(sg)))
            .await?;
        for change in secgroups::detach(&holding, sg, &BTreeSet::new()) {
            self.apply(&change).await?;
        }
        match self
            .client
            .send(
                "DeleteSecurityGroup",
                Method::DELETE,
                &format!("/v2.0/security-groups/{}", encode(sg)),
                None,
            )
            .await
        {
            Err(e) if is_not_found(&e) => Ok(()),
            other => other.map(drop),
        }
    }

    /// Removes the Service's group, if it has one.
    pub async fn remove(&self, service: &ServiceRef) -> Result<(), CloudError> {
        match self.find(&secgroups::group_name(service)).await? {
            Some(g) => {
                tracing::info!(group = %text(&g, "id"), "removing the Service's security group");
                self.remove_group(&text(&g, "id")).await
            }
            None => Ok(()),
        }
    }
}
