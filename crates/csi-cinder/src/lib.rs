//! The Cinder backend of the Stratus CSI core, compatible with cinder-csi-plugin
//! (`cinder.csi.openstack.org`): its flags, `cloud.conf` (`[Global]` auth, `[BlockStorage]`
//! keys), StorageClass parameters (`type`, `availability`), topology key and volume metadata.
//! The controller side creates, attaches (through Nova `os-volume_attachments`), expands and
//! deletes Cinder volumes with bounded waits; the node side finds an attached volume's device by
//! its virtio serial (no udev needed) or `/dev/disk/by-id`, behind the core's device seam so
//! tests stand loop devices in. It writes only Cinder volumes, their metadata and attachments.
//! No snapshots or clones (as Deckhouse ships the driver); the capabilities say so.

pub mod app;
pub mod cinder;
pub mod controller;
pub mod devices;
pub mod metadata;
pub mod node;
pub mod params;

pub use controller::{CinderController, CinderOptions};
pub use node::CinderNode;

/// The driver name.
pub const DRIVER_NAME: &str = "cinder.csi.openstack.org";
/// The topology key the driver reports and reads.
pub const TOPOLOGY_KEY: &str = "topology.cinder.csi.openstack.org/zone";
/// The volume metadata key naming the cluster (`--cluster`).
pub const CLUSTER_KEY: &str = "cinder.csi.openstack.org/cluster";
/// The publish context key naming the device Nova reported (upstream's `DevicePath`).
pub const DEVICE_PATH: &str = "DevicePath";
