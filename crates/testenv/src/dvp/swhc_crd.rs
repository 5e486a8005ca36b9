//! The `network.deckhouse.io/v1alpha1` ServiceWithHealthchecks CRD for the DVP parent cluster.
//! No Go module of it is served, so it is written here from the kind's API reference (its
//! `ServiceWithHealthchecksSpec` = an inlined core `ServiceSpec` + `healthcheck`; status with a
//! load balancer, cluster IPs, a health condition and per-endpoint statuses) as a structural
//! schema with the status subresource. Only the core ServiceSpec fields a load balancer uses are
//! spelled out; others are pruned, or refused under strict field validation.

use anyhow::{Context, Result};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};

/// The CRD's name.
pub const NAME: &str = "servicewithhealthchecks.network.deckhouse.io";

/// The CRD as YAML.
pub const CRD_YAML: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicewithhealthchecks.network.deckhouse.io
spec:
  group: network.deckhouse.io
  scope: Namespaced
  names:
    kind: ServiceWithHealthchecks
    listKind: ServiceWithHealthchecksList
    plural: servicewithhealthchecks
    singular: servicewithhealthchecks
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
              type: {type: string, enum: [ClusterIP, NodePort, LoadBalancer, ExternalName]}
              selector:
                type: object
                additionalProperties: {type: string}
              ports:
                type: array
                items:
                  type: object
                  required: [port]
                  properties:
                    name: {type: string}
                    protocol: {type: string, enum: [TCP, UDP, SCTP]}
                    appProtocol: {type: string}
                    port: {type: integer, format: int32, minimum: 1, maximum: 65535}
                    targetPort: {x-kubernetes-int-or-string: true}
                    nodePort: {type: integer, format: int32}
              clusterIP: {type: string}
              clusterIPs:
                type: array
                items: {type: string}
              externalIPs:
                type: array
                items: {type: string}
              loadBalancerIP: {type: string}
              loadBalancerClass: {type: string}
              loadBalancerSourceRanges:
                type: array
                items: {type: string}
              externalTrafficPolicy: {type: string, enum: [Cluster, Local]}
              internalTrafficPolicy: {type: string, enum: [Cluster, Local]}
              healthCheckNodePort: {type: integer, format: int32}
              sessionAffinity: {type: string, enum: [None, ClientIP]}
              publishNotReadyAddresses: {type: boolean}
              allocateLoadBalancerNodePorts: {type: boolean}
              ipFamilyPolicy: {type: string}
              ipFamilies:
                type: array
                items: {type: string}
              healthcheck:
                type: object
                properties:
                  initialDelaySeconds: {type: integer, format: int32}
                  periodSeconds: {type: integer, format: int32}
                  probes:
                    type: array
                    items:
                      type: object
                      properties:
                        mode: {type: string}
                        timeoutSeconds: {type: integer, format: int32}
                        successThreshold: {type: integer, format: int32}
                        failureThreshold: {type: integer, format: int32}
                        http:
                          type: object
                          required: [targetPort]
                          properties:
                            path: {type: string}
                            targetPort: {x-kubernetes-int-or-string: true}
                            host: {type: string}
                            scheme: {type: string}
                            method: {type: string}
                            httpHeaders:
                              type: array
                              items:
                                type: object
                                required: [name, value]
                                properties:
                                  name: {type: string}
                                  value: {type: string}
                        tcp:
                          type: object
                          required: [targetPort]
                          properties:
                            targetPort: {x-kubernetes-int-or-string: true}
                        postgreSQL:
                          type: object
                          required: [targetPort]
                          properties:
                            targetPort: {x-kubernetes-int-or-string: true}
                            dbName: {type: string}
                            query: {type: string}
                            authSecretName: {type: string}
          status:
            type: object
            properties:
              loadBalancer:
                type: object
                properties:
                  ingress:
                    type: array
                    items:
                      type: object
                      properties:
                        ip: {type: string}
                        hostname: {type: string}
                        ipMode: {type: string}
                        ports:
                          type: array
                          items:
                            type: object
                            required: [port, protocol]
                            properties:
                              port: {type: integer, format: int32}
                              protocol: {type: string}
                              error: {type: string}
              clusterIP: {type: string}
              clusterIPs:
                type: array
                items: {type: string}
              healthcheckCondition:
                type: object
                properties:
                  observedGeneration: {type: integer, format: int64}
                  endpoints: {type: integer, format: int32}
                  readyEndpoints: {type: integer, format: int32}
              conditions:
                type: array
                items:
                  type: object
                  required: [type, status]
                  properties:
                    type: {type: string}
                    status: {type: string}
                    observedGeneration: {type: integer, format: int64}
                    lastTransitionTime: {type: string, format: date-time}
                    reason: {type: string}
                    message: {type: string}
              endpointStatuses:
                type: array
                items:
                  type: object
                  required: [podName]
                  properties:
                    podName: {type: string}
                    nodeName: {type: string}
                    ready: {type: boolean}
                    probesSuccessful: {type: boolean}
                    failedProbes:
                      type: array
                      items: {type: string}
                    lastTransitionTime: {type: string, format: date-time}
                    lastProbeTime: {type: string, format: date-time}
"#;

/// The CRD, parsed.
pub fn crd() -> Result<CustomResourceDefinition> {
    serde_yaml::from_str(CRD_YAML).context("parsing the ServiceWithHealthchecks CRD")
}

/// Applies the CRD (server-side apply); the caller waits for it to be established.
pub async fn install(client: &kube::Client) -> Result<()> {
    apply_crd(client, NAME, &crd()?).await
}

/// Server-side applies `crd` named `name` as the test environment.
pub async fn apply_crd(
    client: &kube::Client,
    name: &str,
    crd: &CustomResourceDefinition,
) -> Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    api.patch(
        name,
        &PatchParams::apply("stratus-testenv").force(),
        &Patch::Apply(crd),
    )
    .await
    .with_context(|| format!("applying CRD {name}"))?;
    Ok(())
}
