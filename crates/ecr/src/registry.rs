//! Which registry an image lives in: private ECR in any partition (commercial, China, GovCloud,
//! ISO, EU sovereign; FIPS and dual-stack hosts) with its account and region, or ECR Public.
//!
//! Only the host matters; the image's path, tag and digest are ignored, and a port is kept in
//! the registry key because the kubelet matches auth keys with their port.

use std::fmt;

/// The host of ECR Public images.
pub const ECR_PUBLIC_HOST: &str = "public.ecr.aws";
/// The dual-stack (IPv4 and IPv6) host of ECR Public images.
pub const ECR_PUBLIC_DUAL_STACK_HOST: &str = "ecr-public.aws.com";
/// ECR Public's API lives in this region only.
pub const ECR_PUBLIC_REGION: &str = "us-east-1";

/// An AWS partition, as far as registry host names go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// The commercial partition (`aws`).
    Aws,
    /// China (`aws-cn`).
    China,
    /// GovCloud (`aws-us-gov`).
    GovCloud,
    /// ISO (`aws-iso`).
    Iso,
    /// ISO-B (`aws-iso-b`).
    IsoB,
    /// ISO-E (`aws-iso-e`).
    IsoE,
    /// ISO-F (`aws-iso-f`).
    IsoF,
    /// The European Sovereign Cloud (`aws-eusc`).
    EuSovereign,
}

impl Partition {
    /// The partition of a region, from its name as the SDK's partition table does; regions
    /// with an unknown prefix are commercial.
    pub fn of_region(region: &str) -> Partition {
        let prefixes = [
            ("cn-", Partition::China),
            ("us-gov-", Partition::GovCloud),
            ("us-isob-", Partition::IsoB),
            ("us-isof-", Partition::IsoF),
            ("us-iso-", Partition::Iso),
            ("eu-isoe-", Partition::IsoE),
            ("eusc-", Partition::EuSovereign),
        ];
        prefixes
            .iter()
            .find(|(prefix, _)| region.starts_with(prefix))
            .map_or(Partition::Aws, |&(_, p)| p)
    }

    /// The partition's name in ARNs.
    pub fn name(self) -> &'static str {
        match self {
            Partition::Aws => "aws",
            Partition::China => "aws-cn",
            Partition::GovCloud => "aws-us-gov",
            Partition::Iso => "aws-iso",
            Partition::IsoB => "aws-iso-b",
            Partition::IsoE => "aws-iso-e",
            Partition::IsoF => "aws-iso-f",
            Partition::EuSovereign => "aws-eusc",
        }
    }
}

/// Registry domain suffixes: (suffix, dual-stack, partitions that use it).
const SUFFIXES: &[(&str, bool, &[Partition])] = &[
    (
        "amazonaws.com",
        false,
        &[Partition::Aws, Partition::GovCloud],
    ),
    ("amazonaws.com.cn", false, &[Partition::China]),
    ("on.aws", true, &[Partition::Aws, Partition::GovCloud]),
    ("on.amazonwebservices.com.cn", true, &[Partition::China]),
    ("c2s.ic.gov", false, &[Partition::Iso]),
    ("sc2s.sgov.gov", false, &[Partition::IsoB]),
    ("cloud.adc-e.uk", false, &[Partition::IsoE]),
    ("csp.hci.ic.gov", false, &[Partition::IsoF]),
    ("amazonaws.eu", false, &[Partition::EuSovereign]),
];

/// The registry an image is pulled from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registry {
    /// `<account>.dkr.ecr[-fips].<region>.<suffix>` or dual-stack
    /// `<account>.dkr-ecr[-fips].<region>.<suffix>`.
    Private {
        /// Host (and port, if the image named one) as written in the image: the auth key.
        authority: String,
        /// The registry's account ID.
        account: String,
        /// The registry's region.
        region: String,
        /// The region's partition.
        partition: Partition,
        /// Whether the host is a FIPS endpoint.
        fips: bool,
        /// Whether the host is dual-stack.
        dual_stack: bool,
    },
    /// `public.ecr.aws` or dual-stack `ecr-public.aws.com`.
    Public {
        /// Host (and port, if the image named one) as written in the image: the auth key.
        authority: String,
        /// Whether the host is the dual-stack one.
        dual_stack: bool,
    },
}

