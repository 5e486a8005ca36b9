//! The DVP test environment: a tenant cluster and a parent "virtualization" cluster (two real
//! kube-apiservers), the parent carrying the `virtualization.deckhouse.io` CRDs generated from the
//! platform's Go module, the ServiceWithHealthchecks and ModuleConfig CRDs, a tenant namespace with a
//! namespace-bound ServiceAccount (the tenant's kubeconfig, as Deckhouse hands it to the DVP
//! components), and the platform simulator playing the virtualization controllers.

use anyhow::{Context, Result};
use base64::Engine as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use stratus_dvp_sim::PlatformSim;

use super::{module_config_crd, swhc_crd, tenant};
use crate::core::cluster::wait_established;
use crate::core::{Identity, KubeCluster};
use crate::tools::virtualization_crds;

/// The tenant project's namespace in the parent.
pub const TENANT_NAMESPACE: &str = "tenant-project";
/// The tenant's ServiceAccount in that namespace.
pub const TENANT_ACCOUNT: &str = "tenant-cluster";

/// A running DVP environment. Dropping it stops the simulator and both clusters.
pub struct DvpEnv {
    /// The simulator (dropped first: it watches the parent).
    sim: PlatformSim,
    /// The tenant cluster (where the CCM's Nodes and Services live).
    pub tenant: KubeCluster,
    /// The parent (virtualization) cluster.
    pub parent: KubeCluster,
    tenant_kubeconfig: String,
}

impl DvpEnv {
    /// Generates the virtualization CRDs if needed, starts both clusters, installs the CRDs in
    /// the parent, creates the tenant identity and starts the simulator.
    pub async fn start() -> Result<DvpEnv> {
        let crds = tokio::task::spawn_blocking(virtualization_crds::ensure_virtualization_crds)
            .await
            .context("CRD generation task panicked")??;
        let (tenant, parent) = tokio::try_join!(KubeCluster::start(), KubeCluster::start())?;
        let admin = parent.kube_client(Identity::Admin).await?;
        virtualization_crds::install_virtualization_crds(&admin, &crds).await?;
        swhc_crd::install(&admin).await?;
        module_config_crd::install(&admin).await?;
        wait_established(&admin, swhc_crd::NAME).await?;
        wait_established(&admin, module_config_crd::NAME).await?;
        let token = tenant::create_tenant(&admin, TENANT_NAMESPACE, TENANT_ACCOUNT).await?;
        let tenant_kubeconfig =
            tenant::kubeconfig_yaml(parent.apiserver_url(), &token, TENANT_NAMESPACE);
        let sim = PlatformSim::start(admin, TENANT_NAMESPACE);
        Ok(DvpEnv {
            sim,
            tenant,
            parent,
            tenant_kubeconfig,
        })
    }

    /// The tenant project's namespace in the parent.
    pub fn namespace(&self) -> &str {
        TENANT_NAMESPACE
    }

    /// The simulator, to turn its knobs.
    pub fn sim(&self) -> &PlatformSim {
        &self.sim
    }

    /// The tenant's kubeconfig for the parent (ServiceAccount token, namespace-bound Role).
    pub fn parent_kubeconfig_yaml(&self) -> &str {
        &self.tenant_kubeconfig
    }

    /// The same, base64-encoded: the value of `DVP_KUBERNETES_CONFIG_BASE64`.
    pub fn parent_kubeconfig_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.tenant_kubeconfig)
    }

    /// The environment Deckhouse gives the DVP components: `DVP_KUBERNETES_CONFIG_BASE64` and
    /// `DVP_NAMESPACE`.
    pub fn env_vars(&self) -> Vec<(String, String)> {
        vec![
            (
                "DVP_KUBERNETES_CONFIG_BASE64".into(),
                self.parent_kubeconfig_base64(),
            ),
            ("DVP_NAMESPACE".into(), TENANT_NAMESPACE.into()),
        ]
    }

    /// Creates another ServiceAccount in the tenant namespace bound to a Role with `rules` (e.g.
    /// the least-privilege Role a component ships) and returns the environment variables that
    /// hand its kubeconfig to a DVP component.
    pub async fn bound_account_env(
        &self,
        account: &str,
        rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule>,
    ) -> Result<Vec<(String, String)>> {
        let admin = self.parent_admin().await?;
        let token = tenant::bind_account(&admin, TENANT_NAMESPACE, account, account, rules).await?;
        let kubeconfig =
            tenant::kubeconfig_yaml(self.parent.apiserver_url(), &token, TENANT_NAMESPACE);
        Ok(vec![
            (
                "DVP_KUBERNETES_CONFIG_BASE64".into(),
                base64::engine::general_purpose::STANDARD.encode(kubeconfig),
            ),
            ("DVP_NAMESPACE".into(), TENANT_NAMESPACE.into()),
        ])
    }

    /// A client of the parent acting as the tenant.
    pub async fn parent_tenant_client(&self) -> Result<kube::Client> {
        let kubeconfig = Kubeconfig::from_yaml(&self.tenant_kubeconfig)?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// A client of the parent acting as its administrator (the platform).
    pub async fn parent_admin(&self) -> Result<kube::Client> {
        self.parent.kube_client(Identity::Admin).await
    }
}
