//! Stratus AWS provider: answers cloud questions about EC2 for the generic controllers.
//!
//! Reads EC2 (DescribeInstances filtered by the cluster tag, or by instance ID for nodes that are
//! not Ready; DescribeAvailabilityZones; DescribeInstanceTopology) through one shared,
//! periodically refreshed instance cache; keeps pod-CIDR routes in the cluster's
//! route tables; tags the instances behind nodes for the tagging controller (CreateTags,
//! DeleteTags); writes nothing to Kubernetes.
//!
//! The CCM provider only: every AWS call goes through `stratus-aws-api`, the API layer the other
//! AWS applications share; this crate's face is the provider and its options.

mod cloud;
mod config;
mod instance;
mod instance_cache;
mod instances_v2;
mod lb;
mod node_tags;
mod routes;
mod topology;
mod zones;

pub use cloud::{AwsCloud, AwsInitError, AwsOptions, AwsProvider, PROVIDER_NAME};