impl Registry {
    /// The key of the response's `auth` map: the host (with port, if any).
    pub fn authority(&self) -> &str {
        match self {
            Registry::Private { authority, .. } | Registry::Public { authority, .. } => authority,
        }
    }

    /// The region whose API hands out tokens for this registry.
    pub fn region(&self) -> &str {
        match self {
            Registry::Private { region, .. } => region,
            Registry::Public { .. } => ECR_PUBLIC_REGION,
        }
    }

    /// The API service: `ecr` or `ecr-public`.
    pub fn service(&self) -> &'static str {
        match self {
            Registry::Private { .. } => "ecr",
            Registry::Public { .. } => "ecr-public",
        }
    }

    /// Whether the API should be reached through a FIPS endpoint (the host is a FIPS one).
    pub fn fips(&self) -> bool {
        matches!(self, Registry::Private { fips: true, .. })
    }

    /// Whether the API should be reached through a dual-stack endpoint (the host is one, so
    /// the node may have IPv6 only).
    pub fn dual_stack(&self) -> bool {
        match self {
            Registry::Private { dual_stack, .. } | Registry::Public { dual_stack, .. } => {
                *dual_stack
            }
        }
    }
}

/// Why an image is not served by this plugin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "image {} is not in an Amazon ECR registry: {}",
    stratus_runtime::redact::quoted_name(image, 512),
    stratus_runtime::redact::bounded(reason, stratus_runtime::redact::MAX_PROBLEM_BYTES)
)]
pub struct RegistryError {
    /// The image as requested.
    pub image: String,
    /// Why it is not an ECR image.
    pub reason: String,
}

/// Finds the registry of `image` (`host[:port]/path[:tag][@digest]`).
pub fn parse_image(image: &str) -> Result<Registry, RegistryError> {
    let fail = |reason: String| RegistryError {
        image: image.to_owned(),
        reason,
    };
    let rest = image
        .strip_prefix("https://")
        .or_else(|| image.strip_prefix("http://"))
        .unwrap_or(image);
    let authority = match rest.split_once('/') {
        Some((authority, _)) => authority,
        // No path: a bare host, possibly with a digest.
        None => rest.split('@').next().unwrap_or(rest),
    };
    if authority.is_empty() {
        return Err(fail("it names no registry host".into()));
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) => {
            if port.parse::<u16>().map_or(true, |p| p == 0) {
                return Err(fail(format!("{authority:?} has an invalid port {port:?}")));
            }
            host
        }
        None => authority,
    };
    parse_host(host, authority).map_err(fail)
}

