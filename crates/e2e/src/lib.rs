//! Helpers of the end-to-end suites: charts installed with the real `helm install` into a
//! [`RealCluster`](stratus_testenv::node::RealCluster), pods awaited until Running and Ready,
//! and a crash-looping pod turned into a failure carrying its log.

pub mod aws;
pub mod capdvp;
pub mod ccm;
pub mod chart;
pub mod dvp;
pub mod module;
pub mod openstack;
pub mod pack;
pub mod phases;
pub mod pods;
pub mod probes;
pub mod runtime;
pub mod volumes;
