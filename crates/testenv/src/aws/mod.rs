//! The AWS cloud of the test environment: moto behind the counting and fault proxy ([`AwsEnv`]),
//! a cluster beside it ([`TestEnv`]), the AWS protocol of the proxy with what it adds where moto
//! falls short ([`proxy`]: ECR tokens, EBS volume states, instance-type paging, instance
//! topology), the ASG lifecycle actions ([`lifecycle`]) and the proxy's control endpoints from
//! the test side ([`ProxyControl`]). amazon-ec2-metadata-mock is installed and started by
//! [`crate::tools::ec2_metadata_mock`].

pub mod control;
pub mod env;
pub mod lifecycle;
pub mod proxy;
pub mod test_env;

pub use control::ProxyControl;
pub use env::AwsEnv;
pub use proxy::ebs::EbsKnobs;
pub use test_env::TestEnv;
