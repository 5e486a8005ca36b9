//! Subnets of load balancers: which subnets a load balancer goes to ([`select`]: one per zone,
//! by role and cluster tags, as upstream) and the short-lived per-VPC listing they are chosen
//! from ([`cache`]).

mod cache;
mod select;

pub use cache::{choose_subnets, SubnetCache, SUBNET_TTL};
pub use select::{select_subnets, SubnetInfo, ROLE_ELB, ROLE_INTERNAL_ELB};
