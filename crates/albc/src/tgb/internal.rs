//! The internal TargetGroupBindings the Ingress and Service paths make for the target groups they
//! own (as upstream does): created once (their networking and node selector kept as planned),
//! named after their target group, removed with it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::crd::{
    Networking, NetworkingIngressRule, NetworkingPeer, NetworkingPort, SecurityGroupRef,
    ServiceReference, TargetGroupBinding, TargetGroupBindingSpec,
};

/// What an internal binding connects.
#[derive(Debug, Clone)]
pub struct InternalBinding<'a> {
    /// Namespace of the binding and of its Service.
    pub namespace: &'a str,
    /// Binding name (the target group's name).
    pub name: &'a str,
    /// Target group ARN.
    pub arn: &'a str,
    /// `ip` targets (else `instance`).
    pub ip: bool,
    /// The Service.
    pub service: &'a str,
    /// The Service port.
    pub port: IntOrString,
    /// The target group's VPC.
    pub vpc: &'a str,
    /// Labels naming the owning stack.
    pub labels: BTreeMap<String, String>,
    /// Who may reach the targets (the shared backend security group), if anyone is named.
    pub networking: Option<Networking>,
    /// Instance targets only on nodes matching this.
    pub node_selector: Option<LabelSelector>,
}

/// `spec.networking` letting the security group `backend` reach `port` over each of
/// `protocols` (`TCP`, `UDP`).
pub fn backend_networking(backend: &str, port: IntOrString, protocols: &[&str]) -> Networking {
    Networking {
        ingress: vec![NetworkingIngressRule {
            from: vec![NetworkingPeer {
                security_group: Some(SecurityGroupRef {
                    group_id: backend.to_string(),
                }),
                ip_block: None,
            }],
            ports: protocols
                .iter()
                .map(|p| NetworkingPort {
                    protocol: Some(p.to_string()),
                    port: Some(port.clone()),
                })
                .collect(),
        }],
    }
}

/// Creates the binding unless it exists (a 409 from a racing create counts as made); an
/// existing one gets the planned `spec.networking` when it differs.
pub async fn ensure(client: &Client, b: &InternalBinding<'_>) -> Result<(), kube::Error> {
    let api = Api::<TargetGroupBinding>::namespaced(client.clone(), b.namespace);
    if let Some(existing) = api.get_opt(b.name).await? {
        if existing.spec.networking != b.networking
            || existing.spec.node_selector != b.node_selector
        {
            let patch = serde_json::json!({"spec": {
                "networking": b.networking, "nodeSelector": b.node_selector}});
            api.patch(b.name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        return Ok(());
    }
    let mut tgb = TargetGroupBinding::new(
        b.name,
        TargetGroupBindingSpec {
            target_group_arn: b.arn.to_string(),
            target_group_name: None,
            target_type: Some(if b.ip { "ip" } else { "instance" }.to_string()),
            service_ref: ServiceReference {
                name: b.service.to_string(),
                port: b.port.clone(),
            },
            node_selector: b.node_selector.clone(),
            networking: b.networking.clone(),
            ip_address_type: None,
            vpc_id: Some(b.vpc.to_string()),
        },
    );
    tgb.metadata.labels = Some(b.labels.clone());
    match api.create(&PostParams::default(), &tgb).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Deletes every binding called `name` (in any namespace: a target group found by its tags
/// does not say where its binding lives); gone counts as deleted.
pub async fn remove(client: &Client, name: &str) -> Result<(), kube::Error> {
    let all = Api::<TargetGroupBinding>::all(client.clone())
        .list(&Default::default())
        .await?;
    for t in all.items.iter().filter(|t| t.name_any() == name) {
        let api = Api::<TargetGroupBinding>::namespaced(
            client.clone(),
            &t.namespace().unwrap_or_default(),
        );
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
