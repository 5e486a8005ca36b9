//! Runs the reaper: lists the tagged ELBv2 resources first and the Kubernetes owners second (an
//! owner created meanwhile is then seen, so nothing live is reaped), deletes what
//! [`plan_reap`] picks — load balancers, then target groups, then managed security groups, then
//! the internal
//! TargetGroupBindings that pointed at them — at start-up and every period.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, DeleteParams};
use kube::{Client, ResourceExt};
use stratus_cloud::CloudError;

use crate::crd::{IngressClassParams, TargetGroupBinding};
use crate::reaper::inventory::{tagged_resources, tagged_security_groups};
use crate::reaper::plan::{plan_reap, LiveOwners, Reap};
use stratus_aws_api::{Ec2, ElbV2Api};

/// Why one pass failed.
#[derive(Debug, thiserror::Error)]
pub enum ReapError {
    /// AWS refused or failed.
    #[error("{0}")]
    Aws(#[from] CloudError),
    /// The Kubernetes API failed.
    #[error("kubernetes: {0}")]
    Kube(#[from] kube::Error),
}

/// One pass: what was deleted.
pub async fn reap_once(
    client: &Client,
    alb: &ElbV2Api,
    ec2: &Ec2,
    cluster: &str,
) -> Result<Reap, ReapError> {
    let mut resources = tagged_resources(alb).await?;
    if !cluster.is_empty() {
        resources.extend(tagged_security_groups(ec2, cluster).await?);
    }
    let ingresses = Api::<Ingress>::all(client.clone())
        .list(&Default::default())
        .await?
        .items;
    let services = Api::<Service>::all(client.clone())
        .list(&Default::default())
        .await?
        .items;
    let params = Api::<IngressClassParams>::all(client.clone())
        .list(&Default::default())
        .await?
        .items;
    let owners = LiveOwners::of(&ingresses, &services).with_class_groups(&params);
    let reap = plan_reap(cluster, &resources, &owners);
    for (arn, owner) in &reap.load_balancers {
        tracing::info!(%arn, ?owner, "reaping a load balancer whose owner is gone");
        alb.delete_load_balancer(arn).await?;
    }
    for (arn, owner) in &reap.target_groups {
        tracing::info!(%arn, ?owner, "reaping a target group whose owner is gone");
        alb.delete_target_group(arn).await?;
    }
    for (id, owner) in &reap.security_groups {
        tracing::info!(%id, ?owner, "reaping a security group whose owner is gone");
        ec2.delete_security_group(id).await?;
    }
    if !reap.target_groups.is_empty() {
        let gone: BTreeSet<&str> = reap.target_groups.iter().map(|(a, _)| a.as_str()).collect();
        let bindings = Api::<TargetGroupBinding>::all(client.clone())
            .list(&Default::default())
            .await?;
        for b in bindings
            .items
            .iter()
            .filter(|b| gone.contains(b.spec.target_group_arn.as_str()))
        {
            let api = Api::<TargetGroupBinding>::namespaced(
                client.clone(),
                &b.namespace().unwrap_or_default(),
            );
            match api.delete(&b.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(reap)
}

/// Reaps now and every `period` until `shutdown`; a failed pass is logged and retried after a
/// minute (or the period, if shorter).
pub async fn run(
    client: Client,
    alb: ElbV2Api,
    ec2: Ec2,
    cluster: String,
    period: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let retry = period.min(Duration::from_secs(60));
    let passes = async {
        loop {
            let wait = match reap_once(&client, &alb, &ec2, &cluster).await {
                Ok(reap) => {
                    tracing::info!(
                        load_balancers = reap.load_balancers.len(),
                        target_groups = reap.target_groups.len(),
                        security_groups = reap.security_groups.len(),
                        "reaper pass done"
                    );
                    period
                }
                Err(e) => {
                    tracing::warn!(error = %e, "reaper pass failed");
                    retry
                }
            };
            tokio::time::sleep(wait).await;
        }
    };
    tokio::select! {
        _ = passes => {}
        _ = shutdown => {}
    }
}
