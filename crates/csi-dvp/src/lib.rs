//! The DVP backend of the Stratus CSI core, compatible with Deckhouse's DVP CSI driver
//! (`csi.dvp.deckhouse.io`): a volume is a `VirtualDisk` in the tenant's namespace of the parent
//! virtualization cluster (named as the volume, labelled as Deckhouse labels it), attached by
//! hot plug with a `VirtualMachineBlockDeviceAttachment` named `vmbda-<disk>-<node>`. Every wait
//! has a deadline and answers a retryable code while the platform is still working; the node side
//! finds the disk by its serial (the md5 of the disk's UID) behind the core's device seam, so
//! tests stand loop devices in. It writes only VirtualDisks and VMBDAs in that namespace.

pub mod app;
pub mod controller;
pub mod devices;
pub mod names;
pub mod node;
pub mod parent;
pub mod plan;
pub mod quantity;

pub use controller::{DvpController, DvpOptions};
pub use node::DvpNode;

/// The driver name.
pub const DRIVER_NAME: &str = "csi.dvp.deckhouse.io";
/// The StorageClass parameter naming the parent cluster's StorageClass.
pub const STORAGE_CLASS_PARAM: &str = "dvpStorageClass";
/// The publish context key carrying the disk's serial (md5 hex of its UID).
pub const SERIAL_KEY: &str = "serial";
