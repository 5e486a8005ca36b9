//! Ingress → ALB, the planning half: annotations parsed with every problem listed, and the
//! desired ALB of an Ingress group (listeners, ordered rules, target groups per backend) as a
//! pure function of its members; the driver that applies it to AWS, and the managed security
//! group of an ALB.

pub mod alb_api;
pub mod annotations;
pub mod controller;
pub mod model;
pub mod rules;
pub mod security;
