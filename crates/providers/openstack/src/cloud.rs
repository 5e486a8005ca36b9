//! The OpenStack cloud: the provider factory (cloud.conf checked before anything else), the
//! Keystone session and service clients, and the capabilities wired over them.

use std::sync::Arc;

use async_trait::async_trait;
use futures::FutureExt;
use prometheus_client::registry::Registry;
use stratus_cloud::{
    Capability, Cloud, ConfiguredProvider, InstancesV2, Provider, ProviderError, ProviderOptions,
    ReadinessGate, Unsupported,
};
use stratus_cloud_kit::ApiMetrics;

use crate::compute::Nova;
use crate::instances::{OpenStackInstances, SKIP_NODE_DELETION_ENV};
use crate::network::Neutron;
use crate::provider_id::{REGIONAL_ENV, SCHEME};
use crate::server_view::{ServerView, ViewOptions};
use stratus_openstack_api::client::http::HttpClient;
use stratus_openstack_api::client::{guard, Clients, Session};
use stratus_openstack_api::config::OpenStackConfig;

/// The OpenStack provider, as the binaries register it.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenStackProvider;

impl Provider for OpenStackProvider {
    fn name(&self) -> &'static str {
        SCHEME
    }

    fn configure(
        &self,
        options: &ProviderOptions,
    ) -> Result<Box<dyn ConfiguredProvider>, ProviderError> {
        let Some(path) = &options.config_path else {
            return Err(ProviderError::Config(
                "--cloud-config is required with --cloud-provider=openstack (the cloud.conf with [Global] auth-url and credentials)".into(),
            ));
        };
        let config = OpenStackConfig::load(path).map_err(|e| {
            ProviderError::Config(format!("--cloud-config {}: {e}", path.display()))
        })?;
        let http =
            HttpClient::new(&config.global.tls, config.metadata.request_timeout).map_err(|e| {
                ProviderError::Config(e.named(&format!(
                    "--cloud-config {}: invalid cloud config: [Global] ",
                    path.display()
                )))
            })?;
        Ok(Box::new(ConfiguredOpenStack {
            config,
            http,
            view: ViewOptions {
                refresh_period: options.cache_refresh_period,
                ..ViewOptions::default()
            },
            regional_ids: std::env::var(REGIONAL_ENV).is_ok_and(|v| v == "true"),
            skip_node_deletion: std::env::var(SKIP_NODE_DELETION_ENV)
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true")),
        }))
    }
}

struct ConfiguredOpenStack {
    config: OpenStackConfig,
    http: HttpClient,
    view: ViewOptions,
    regional_ids: bool,
    skip_node_deletion: bool,
}

#[async_trait]
impl ConfiguredProvider for ConfiguredOpenStack {
    async fn start(
        self: Box<Self>,
        metrics: &mut Registry,
    ) -> Result<Arc<dyn Cloud>, ProviderError> {
        let metrics = Arc::new(ApiMetrics::register(metrics));
        let global = &self.config.global;
        let session = Arc::new(Session::new(
            self.http,
            &global.auth_url,
            global.credentials.clone(),
            global.interface,
            global.region.clone(),
            guard("identity", &metrics),
        ));
        let clients = Clients::new(session, &metrics);
        let nova = Nova::new(clients.compute.clone());
        let view = ServerView::start(
            nova.clone(),
            Neutron::new(clients.network.clone()),
            self.view,
        );
        let instances = Arc::new(
            OpenStackInstances::new(
                view.clone(),
                nova,
                global.region.clone(),
                self.regional_ids,
                self.config.networking.clone(),
            )
            .keeping_nodes(self.skip_node_deletion),
        );
        if self.skip_node_deletion {
            tracing::info!("{SKIP_NODE_DELETION_ENV}=true: Nodes whose server is gone are kept");
        }

        let load_balancers = self.config.load_balancer.enabled.then(|| {
            let octavia = crate::lb::octavia::Octavia::new(
                stratus_openstack_api::client::ServiceClient::new(
                    clients.session.clone(),
                    stratus_openstack_api::client::Service::LoadBalancer,
                    guard("load-balancer", &metrics),
                    Vec::new(),
                ),
            );
            Arc::new(crate::lb::OpenStackLoadBalancers::new(
                self.config.load_balancer.clone(),
                self.config.load_balancer_classes.clone(),
                octavia,
                crate::lb::floating::FloatingIps::new(clients.network.clone()),
            ))
        });
        let routes = self.config.router_id.clone().map(|id| {
            Arc::new(crate::routes::OpenStackRoutes::new(
                id,
                crate::routes::router::Router::new(clients.network.clone()),
            ))
        });
        tracing::info!(auth_url = %global.auth_url, region = global.region.as_deref().unwrap_or(""), "OpenStack provider started");
        Ok(Arc::new(OpenStackCloud {
            config: self.config,
            instances,
            view,
            load_balancers,
            routes,
        }))
    }
}

/// The OpenStack provider, started.
pub struct OpenStackCloud {
    config: OpenStackConfig,
    instances: Arc<OpenStackInstances>,
    view: Arc<ServerView>,
    load_balancers: Option<Arc<crate::lb::OpenStackLoadBalancers>>,
    routes: Option<Arc<crate::routes::OpenStackRoutes>>,
}

impl Cloud for OpenStackCloud {
    fn instances(&self) -> Capability<dyn InstancesV2> {
        Ok(self.instances.clone())
    }

    fn load_balancer(&self) -> Capability<dyn stratus_cloud::LoadBalancer> {
        match &self.load_balancers {
            Some(lb) => Ok(lb.clone()),
            None => Err(Unsupported(
                "[LoadBalancer] enabled = false in the cloud config".into(),
            )),
        }
    }

    fn routes(&self) -> Capability<dyn stratus_cloud::Routes> {
        match &self.routes {
            Some(r) => Ok(r.clone()),
            None => Err(Unsupported(
                "routes need [Route] router-id in the cloud config".into(),
            )),
        }
    }

    fn readiness_gates(&self) -> Vec<ReadinessGate> {
        let view = self.view.clone();
        vec![ReadinessGate {
            name: "server-view-sync",
            pending: "the OpenStack server view has not completed its first listing".into(),
            opened: async move { view.wait_until_synced().await }.boxed(),
        }]
    }

    fn describe(&self) -> String {
        match &self.config.global.region {
            Some(r) => format!("OpenStack region {r}"),
            None => "OpenStack".into(),
        }
    }
}
