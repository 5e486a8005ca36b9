//! Stratus cloud-controller-manager: the CCM library with the providers this build carries.

fn main() -> std::process::ExitCode {
    stratus_ccm::main(&[
        &stratus_aws::AwsProvider,
        &stratus_openstack::OpenStackProvider,
        &stratus_dvp::DvpProvider,
    ])
}
