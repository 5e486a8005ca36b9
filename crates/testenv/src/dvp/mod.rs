//! The DVP cloud of the test environment ([`DvpEnv`]): a tenant and a parent cluster, the
//! parent carrying the generated `virtualization.deckhouse.io` CRDs and the ServiceWithHealthchecks
//! and ModuleConfig CRDs, the tenant's namespace-bound identity ([`tenant`]), the "deny" fault
//! ([`deny`]) and the platform simulator of `stratus-dvp-sim`.

pub mod deny;
pub mod env;
pub mod module_config_crd;
pub mod swhc_crd;
pub mod tenant;

pub use env::{DvpEnv, TENANT_ACCOUNT, TENANT_NAMESPACE};
pub use stratus_dvp_sim::{Knobs, PlatformSim, PLATFORM_NODE};
