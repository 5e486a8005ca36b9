//! The DVP CCM's shipped parent-cluster Role (`deploy/dvp/parent-rbac.yaml`), read for the tests
//! that run the CCM under it and prove it minimal.

use anyhow::Context;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role};
use serde::Deserialize;

/// Path of the manifest under the repository root.
pub const MANIFEST: &str = "deploy/dvp/parent-rbac.yaml";

/// The rules of the shipped parent Role.
pub fn parent_role_rules() -> anyhow::Result<Vec<PolicyRule>> {
    let path = crate::kube_fixture::repo_root().join(MANIFEST);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(doc)?;
        if value["kind"].as_str() == Some("Role") {
            let role: Role = serde_yaml::from_value(value)?;
            return Ok(role.rules.unwrap_or_default());
        }
    }
    anyhow::bail!("{} has no Role", path.display())
}
