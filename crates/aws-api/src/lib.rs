//! The one AWS API layer beneath every Stratus AWS application (the CCM provider, the load
//! balancer controller, the EBS CSI driver, the termination handler, the discoverer): how AWS
//! is called ([`call`]: rate limiter, retries, error table, metrics) and paged ([`pager`]), the
//! EC2 seam ([`ec2`]: instances, topology, zones, security groups, subnets, route tables), one
//! Classic ELB client ([`elb`]) and one ELBv2 client ([`elbv2`]), all speaking AWS-shaped typed
//! values with paging inside and none of a caller's planning vocabulary; beside them the pure
//! pieces several applications share: security-group rule diffing ([`sg_rules`],
//! [`node_rules`]), subnet selection ([`subnets`]), provider IDs ([`provider_id`]), ownership
//! tags ([`tags`]), the region ([`region`]) and the published `service.beta.kubernetes.io/aws-
//! load-balancer-*` annotation contract ([`annotations`]).
//!
//! Writes nothing to Kubernetes; every AWS request goes through [`AwsApi`].

pub mod annotations;
pub mod call;
pub mod ec2;
pub mod elb;
pub mod elbv2;
pub mod node_rules;
pub mod pager;
pub mod provider_id;
pub mod region;
pub mod sg_rules;
pub mod subnets;
pub mod tags;

pub use call::AwsApi;
pub use ec2::Ec2;
pub use elb::ElbApi;
pub use elbv2::ElbV2Api;
