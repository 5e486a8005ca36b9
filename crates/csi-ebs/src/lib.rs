//! The EBS backend of the Stratus CSI core, compatible with aws-ebs-csi-driver
//! (`ebs.csi.aws.com`): StorageClass parameters, tags, topology keys and flags as upstream. The
//! controller side creates, attaches, expands, snapshots and deletes EBS volumes through the
//! shared AWS call guard, with describes batched; the node side finds an attached volume's
//! device by its NVMe serial (no udev) or the device name, behind a seam so tests stand loop
//! devices in. It writes only EC2 volumes, attachments, snapshots and their tags.

pub mod app;
pub mod controller;
pub mod devices;
pub mod ec2;
pub mod node;
pub mod node_identity;
pub mod params;
pub mod plan;
pub mod shapes;
pub mod tags;

pub use controller::{EbsController, EbsOptions};
pub use node::{DeviceFinder, EbsNode, LoopDevices, NvmeDevices};

/// The driver name.
pub const DRIVER_NAME: &str = "ebs.csi.aws.com";
/// The topology key the driver reports and reads.
pub const TOPOLOGY_KEY: &str = "topology.ebs.csi.aws.com/zone";
/// The well-known zone key, also accepted in requests and reported by nodes.
pub const WELL_KNOWN_ZONE_KEY: &str = "topology.kubernetes.io/zone";
