//! The listener and rule calls of the Ingress driver (listeners with their default action,
//! certificates and policy; ordered forwarding rules), on [`AlbApi`] through the shared call
//! guard, and how AWS's answers read back.

use std::collections::BTreeMap;

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    Action, ActionTypeEnum, FixedResponseActionConfig, ProtocolEnum, RuleCondition,
};
use stratus_cloud::CloudError;

use crate::ingress::alb_api::{gone, missing, AlbApi};
use crate::ingress::model::{ListenerSpec, RuleSpec};

/// A listener as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveListener {
    /// ARN.
    pub arn: String,
    /// HTTPS (else HTTP).
    pub https: bool,
    /// The default certificate (HTTPS).
    pub certificate: Option<String>,
    /// The security policy (HTTPS).
    pub ssl_policy: Option<String>,
    /// The default action redirects to this HTTPS port (else a fixed 404 answer).
    pub redirect_to: Option<i32>,
    /// Certificates beyond the default, sorted; None when not read.
    pub extra_certificates: Option<Vec<String>>,
}

impl AlbApi {
    /// The listeners of a load balancer by port.
    pub async fn listeners(&self, lb_arn: &str) -> Result<BTreeMap<i32, LiveListener>, CloudError> {
        let out = self
            .api
            .call("DescribeListeners", || {
                self.client
                    .describe_listeners()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await?;
        Ok(out
            .listeners()
            .iter()
            .filter_map(|l| {
                let redirect_to = l
                    .default_actions()
                    .iter()
                    .find_map(|a| a.redirect_config())
                    .and_then(|r| r.port())
                    .and_then(|p| p.parse().ok());
                Some((
                    l.port()?,
                    LiveListener {
                        arn: l.listener_arn()?.to_string(),
                        https: l.protocol() == Some(&ProtocolEnum::Https),
                        certificate: l
                            .certificates()
                            .first()
                            .and_then(|c| c.certificate_arn())
                            .map(str::to_string),
                        ssl_policy: l.ssl_policy().map(str::to_string),
                        redirect_to,
                        extra_certificates: None,
                    },
                ))
            })
            .collect())
    }

    /// The certificates of a listener beyond its default one, sorted.
    pub async fn extra_certificates(&self, listener_arn: &str) -> Result<Vec<String>, CloudError> {
        let out = self
            .api
            .call("DescribeListenerCertificates", || {
                self.client
                    .describe_listener_certificates()
                    .listener_arn(listener_arn)
                    .send()
            })
            .await?;
        let mut certs: Vec<String> = out
            .certificates()
            .iter()
            .filter(|c| !c.is_default().unwrap_or(false))
            .filter_map(|c| c.certificate_arn().map(str::to_string))
            .collect();
        certs.sort();
        Ok(certs)
    }

    /// Adds (`add`) or removes certificates beyond a listener's default one.
    pub async fn change_certificates(
        &self,
        listener_arn: &str,
        certs: &[String],
        add: bool,
    ) -> Result<(), CloudError> {
        if certs.is_empty() {
            return Ok(());
        }
        let list = certificates(certs);
        if add {
            self.api
                .call("AddListenerCertificates", || {
                    self.client
                        .add_listener_certificates()
                        .listener_arn(listener_arn)
                        .set_certificates(Some(list.clone()))
                        .send()
                })
                .await?;
        } else {
            self.api
                .call("RemoveListenerCertificates", || {
                    self.client
                        .remove_listener_certificates()
                        .listener_arn(listener_arn)
                        .set_certificates(Some(list.clone()))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Creates a listener: a 404 fixed response, or a redirect to HTTPS, by default; the first
    /// certificate is its default one, the others are added after.
    pub async fn create_listener(
        &self,
        lb_arn: &str,
        l: &ListenerSpec,
    ) -> Result<LiveListener, CloudError> {
        let default = default_action(l);
        let certs = certificates(&l.certificates[..l.certificates.len().min(1)]);
        let out = self
            .api
            .call("CreateListener", || {
                self.client
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .port(l.port.port)
                    .protocol(protocol(l))
                    .set_certificates(Some(certs.clone()).filter(|c| !c.is_empty()))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .default_actions(default.clone())
                    .send()
            })
            .await?;
        let arn = out
            .listeners()
            .first()
            .and_then(|l| l.listener_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateListener"))?;
        let extra = sorted_extra(l);
        self.change_certificates(&arn, &extra, true).await?;
        Ok(LiveListener {
            arn,
            https: l.port.https,
            certificate: l.certificates.first().cloned(),
            ssl_policy: l.ssl_policy.clone(),
            redirect_to: l.redirect_to,
            extra_certificates: Some(extra),
        })
    }

    /// Makes an existing listener's protocol, default certificate, policy and default action
    /// the planned ones.
    pub async fn modify_listener(&self, arn: &str, l: &ListenerSpec) -> Result<(), CloudError> {
        let default = default_action(l);
        let certs = certificates(&l.certificates[..l.certificates.len().min(1)]);
        self.api
            .call("ModifyListener", || {
                self.client
                    .modify_listener()
                    .listener_arn(arn)
                    .port(l.port.port)
                    .protocol(protocol(l))
                    .set_certificates(Some(certs.clone()).filter(|c| !c.is_empty()))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .default_actions(default.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Deletes a listener (its rules go with it).
    pub async fn delete_listener(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteListener", || {
                self.client.delete_listener().listener_arn(arn).send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The listener's non-default rules: (ARN, priority, hosts, paths, target group ARN).
    pub async fn rules(&self, listener_arn: &str) -> Result<Vec<LiveRule>, CloudError> {
        let out = self
            .api
            .call("DescribeRules", || {
                self.client
                    .describe_rules()
                    .listener_arn(listener_arn)
                    .send()
            })
            .await?;
        Ok(out
            .rules()
            .iter()
            .filter(|r| !r.is_default().unwrap_or(false))
            .map(|r| {
                let mut hosts = Vec::new();
                let mut paths = Vec::new();
                for c in r.conditions() {
                    let (h, p) = condition_values(c);
                    hosts.extend(h);
                    paths.extend(p);
                }
                LiveRule {
                    arn: r.rule_arn().unwrap_or_default().to_string(),
                    priority: r.priority().and_then(|p| p.parse().ok()).unwrap_or(0),
                    hosts,
                    paths,
                    target_group: r
                        .actions()
                        .first()
                        .and_then(|a| a.target_group_arn())
                        .unwrap_or_default()
                        .to_string(),
                }
            })
            .collect())
    }

    /// Creates one rule forwarding to `tg_arn`; its ARN.
    pub async fn create_rule(
        &self,
        listener_arn: &str,
        rule: &RuleSpec,
        tg_arn: &str,
    ) -> Result<String, CloudError> {
        let mut conditions = Vec::new();
        if !rule.hosts.is_empty() {
            conditions.push(
                RuleCondition::builder()
                    .field("host-header")
                    .host_header_config(
                        elbv2::types::HostHeaderConditionConfig::builder()
                            .set_values(Some(rule.hosts.clone()))
                            .build(),
                    )
                    .build(),
            );
        }
        if !rule.paths.is_empty() {
            conditions.push(
                RuleCondition::builder()
                    .field("path-pattern")
                    .path_pattern_config(
                        elbv2::types::PathPatternConditionConfig::builder()
                            .set_values(Some(rule.paths.clone()))
                            .build(),
                    )
                    .build(),
            );
        }
        let action = Action::builder()
            .r#type(ActionTypeEnum::Forward)
            .target_group_arn(tg_arn)
            .build();
        let out = self
            .api
            .call("CreateRule", || {
                self.client
                    .create_rule()
                    .listener_arn(listener_arn)
                    .priority(rule.priority)
                    .set_conditions(Some(conditions.clone()))
                    .actions(action.clone())
                    .send()
            })
            .await?;
        out.rules()
            .first()
            .and_then(|r| r.rule_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateRule"))
    }

    /// Deletes one rule.
    pub async fn delete_rule(&self, arn: &str) -> Result<(), CloudError> {
        match self
            .api
            .call("DeleteRule", || {
                self.client.delete_rule().rule_arn(arn).send()
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if gone(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn protocol(l: &ListenerSpec) -> ProtocolEnum {
    if l.port.https {
        ProtocolEnum::Https
    } else {
        ProtocolEnum::Http
    }
}

fn certificates(arns: &[String]) -> Vec<elbv2::types::Certificate> {
    arns.iter()
        .map(|c| {
            elbv2::types::Certificate::builder()
                .certificate_arn(c)
                .build()
        })
        .collect()
}

/// The certificates of a planned listener beyond its default one, sorted.
pub fn sorted_extra(l: &ListenerSpec) -> Vec<String> {
    extra_of(&l.certificates)
}

/// The certificates of a list beyond the first (the listener's default one), sorted, once each.
pub fn extra_of(certificates: &[String]) -> Vec<String> {
    let mut extra: Vec<String> = certificates.iter().skip(1).cloned().collect();
    extra.sort();
    extra.dedup();
    extra
}

/// A 404 fixed response, or the redirect to HTTPS.
fn default_action(l: &ListenerSpec) -> Action {
    match l.redirect_to {
        Some(port) => Action::builder()
            .r#type(ActionTypeEnum::Redirect)
            .redirect_config(
                elbv2::types::RedirectActionConfig::builder()
                    .protocol("HTTPS")
                    .port(port.to_string())
                    .status_code(elbv2::types::RedirectActionStatusCodeEnum::Http301)
                    .build(),
            )
            .build(),
        None => Action::builder()
            .r#type(ActionTypeEnum::FixedResponse)
            .fixed_response_config(
                FixedResponseActionConfig::builder()
                    .status_code("404")
                    .content_type("text/plain")
                    .build(),
            )
            .build(),
    }
}

/// A rule as AWS has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveRule {
    /// ARN.
    pub arn: String,
    /// Priority.
    pub priority: i32,
    /// Host headers.
    pub hosts: Vec<String>,
    /// Path patterns.
    pub paths: Vec<String>,
    /// Forward target group ARN.
    pub target_group: String,
}

/// Host and path values of a condition (the `*Config` form, else the legacy `Values`).
pub fn condition_values(c: &RuleCondition) -> (Vec<String>, Vec<String>) {
    let legacy = c.values().to_vec();
    match c.field() {
        Some("host-header") => (
            c.host_header_config()
                .map(|h| h.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
            Vec::new(),
        ),
        Some("path-pattern") => (
            Vec::new(),
            c.path_pattern_config()
                .map(|p| p.values().to_vec())
                .filter(|v| !v.is_empty())
                .unwrap_or(legacy),
        ),
        _ => (Vec::new(), Vec::new()),
    }
}
