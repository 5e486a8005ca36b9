//! Typed models of the DVP (Deckhouse Virtualization Platform) parent cluster's kinds that
//! Stratus reads and writes: `virtualization.deckhouse.io/v1alpha2` VirtualMachine, VirtualDisk
//! and VirtualMachineBlockDeviceAttachment, plus the Deckhouse label names the DVP components
//! agree on. Only the fields Stratus uses are modelled; every field is optional on read, so
//! objects written by the platform (with fields we do not know) always parse. The types are
//! checked against the CRDs generated from the platform's own Go module by the testenv tests
//! (a server-side dry-run create accepts every field we write).

pub mod disk;
pub mod labels;
mod resource;
pub mod vm;

pub use disk::{
    AttachmentBlockDeviceRef, DiskDataSource, DiskObjectRef, VirtualDisk, VirtualDiskPvc,
    VirtualDiskSpec, VirtualDiskStatus, VirtualMachineBlockDeviceAttachment, VmbdaSpec,
    VmbdaStatus,
};
pub use vm::{
    BlockDeviceRef, BlockDeviceStatusRef, Cpu, Memory, Provisioning, UserDataRef, VirtualMachine,
    VirtualMachineSpec, VirtualMachineStatus, VmPhase,
};

/// The API group of the virtualization kinds.
pub const GROUP: &str = "virtualization.deckhouse.io";
/// The served version Stratus uses.
pub const VERSION: &str = "v1alpha2";
/// `group/version`.
pub const API_VERSION: &str = "virtualization.deckhouse.io/v1alpha2";
