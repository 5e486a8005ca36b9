//! The layout suite: structure and contract checks of `layouts/`, then the real `tofu` (built by
//! the test environment's installer on first use): `fmt -check`, offline `init` + `validate` and
//! `tofu test` of the OpenStack layouts with the real provider, AWS tag values evaluated and held
//! against the CCM's code, DVP objects rendered and dry-run against the virtualization CRDs.

mod aws;
mod aws_plans;
mod aws_takeover;
mod common;
mod discovery;
mod dvp;
mod dvp_names;
mod dvp_plans;
mod dvp_takeover;
mod openstack;
mod openstack_api;
mod openstack_plans;
mod openstack_takeover;
mod structure;
mod takeover;
