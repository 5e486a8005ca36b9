//! Deckhouse's `deckhouse.io/v1alpha1` ModuleConfig CRD (cluster-scoped: `spec.enabled`,
//! `spec.version`, `spec.settings`) for the DVP parent cluster, where the DVP CCM reads whether
//! the `service-with-healthchecks` module is on. Written from the kind's documentation as a
//! structural schema (settings kept as given); no Go module of it is served here.

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// The CRD's name.
pub const NAME: &str = "moduleconfigs.deckhouse.io";

/// The CRD as YAML.
pub const CRD_YAML: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: moduleconfigs.deckhouse.io
spec:
  group: deckhouse.io
  scope: Cluster
  names:
    kind: ModuleConfig
    listKind: ModuleConfigList
    plural: moduleconfigs
    singular: moduleconfig
    shortNames: [mc]
  versions:
  - name: v1alpha1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            properties:
              enabled: {type: boolean}
              version: {type: integer}
              updatePolicy: {type: string}
              source: {type: string}
              settings:
                type: object
                x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              message: {type: string}
              version: {type: string}
"#;

/// The CRD, parsed.
pub fn crd() -> Result<CustomResourceDefinition> {
    serde_yaml::from_str(CRD_YAML).context("parsing the ModuleConfig CRD")
}

/// Applies the CRD; the caller waits for it to be established.
pub async fn install(client: &kube::Client) -> Result<()> {
    super::swhc_crd::apply_crd(client, NAME, &crd()?).await
}
