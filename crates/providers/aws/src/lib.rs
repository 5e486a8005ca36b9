//! Stratus AWS provider: answers cloud questions about EC2 for the generic controllers.
//!
//! Reads EC2 (DescribeInstances filtered by the cluster tag, or by instance ID for nodes that are
//! not Ready; DescribeAvailabilityZones; DescribeInstanceTopology) through one shared,
//! periodically refreshed instance cache; keeps pod-CIDR routes in the cluster's
//! route tables; writes nothing to Kubernetes.

pub mod api_call;
pub mod cloud;
pub mod config;
pub mod ec2;
pub mod instance;
pub mod instance_cache;
pub mod instances_v2;
pub mod lb;
pub mod provider_id;
pub mod region;
pub mod routes;
pub mod subnet_selection;
pub mod topology;
pub mod zones;

pub use cloud::{AwsCloud, AwsInitError, AwsOptions, AwsProvider, PROVIDER_NAME};
