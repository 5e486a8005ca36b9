//! Ingress → ALB: annotations parsed with every problem listed, and the
//! desired ALB of an Ingress group (listeners, ordered rules, target groups per backend) as a
//! pure function of its members (under their class's IngressClassParams); the driver that
//! applies it to AWS by difference, and the managed security group of an ALB.

pub mod annotations;
pub mod backend_group;
pub mod class;
pub mod class_params;
pub mod context;
pub mod drift;
pub mod driver;
pub mod live;
pub mod plan;
pub mod rules;
pub mod security;
pub mod tags;
pub mod target_groups;