/// Parses a host name (no port) into a registry keyed by `authority`.
fn parse_host(host: &str, authority: &str) -> Result<Registry, String> {
    let lower = host.to_ascii_lowercase();
    if lower == ECR_PUBLIC_HOST || lower == ECR_PUBLIC_DUAL_STACK_HOST {
        return Ok(Registry::Public {
            authority: authority.to_owned(),
            dual_stack: lower == ECR_PUBLIC_DUAL_STACK_HOST,
        });
    }
    let expected = "expected <account>.dkr.ecr.<region>.amazonaws.com (or .amazonaws.com.cn, \
                    dkr.ecr-fips, dual-stack dkr-ecr.<region>.on.aws, the ISO and EU sovereign \
                    domains) or public.ecr.aws";
    let not_ecr = || format!("{host} is not an ECR registry host; {expected}");

    let (account, rest) = lower.split_once('.').ok_or_else(not_ecr)?;
    // The service part: `dkr.ecr` is two labels, dual-stack `dkr-ecr` one.
    let (dual_stack_label, fips, rest) = [
        ("dkr.ecr.", false, false),
        ("dkr.ecr-fips.", false, true),
        ("dkr-ecr.", true, false),
        ("dkr-ecr-fips.", true, true),
    ]
    .iter()
    .find_map(|&(prefix, dual, fips)| rest.strip_prefix(prefix).map(|r| (dual, fips, r)))
    .ok_or_else(not_ecr)?;
    let (region, suffix) = rest.split_once('.').ok_or_else(not_ecr)?;
    let &(_, dual_stack_suffix, partitions) = SUFFIXES
        .iter()
        .find(|(s, _, _)| *s == suffix)
        .ok_or_else(not_ecr)?;

    if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{host}: the registry ID {account:?} is not a 12-digit AWS account ID"
        ));
    }
    if !is_region(region) {
        return Err(format!("{host}: {region:?} is not an AWS region name"));
    }
    let partition = Partition::of_region(region);
    if !partitions.contains(&partition) {
        let wanted: Vec<&str> = SUFFIXES
            .iter()
            .filter(|(_, dual, ps)| *dual == dual_stack_suffix && ps.contains(&partition))
            .map(|(s, _, _)| *s)
            .collect();
        return Err(format!(
            "{host}: region {region} is in partition {}, whose registries end in {}",
            partition.name(),
            if wanted.is_empty() {
                "other domains".to_owned()
            } else {
                wanted.join(" or ")
            }
        ));
    }
    Ok(Registry::Private {
        authority: authority.to_owned(),
        account: account.to_owned(),
        region: region.to_owned(),
        partition,
        fips,
        dual_stack: dual_stack_label || dual_stack_suffix,
    })
}

/// `us-east-1`, `us-gov-west-1`, `us-iso-east-1`, `eusc-de-east-1`: lowercase letters in two
/// or more dash-separated words, then a number.
pub fn is_region(region: &str) -> bool {
    let mut parts: Vec<&str> = region.split('-').collect();
    let Some(number) = parts.pop() else {
        return false;
    };
    parts.len() >= 2
        && !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
}

