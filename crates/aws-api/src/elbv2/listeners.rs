//! The listener and rule calls of the ELBv2 client: listeners with their default action,
//! certificates and policies; the certificates beyond the default one; ordered forwarding
//! rules.

use aws_sdk_elasticloadbalancingv2 as elbv2;
use elbv2::types::{
    Action, ActionTypeEnum, Certificate, FixedResponseActionConfig, HostHeaderConditionConfig,
    PathPatternConditionConfig, RedirectActionConfig, RedirectActionStatusCodeEnum, RuleCondition,
};
use stratus_cloud::CloudError;

use super::values::{condition_values, DefaultAction, Listener, ListenerSettings, NewRule, Rule};
use super::{gone, missing, ElbV2Api};

impl ElbV2Api {
    /// The listeners of a load balancer.
    pub async fn listeners(&self, lb_arn: &str) -> Result<Vec<Listener>, CloudError> {
        let out = self
            .api
            .call("DescribeListeners", || {
                self.client
                    .describe_listeners()
                    .load_balancer_arn(lb_arn)
                    .send()
            })
            .await?;
        Ok(out.listeners().iter().map(Listener::of).collect())
    }

    /// Creates a listener; its ARN.
    pub async fn create_listener(
        &self,
        lb_arn: &str,
        l: &ListenerSettings,
    ) -> Result<String, CloudError> {
        let action = default_action(&l.default_action);
        let certs = certificates(l.certificate.as_slice());
        let out = self
            .api
            .call("CreateListener", || {
                self.client
                    .create_listener()
                    .load_balancer_arn(lb_arn)
                    .set_port(l.port)
                    .set_protocol(l.protocol.clone())
                    .set_certificates(Some(certs.clone()).filter(|c| !c.is_empty()))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .set_alpn_policy(l.alpn_policy.clone().map(|a| vec![a]))
                    .default_actions(action.clone())
                    .send()
            })
            .await?;
        out.listeners()
            .first()
            .and_then(|l| l.listener_arn())
            .map(str::to_string)
            .ok_or_else(|| missing("CreateListener"))
    }

    /// Changes a listener: the settings given (a None one stays as it is).
    pub async fn modify_listener(&self, arn: &str, l: &ListenerSettings) -> Result<(), CloudError> {
        let action = default_action(&l.default_action);
        let certs = certificates(l.certificate.as_slice());
        self.api
            .call("ModifyListener", || {
                self.client
                    .modify_listener()
                    .listener_arn(arn)
                    .set_port(l.port)
                    .set_protocol(l.protocol.clone())
                    .set_certificates(Some(certs.clone()).filter(|c| !c.is_empty()))
                    .set_ssl_policy(l.ssl_policy.clone())
                    .set_alpn_policy(l.alpn_policy.clone().map(|a| vec![a]))
                    .default_actions(action.clone())
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Deletes a listener (its rules go with it); gone counts as deleted.
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

    /// Adds (`add`) or removes certificates beyond a listener's default one (none: no call).
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

    /// The listener's non-default rules.
    pub async fn rules(&self, listener_arn: &str) -> Result<Vec<Rule>, CloudError> {
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
                Rule {
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

    /// Creates one forwarding rule; its ARN.
    pub async fn create_rule(
        &self,
        listener_arn: &str,
        rule: &NewRule<'_>,
    ) -> Result<String, CloudError> {
        let mut conditions = Vec::new();
        if !rule.hosts.is_empty() {
            conditions.push(
                RuleCondition::builder()
                    .field("host-header")
                    .host_header_config(
                        HostHeaderConditionConfig::builder()
                            .set_values(Some(rule.hosts.to_vec()))
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
                        PathPatternConditionConfig::builder()
                            .set_values(Some(rule.paths.to_vec()))
                            .build(),
                    )
                    .build(),
            );
        }
        let action = forward(rule.target_group_arn);
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

    /// Deletes one rule; gone counts as deleted.
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

fn certificates(arns: &[String]) -> Vec<Certificate> {
    arns.iter()
        .map(|c| Certificate::builder().certificate_arn(c).build())
        .collect()
}

fn forward(target_group_arn: &str) -> Action {
    Action::builder()
        .r#type(ActionTypeEnum::Forward)
        .target_group_arn(target_group_arn)
        .build()
}

fn default_action(a: &DefaultAction) -> Action {
    match a {
        DefaultAction::Forward(tg) => forward(tg),
        DefaultAction::RedirectHttps(port) => Action::builder()
            .r#type(ActionTypeEnum::Redirect)
            .redirect_config(
                RedirectActionConfig::builder()
                    .protocol("HTTPS")
                    .port(port.to_string())
                    .status_code(RedirectActionStatusCodeEnum::Http301)
                    .build(),
            )
            .build(),
        DefaultAction::NotFound => Action::builder()
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
