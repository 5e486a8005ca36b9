//! The DeckhouseCluster reconciler: DVP needs nothing made per cluster (the tenant project is
//! given), so a DeckhouseCluster reports its infrastructure provisioned at once — the v1beta2
//! contract's `status.initialization.provisioned`, Deckhouse's `infrastructureProvisioned` and
//! the v1beta1 `ready` — which lets Cluster API's Cluster controller proceed.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use crate::api::infra::DeckhouseClusterStatus;
use crate::api::DeckhouseCluster;
use crate::metrics::Metrics;

/// What the reconciler works with.
pub struct ClusterContext {
    /// The management cluster.
    pub mgmt: kube::Client,
    /// The metrics.
    pub metrics: Arc<Metrics>,
}

/// The status a DeckhouseCluster should have, from its current one.
pub fn desired_status(current: Option<&DeckhouseClusterStatus>) -> DeckhouseClusterStatus {
    let mut status = current.cloned().unwrap_or_default();
    status.ready = true;
    let mut init = status.initialization.clone().unwrap_or_default();
    init.provisioned = Some(true);
    init.infrastructure_provisioned = Some(true);
    status.initialization = Some(init);
    status
}

/// Reconciles one DeckhouseCluster.
pub async fn reconcile(
    dc: Arc<DeckhouseCluster>,
    ctx: Arc<ClusterContext>,
) -> Result<Action, kube::Error> {
    let desired = desired_status(dc.status.as_ref());
    if dc.status.as_ref() != Some(&desired) {
        let ns = dc.metadata.namespace.clone().unwrap_or_default();
        let name = dc.metadata.name.clone().unwrap_or_default();
        Api::<DeckhouseCluster>::namespaced(ctx.mgmt.clone(), &ns)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": desired})),
            )
            .await?;
        tracing::info!(cluster = %name, namespace = %ns, "DeckhouseCluster provisioned");
    }
    ctx.metrics.reconciled("DeckhouseCluster", "ok");
    Ok(Action::await_change())
}

/// What to do after a failed reconcile.
pub fn error_policy(
    dc: Arc<DeckhouseCluster>,
    error: &kube::Error,
    ctx: Arc<ClusterContext>,
) -> Action {
    ctx.metrics.reconciled("DeckhouseCluster", "error");
    tracing::warn!(cluster = dc.metadata.name.as_deref().unwrap_or(""), %error, "reconcile failed");
    Action::requeue(Duration::from_secs(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provisioned_in_every_contract_keeping_the_rest() {
        let current = DeckhouseClusterStatus {
            failure_message: Some("x".into()),
            ..DeckhouseClusterStatus::default()
        };
        let s = desired_status(Some(&current));
        assert!(s.ready);
        let init = s.initialization.as_ref().unwrap();
        assert_eq!(
            (init.provisioned, init.infrastructure_provisioned),
            (Some(true), Some(true))
        );
        assert_eq!(s.failure_message.as_deref(), Some("x"));
        assert_eq!(desired_status(Some(&s)), s, "settled");
    }
}
