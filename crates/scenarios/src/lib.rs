//! Fixtures shared by the integration tests, the demo and the benchmarks: EC2 instances and route
//! tables in moto, servers in the OpenStack simulators, uninitialised and ready Nodes,
//! LoadBalancer Services and the ELBs behind them, the shipped RBAC, and a
//! cloud-controller-manager process.

pub mod acm_fixture;
pub mod behaviour;
pub mod capdvp_bed;
pub mod ccm;
pub mod cloud_fixture;
pub mod csi;
pub mod dvp_fixture;
pub mod dvp_rbac;
pub mod ec2_fixture;
pub mod iam_fixture;
pub use stratus_testenv::core::https;
pub mod kube_fixture;
pub mod kubelet;
pub mod lb_fixture;
pub mod moto_call;
pub mod nth_fixture;
pub mod openstack_fixture;
pub mod route_fixture;
pub mod service_fixture;
pub mod svg_chart;
pub mod table;
pub mod wait;

pub use wait::wait_for;
