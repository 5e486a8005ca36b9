//! The OpenStack cloud of the test environment ([`OpenStackEnv`]): a real Keystone (installed by
//! [`crate::tools::keystone`]) and the simulators of `stratus-openstack-sim`, behind the counting
//! and fault proxy speaking OpenStack ([`proxy`]); and the OpenStack side of the `testenv`
//! command line (`cli`).

mod admin;
mod catalog;
pub(crate) mod cli;
pub mod env;
pub mod proxy;

pub use env::{OpenStackCredentials, OpenStackEnv, OpenStackOptions};
