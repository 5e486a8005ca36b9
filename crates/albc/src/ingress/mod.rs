//! Ingress → ALB, the planning half: annotations parsed with every problem listed, and the
//! desired ALB of an Ingress group (listeners, ordered rules, target groups per backend) as a
//! pure function of its members. The AWS driver is not in this build yet.

pub mod annotations;
pub mod model;
