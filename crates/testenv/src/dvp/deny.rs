//! The "deny" fault of the DVP parent: a ValidatingAdmissionPolicy (CEL `false`) refusing
//! writes of one resource in the tenant namespace, as a platform admission webhook or quota
//! would, until it is lifted.

use anyhow::{Context, Result};
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::api::{Api, DeleteParams, PostParams};

use super::DvpEnv;

/// The message every denied request carries.
pub const DENIED_MESSAGE: &str = "denied by the DVP platform simulator";

fn policy_name(group: &str, resource: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("stratus-deny-{resource}.{group}")
}

impl DvpEnv {
    /// Refuses `operations` (`CREATE`, `UPDATE`, `DELETE`) on `group`/`resource` in the tenant
    /// namespace from now on. The apiserver loads policies asynchronously: callers wait for the
    /// first refusal.
    pub async fn deny(&self, group: &str, resource: &str, operations: &[&str]) -> Result<()> {
        let admin = self.parent_admin().await?;
        let name = policy_name(group, resource);
        let meta = ObjectMeta {
            name: Some(name.clone()),
            ..ObjectMeta::default()
        };
        let rules = vec![NamedRuleWithOperations {
            api_groups: Some(vec![group.to_string()]),
            api_versions: Some(vec!["*".into()]),
            resources: Some(vec![resource.to_string()]),
            operations: Some(operations.iter().map(|o| o.to_string()).collect()),
            ..NamedRuleWithOperations::default()
        }];
        let policy = ValidatingAdmissionPolicy {
            metadata: meta.clone(),
            spec: Some(ValidatingAdmissionPolicySpec {
                failure_policy: Some("Fail".into()),
                match_constraints: Some(MatchResources {
                    resource_rules: Some(rules),
                    ..MatchResources::default()
                }),
                validations: Some(vec![Validation {
                    expression: "false".into(),
                    message: Some(DENIED_MESSAGE.into()),
                    ..Validation::default()
                }]),
                ..ValidatingAdmissionPolicySpec::default()
            }),
            status: None,
        };
        let namespace_selector = LabelSelector {
            match_labels: Some(
                [(
                    "kubernetes.io/metadata.name".to_string(),
                    self.namespace().to_string(),
                )]
                .into(),
            ),
            ..LabelSelector::default()
        };
        let binding = ValidatingAdmissionPolicyBinding {
            metadata: meta,
            spec: Some(ValidatingAdmissionPolicyBindingSpec {
                policy_name: Some(name.clone()),
                validation_actions: Some(vec!["Deny".into()]),
                match_resources: Some(MatchResources {
                    namespace_selector: Some(namespace_selector),
                    ..MatchResources::default()
                }),
                ..ValidatingAdmissionPolicyBindingSpec::default()
            }),
        };
        let pp = PostParams::default();
        Api::<ValidatingAdmissionPolicy>::all(admin.clone())
            .create(&pp, &policy)
            .await
            .with_context(|| format!("creating policy {name}"))?;
        Api::<ValidatingAdmissionPolicyBinding>::all(admin)
            .create(&pp, &binding)
            .await
            .with_context(|| format!("binding policy {name}"))?;
        Ok(())
    }

    /// Lifts [`DvpEnv::deny`] for `group`/`resource`.
    pub async fn allow(&self, group: &str, resource: &str) -> Result<()> {
        let admin = self.parent_admin().await?;
        let name = policy_name(group, resource);
        let dp = DeleteParams::default();
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .delete(&name, &dp)
            .await
            .with_context(|| format!("deleting binding {name}"))?;
        Api::<ValidatingAdmissionPolicy>::all(admin)
            .delete(&name, &dp)
            .await
            .with_context(|| format!("deleting policy {name}"))?;
        Ok(())
    }
}
