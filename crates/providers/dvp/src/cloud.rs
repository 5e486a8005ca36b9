//! The DVP cloud: the provider factory (configuration checked before anything else), the parent
//! cluster client and the capabilities wired over the shared VM view.

use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use prometheus_client::registry::Registry;
use stratus_cloud::{
    Capability, Cloud, ConfiguredProvider, InstancesV2, Provider, ProviderError, ProviderOptions,
    ReadinessGate,
};

use crate::config::DvpConfig;
use crate::instances::DvpInstances;
use crate::lb::DvpLoadBalancers;
use crate::metrics::DvpMetrics;
use crate::provider_id::SCHEME;
use crate::view::VmView;

/// The DVP provider, as the binaries register it.
#[derive(Debug, Clone, Copy, Default)]
pub struct DvpProvider;

impl Provider for DvpProvider {
    fn name(&self) -> &'static str {
        SCHEME
    }

    fn configure(
        &self,
        options: &ProviderOptions,
    ) -> Result<Box<dyn ConfiguredProvider>, ProviderError> {
        let file = match &options.config_path {
            Some(path) => Some((
                path.clone(),
                std::fs::read_to_string(path).map_err(|e| {
                    ProviderError::Config(format!("--cloud-config {}: {e}", path.display()))
                })?,
            )),
            None => None,
        };
        let config = DvpConfig::load(
            |name| std::env::var(name).ok(),
            file.as_ref().map(|(p, t)| (p.as_path(), t.as_str())),
        )
        .map_err(|e| ProviderError::Config(e.to_string()))?;
        Ok(Box::new(ConfiguredDvp { config }))
    }
}

struct ConfiguredDvp {
    config: DvpConfig,
}

#[async_trait]
impl ConfiguredProvider for ConfiguredDvp {
    async fn start(
        self: Box<Self>,
        registry: &mut Registry,
    ) -> Result<Arc<dyn Cloud>, ProviderError> {
        let metrics = DvpMetrics::register(registry);
        let client = self.config.client().await.map_err(ProviderError::Start)?;
        let view = VmView::start(client.clone(), &self.config.namespace, metrics.clone());
        let load_balancers =
            DvpLoadBalancers::start(client, &self.config.namespace, view.clone(), metrics);
        tracing::info!(server = %self.config.server, namespace = %self.config.namespace, "DVP provider started");
        Ok(Arc::new(DvpCloud {
            instances: Arc::new(DvpInstances::new(view.clone())),
            load_balancers,
            view,
            describe: format!(
                "DVP namespace {} at {}",
                self.config.namespace, self.config.server
            ),
        }))
    }
}

/// The DVP provider, started.
pub struct DvpCloud {
    instances: Arc<DvpInstances>,
    load_balancers: Arc<DvpLoadBalancers>,
    view: Arc<VmView>,
    describe: String,
}

impl Cloud for DvpCloud {
    fn instances(&self) -> Capability<dyn InstancesV2> {
        Ok(self.instances.clone())
    }

    fn load_balancer(&self) -> Capability<dyn stratus_cloud::LoadBalancer> {
        Ok(self.load_balancers.clone())
    }

    fn readiness_gates(&self) -> Vec<ReadinessGate> {
        let view = self.view.clone();
        vec![ReadinessGate {
            name: "dvp-vm-watch-sync",
            pending: "the DVP VirtualMachine watch has not completed its first listing".into(),
            opened: async move { view.wait_until_synced().await }.boxed(),
        }]
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }
}
