//! The provider registry: `--cloud-provider` picks a [`Provider`] by name; the provider reads and
//! checks its own config file, then starts its capabilities (as `k8s.io/cloud-provider`'s
//! `RegisterCloudProvider`, but the binary passes its list in: no global state).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use prometheus_client::registry::Registry;

use crate::Cloud;

/// Process settings a provider may read besides its config file (upstream CCM flags).
#[derive(Debug, Clone)]
pub struct ProviderOptions {
    /// `--cloud-config`: the provider's config file, if given.
    pub config_path: Option<PathBuf>,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--allow-untagged-cloud`: run without a cluster ID where the cloud tags by cluster.
    pub allow_untagged_cloud: bool,
    /// `--instance-cache-refresh-period`: how often a provider's shared instance view is listed.
    pub cache_refresh_period: Duration,
}

impl Default for ProviderOptions {
    fn default() -> Self {
        Self {
            config_path: None,
            cluster_name: "kubernetes".into(),
            allow_untagged_cloud: false,
            cache_refresh_period: Duration::from_secs(300),
        }
    }
}

/// Why a provider cannot be configured or started. The message is complete: a config error
/// lists every problem of the file, one per line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// The config file (or a flag the provider reads) is unusable.
    #[error("{0}")]
    Config(String),
    /// Starting failed (credentials, endpoints…).
    #[error("{0}")]
    Start(String),
}

/// One cloud provider, registered under its `--cloud-provider` name.
pub trait Provider: Send + Sync {
    /// The `--cloud-provider` name (e.g. `aws`).
    fn name(&self) -> &'static str;

    /// Reads and checks the config: no cloud call, no Kubernetes call. Every problem is reported
    /// at once.
    fn configure(
        &self,
        options: &ProviderOptions,
    ) -> Result<Box<dyn ConfiguredProvider>, ProviderError>;
}

/// A provider whose configuration is known to be valid.
#[async_trait]
pub trait ConfiguredProvider: Send {
    /// Settings the provider still misses after reading its config, found from its environment
    /// before anything serves (e.g. the AWS region, which may come from the instance metadata):
    /// one problem per missing setting, each saying how to set it. No cloud API call. The binary
    /// reports these together with its own problems and does not start when there are any; it
    /// calls this once, before [`ConfiguredProvider::start`].
    async fn missing(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Builds the cloud clients and capabilities, registering the provider's metrics. Starts no
    /// cloud call that a standby replica would not need (caches list on first use).
    async fn start(
        self: Box<Self>,
        metrics: &mut Registry,
    ) -> Result<Arc<dyn Cloud>, ProviderError>;
}

/// The providers a binary was built with.
#[derive(Clone, Copy)]
pub struct Providers<'a>(pub &'a [&'a dyn Provider]);

impl<'a> Providers<'a> {
    /// The provider called `name`, or an error listing the known names.
    pub fn find(&self, name: &str) -> Result<&'a dyn Provider, ProviderError> {
        self.0
            .iter()
            .copied()
            .find(|p| p.name() == name)
            .ok_or_else(|| {
                ProviderError::Config(format!(
                    "--cloud-provider: unknown provider {name:?} (this build supports: {})",
                    self.names().join(", ")
                ))
            })
    }

    /// The registered names, in registration order.
    pub fn names(&self) -> Vec<&'static str> {
        self.0.iter().map(|p| p.name()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Provider for Named {
        fn name(&self) -> &'static str {
            self.0
        }
        fn configure(
            &self,
            _: &ProviderOptions,
        ) -> Result<Box<dyn ConfiguredProvider>, ProviderError> {
            Err(ProviderError::Config("unused".into()))
        }
    }

    #[test]
    fn finds_by_name_and_lists_the_known_ones() {
        let (a, b) = (Named("aws"), Named("openstack"));
        let list: [&dyn Provider; 2] = [&a, &b];
        let providers = Providers(&list);
        assert_eq!(providers.find("openstack").unwrap().name(), "openstack");
        let e = providers.find("gce").err().unwrap().to_string();
        assert_eq!(
            e,
            "--cloud-provider: unknown provider \"gce\" (this build supports: aws, openstack)"
        );
    }
}
