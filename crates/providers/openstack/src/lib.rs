//! Stratus OpenStack provider: answers cloud questions about Nova servers for the generic
//! controllers, drop-in compatible with openstack-cloud-controller-manager's cloud.conf and
//! provider IDs. The CCM provider only: the client, the Keystone session and the cloud config
//! every OpenStack application shares are `stratus-openstack-api`.
//!
//! Authenticates with Keystone (one token for every controller, renewed before it expires and
//! after a 401), finds endpoints in the catalog, and reads Nova and Neutron through one shared,
//! periodically refreshed view of the project's servers and ports; writes nothing to Kubernetes.

mod addresses;
mod cloud;
mod compute;
mod instances;
mod labels;
mod lb;
mod network;
mod provider_id;
mod routes;
mod server_view;

pub use cloud::{OpenStackCloud, OpenStackProvider};
