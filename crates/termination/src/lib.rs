//! Stratus node-termination-handler: a drop-in for aws-node-termination-handler.
//!
//! Watches EC2 instance metadata (IMDS mode: Spot interruption notices, scheduled maintenance
//! and its cancellation, rebalance recommendations, the ASG target lifecycle state) or an SQS
//! queue fed by EventBridge (queue mode: Spot, rebalance, state change, AWS Health scheduled
//! change, ASG lifecycle launch/terminate). Writes to Kubernetes: Node cordon/labels/taints,
//! pod evictions (and force deletions at the close of an instance's window), core/v1 Events,
//! and the leader Lease in queue mode. Calls AWS: SQS, EC2 DescribeInstances (batched,
//! cached), Auto Scaling lifecycle actions.

pub mod app;
pub mod config;
pub mod drain;
pub mod drain_plan;
pub mod events;
pub mod footprint;
pub mod handler;
pub mod imds;
pub mod imds_events;
pub mod imds_mode;
pub mod interruption;
pub mod metrics;
pub mod node;
pub mod queue;
pub mod reboot;
pub mod serve;
pub mod store;
pub mod throttle;
pub mod webhook;
