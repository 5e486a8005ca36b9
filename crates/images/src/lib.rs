//! Release artifacts built without a Docker daemon: one OCI image (an `oci-archive` tarball) per
//! server binary and a plain tarball per kubelet-plugin binary, plus a JSON manifest of what was
//! built. `make images` runs the `stratus-images` binary on release builds; the tests package the
//! debug binaries through the same code and unpack the images with crane.

pub mod artifact;
pub mod host_tools;
pub mod ldd;
pub mod oci;
pub mod report;
pub mod rootfs;
pub mod table;
pub mod tarball;
