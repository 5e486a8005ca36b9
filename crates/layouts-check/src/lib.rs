//! Checks of the OpenTofu layouts in `layouts/<cloud>/` (AWS, OpenStack, DVP), in Deckhouse's
//! shape: `layouts/<layout>/{base-infrastructure,master-node,static-node}`, shared
//! `terraform-modules/`, and a `versions.yml` naming OpenTofu and the provider.
//!
//! The library reads the HCL ([`module`]), finds problems in it without running anything
//! ([`structure`], [`config_usage`], [`aws_contract`]) and drives a real `tofu` on a scratch
//! copy of the layouts ([`workspace`], [`tofu`]). The tests in `tests/` run all of it: tofu is
//! built by the test environment's installer the first time the suite runs.

pub mod aws_contract;
pub mod catalog;
pub mod config_usage;
pub mod module;
pub mod schema;
pub mod structure;
pub mod takeover;
pub mod tofu;
pub mod versions;
pub mod workspace;

pub use catalog::{CloudSpec, CLOUDS, LAYOUT_MODULES};
pub use module::Module;
pub use structure::Problem;
