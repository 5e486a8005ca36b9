//! The tagging controller (upstream cloud-provider-aws's `tagging`): tags the cloud resources
//! behind each node when it joins or the tag set changes, and removes them when it leaves; what
//! was applied is recorded on the Node (upstream's checksum label and our applied-tags
//! annotation).

pub mod budget;
pub mod driver;
pub mod plan;

pub use driver::{run, TaggingConfig};