impl fmt::Display for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}, {})",
            self.authority(),
            self.service(),
            self.region()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn private(image: &str) -> (String, String, String, Partition, bool, bool) {
        match parse_image(image).unwrap_or_else(|e| panic!("{image}: {e}")) {
            Registry::Private {
                authority,
                account,
                region,
                partition,
                fips,
                dual_stack,
            } => (authority, account, region, partition, fips, dual_stack),
            other => panic!("{image}: {other:?}"),
        }
    }

    #[test]
    fn every_private_host_form() {
        use Partition::*;
        let cases = [
            // (image, region, partition, fips, dual-stack)
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com/app:v1",
                "us-east-1",
                Aws,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.eu-central-1.amazonaws.com/team/app@sha256:0123",
                "eu-central-1",
                Aws,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.ap-southeast-5.amazonaws.com/app",
                "ap-southeast-5",
                Aws,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr-fips.us-east-1.amazonaws.com/app",
                "us-east-1",
                Aws,
                true,
                false,
            ),
            (
                "123456789012.dkr-ecr.us-east-1.on.aws/app:v1",
                "us-east-1",
                Aws,
                false,
                true,
            ),
            (
                "123456789012.dkr-ecr-fips.us-east-2.on.aws/app",
                "us-east-2",
                Aws,
                true,
                true,
            ),
            (
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn/app",
                "cn-north-1",
                China,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.cn-northwest-1.amazonaws.com.cn/app",
                "cn-northwest-1",
                China,
                false,
                false,
            ),
            (
                "123456789012.dkr-ecr.cn-north-1.on.amazonwebservices.com.cn/app",
                "cn-north-1",
                China,
                false,
                true,
            ),
            (
                "123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/app",
                "us-gov-west-1",
                GovCloud,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr-fips.us-gov-east-1.amazonaws.com/app",
                "us-gov-east-1",
                GovCloud,
                true,
                false,
            ),
            (
                "123456789012.dkr-ecr.us-gov-west-1.on.aws/app",
                "us-gov-west-1",
                GovCloud,
                false,
                true,
            ),
            (
                "123456789012.dkr.ecr.us-iso-east-1.c2s.ic.gov/app",
                "us-iso-east-1",
                Iso,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.us-isob-east-1.sc2s.sgov.gov/app",
                "us-isob-east-1",
                IsoB,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.eu-isoe-west-1.cloud.adc-e.uk/app",
                "eu-isoe-west-1",
                IsoE,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.us-isof-south-1.csp.hci.ic.gov/app",
                "us-isof-south-1",
                IsoF,
                false,
                false,
            ),
            (
                "123456789012.dkr.ecr.eusc-de-east-1.amazonaws.eu/app",
                "eusc-de-east-1",
                EuSovereign,
                false,
                false,
            ),
        ];
        for (image, region, partition, fips, dual) in cases {
            let (authority, account, r, p, f, d) = private(image);
            assert_eq!(authority, image.split('/').next().unwrap(), "{image}");
            assert_eq!(account, "123456789012", "{image}");
            assert_eq!(
                (r.as_str(), p, f, d),
                (region, partition, fips, dual),
                "{image}"
            );
        }
    }

    #[test]
    fn path_tag_digest_and_port_are_not_the_host() {
        let (authority, _, region, ..) =
            private("123456789012.dkr.ecr.us-west-2.amazonaws.com:443/a/b/c:tag@sha256:abcd");
        assert_eq!(
            authority,
            "123456789012.dkr.ecr.us-west-2.amazonaws.com:443"
        );
        assert_eq!(region, "us-west-2");
        let (authority, ..) = private("123456789012.dkr.ecr.us-west-2.amazonaws.com");
        assert_eq!(authority, "123456789012.dkr.ecr.us-west-2.amazonaws.com");
        let (authority, ..) = private("https://123456789012.dkr.ecr.us-west-2.amazonaws.com/app:1");
        assert_eq!(authority, "123456789012.dkr.ecr.us-west-2.amazonaws.com");
    }

    #[test]
    fn host_case_is_ignored_but_kept_in_the_key() {
        let (authority, _, region, ..) =
            private("123456789012.DKR.ECR.US-EAST-1.AMAZONAWS.COM/app");
        assert_eq!(authority, "123456789012.DKR.ECR.US-EAST-1.AMAZONAWS.COM");
        assert_eq!(region, "us-east-1");
    }

    #[test]
    fn ecr_public() {
        for (image, authority, dual) in [
            ("public.ecr.aws/nginx/nginx:latest", "public.ecr.aws", false),
            (
                "public.ecr.aws/eks-distro/kubernetes/pause:3.9",
                "public.ecr.aws",
                false,
            ),
            (
                "ecr-public.aws.com/nginx/nginx:1",
                "ecr-public.aws.com",
                true,
            ),
        ] {
            let registry = parse_image(image).unwrap();
            assert_eq!(
                registry,
                Registry::Public {
                    authority: authority.into(),
                    dual_stack: dual
                }
            );
            assert_eq!(registry.region(), "us-east-1");
            assert_eq!(registry.service(), "ecr-public");
            assert_eq!(registry.dual_stack(), dual);
            assert!(!registry.fips());
        }
    }

    #[test]
    fn everything_else_is_refused_with_the_reason() {
        for (image, reason) in [
            ("nginx", "nginx is not an ECR registry host"),
            ("nginx:latest", "invalid port \"latest\""),
            (
                "docker.io/library/nginx:1.27",
                "docker.io is not an ECR registry host",
            ),
            ("ghcr.io/org/app", "ghcr.io is not an ECR registry host"),
            (
                "registry.k8s.io/pause:3.10",
                "registry.k8s.io is not an ECR registry host",
            ),
            ("/app", "names no registry host"),
            ("", "names no registry host"),
            (
                "localhost:5000/app",
                "localhost is not an ECR registry host",
            ),
            ("[::1]:5000/app", "is not an ECR registry host"),
            // Look-alikes: a suffix after the AWS domain, or a foreign domain.
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.example/app",
                "is not an ECR registry host",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.co/app",
                "is not an ECR registry host",
            ),
            (
                "123456789012.ecr.us-east-1.amazonaws.com/app",
                "is not an ECR registry host",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.api.aws/app",
                "is not an ECR registry host",
            ),
            (
                "123456789012.dkr.ecr.amazonaws.com/app",
                "is not an ECR registry host",
            ),
            (
                "123456789012.dkr.ecr.east.amazonaws.com/app",
                "\"east\" is not an AWS region name",
            ),
            (
                "public.ecr.aws.evil.example/app",
                "is not an ECR registry host",
            ),
            ("evilpublic.ecr.aws/app", "is not an ECR registry host"),
            // Bad parts.
            (
                "12345678901.dkr.ecr.us-east-1.amazonaws.com/app",
                "not a 12-digit AWS account ID",
            ),
            (
                "12345678901a.dkr.ecr.us-east-1.amazonaws.com/app",
                "not a 12-digit AWS account ID",
            ),
            (
                "123456789012.dkr.ecr.useast1.amazonaws.com/app",
                "is not an AWS region name",
            ),
            (
                "123456789012.dkr.ecr.us-east-.amazonaws.com/app",
                "is not an AWS region name",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com:0/app",
                "invalid port",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com:99999/app",
                "invalid port",
            ),
            // Region and domain from different partitions.
            (
                "123456789012.dkr.ecr.cn-north-1.amazonaws.com/app",
                "partition aws-cn, whose registries end in amazonaws.com.cn",
            ),
            (
                "123456789012.dkr.ecr.us-east-1.amazonaws.com.cn/app",
                "partition aws, whose registries end in amazonaws.com",
            ),
            (
                "123456789012.dkr.ecr.us-iso-east-1.amazonaws.com/app",
                "partition aws-iso, whose registries end in c2s.ic.gov",
            ),
            (
                "123456789012.dkr-ecr.cn-north-1.on.aws/app",
                "whose registries end in on.amazonwebservices.com.cn",
            ),
        ] {
            let err = parse_image(image).expect_err(image);
            let text = err.to_string();
            assert!(text.contains(reason), "{image}: {text}");
            assert!(
                text.starts_with(&format!("image {image:?} is not in an Amazon ECR registry")),
                "{text}"
            );
        }
    }

    #[test]
    fn regions() {
        for ok in [
            "us-east-1",
            "us-gov-west-1",
            "us-iso-east-1",
            "eusc-de-east-1",
            "il-central-1",
            "ap-southeast-10",
        ] {
            assert!(is_region(ok), "{ok}");
        }
        for bad in [
            "",
            "us",
            "us-1",
            "us-east",
            "US-east-1",
            "us--1",
            "us-east-1a",
            "us_east-1",
        ] {
            assert!(!is_region(bad), "{bad}");
        }
    }

    #[test]
    fn partitions_of_regions() {
        assert_eq!(Partition::of_region("us-east-1"), Partition::Aws);
        assert_eq!(Partition::of_region("mx-central-1"), Partition::Aws);
        assert_eq!(Partition::of_region("cn-north-1"), Partition::China);
        assert_eq!(Partition::of_region("us-gov-east-1"), Partition::GovCloud);
        assert_eq!(Partition::of_region("us-iso-west-1"), Partition::Iso);
        assert_eq!(Partition::of_region("us-isob-east-1"), Partition::IsoB);
        assert_eq!(Partition::of_region("eu-isoe-west-1"), Partition::IsoE);
        assert_eq!(Partition::of_region("us-isof-east-1"), Partition::IsoF);
        assert_eq!(
            Partition::of_region("eusc-de-east-1"),
            Partition::EuSovereign
        );
    }
}
