//! Stratus OpenStack provider: answers cloud questions about Nova servers for the generic
//! controllers, drop-in compatible with openstack-cloud-controller-manager's cloud.conf and
//! provider IDs.
//!
//! Authenticates with Keystone (one token for every controller, renewed before it expires and
//! after a 401), finds endpoints in the catalog, and reads Nova and Neutron through one shared,
//! periodically refreshed view of the project's servers and ports; writes nothing to Kubernetes.

pub mod addresses;
pub mod client;
pub mod cloud;
pub mod compute;
pub mod config;
pub mod instances;
pub mod labels;
pub mod lb;
pub mod network;
pub mod provider_id;
pub mod routes;
pub mod server_view;

pub use cloud::{OpenStackCloud, OpenStackProvider};
