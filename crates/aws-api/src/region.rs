//! The AWS region every AWS binary resolves before it starts, instance metadata asked quickly.
//!
//! The explicit setting, else the SDK's order (`AWS_REGION`/`AWS_DEFAULT_REGION`, the shared
//! config profile, then the instance metadata service, asked with short timeouts), else a problem
//! that says how to set it.

use std::time::Duration;

use aws_config::environment::region::EnvironmentVariableRegionProvider;
use aws_config::imds::region::ImdsRegionProvider;
use aws_config::meta::region::RegionProviderChain;
use aws_config::profile::ProfileFileRegionProvider;
use aws_config::Region;

/// How long one instance metadata request may take (connecting and reading, each); off EC2 the
/// lookup gives up within a few seconds.
pub const IMDS_TIMEOUT: Duration = Duration::from_secs(1);

/// Attempts of each instance metadata request.
const IMDS_ATTEMPTS: u32 = 2;

/// The region: `explicit` when set (and not blank), else the SDK's order with instance metadata
/// asked quickly. `how` says how this binary takes a region (e.g. `set --aws-region or
/// AWS_REGION`); the error names it.
pub async fn resolve(explicit: Option<&str>, how: &str) -> Result<Region, String> {
    if let Some(region) = explicit.map(str::trim).filter(|r| !r.is_empty()) {
        return Ok(Region::new(region.to_owned()));
    }
    let chain = RegionProviderChain::first_try(EnvironmentVariableRegionProvider::new())
        .or_else(ProfileFileRegionProvider::new())
        .or_else(
            ImdsRegionProvider::builder()
                .imds_client(imds_client())
                .build(),
        );
    chain.region().await.ok_or_else(|| missing(how))
}

/// An instance metadata client that gives up quickly off EC2 ([`IMDS_TIMEOUT`], two attempts);
/// it honours `AWS_EC2_METADATA_SERVICE_ENDPOINT` and `AWS_EC2_METADATA_DISABLED` as the SDK's.
pub fn imds_client() -> aws_config::imds::Client {
    aws_config::imds::Client::builder()
        .connect_timeout(IMDS_TIMEOUT)
        .read_timeout(IMDS_TIMEOUT)
        .max_attempts(IMDS_ATTEMPTS)
        .build()
}

/// The problem text when no region is found.
pub fn missing(how: &str) -> String {
    format!(
        "no AWS region: {how} (AWS_REGION, AWS_DEFAULT_REGION, the shared config's region and the instance metadata service gave none)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_explicit_region_wins_and_blank_is_unset() {
        let r = resolve(Some(" eu-west-1 "), "set X").await.unwrap();
        assert_eq!(r.as_ref(), "eu-west-1");
        assert!(missing("set --aws-region").starts_with("no AWS region: set --aws-region ("));
    }
}
