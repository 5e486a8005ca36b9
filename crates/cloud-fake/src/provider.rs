//! The fake as a registrable provider (`--cloud-provider=fake`): it ignores the config file and
//! hands out the cloud a test prepared.

use std::sync::Arc;

use async_trait::async_trait;
use prometheus_client::registry::Registry;
use stratus_cloud::{Cloud, ConfiguredProvider, Provider, ProviderError, ProviderOptions};

use crate::FakeCloud;

/// A provider named `fake` that starts `cloud`.
#[derive(Debug, Clone)]
pub struct FakeProvider {
    /// The cloud it hands out.
    pub cloud: Arc<FakeCloud>,
}

impl Provider for FakeProvider {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn configure(
        &self,
        _options: &ProviderOptions,
    ) -> Result<Box<dyn ConfiguredProvider>, ProviderError> {
        Ok(Box::new(self.clone()))
    }
}

#[async_trait]
impl ConfiguredProvider for FakeProvider {
    async fn start(
        self: Box<Self>,
        _metrics: &mut Registry,
    ) -> Result<Arc<dyn Cloud>, ProviderError> {
        Ok(self.cloud)
    }
}
