//! API microversions (Nova `compute 2.x`, Cinder `volume 3.x`): which one a request asks for,
//! from `OpenStack-API-Version: <service> X.Y` or the legacy `X-OpenStack-Nova-API-Version`.

use http::HeaderMap;

/// A microversion `major.minor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major part (2 for Nova, 3 for Cinder).
    pub major: u16,
    /// Minor part.
    pub minor: u16,
}

impl Version {
    /// `major.minor`.
    pub const fn new(major: u16, minor: u16) -> Version {
        Version { major, minor }
    }

    /// Whether this is at least `major.minor`.
    pub fn at_least(self, major: u16, minor: u16) -> bool {
        self >= Version::new(major, minor)
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a requested microversion is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// Not `X.Y` nor `latest` (HTTP 400).
    #[error("Invalid API version request string {0}")]
    Malformed(String),
    /// Outside the supported range (HTTP 406).
    #[error("Version {asked} is not supported by the API. Minimum is {min} and maximum is {max}.")]
    Unsupported {
        /// The version asked for.
        asked: Version,
        /// The minimum served.
        min: Version,
        /// The maximum served.
        max: Version,
    },
}

/// The microversion a request asks of `service` (`compute`, `volume`), `min` when it names none.
/// `legacy` is the service's old header (`x-openstack-nova-api-version`), if it has one.
pub fn requested(
    headers: &HeaderMap,
    service: &str,
    legacy: Option<&str>,
    min: Version,
    max: Version,
) -> Result<Version, VersionError> {
    let from_new = headers
        .get_all("openstack-api-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|item| {
            let mut words = item.split_whitespace();
            (words.next()?.eq_ignore_ascii_case(service)).then(|| words.next().unwrap_or(""))
        })
        .map(str::to_owned);
    let from_legacy = legacy
        .and_then(|name| headers.get(name))
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned());
    let Some(text) = from_new.or(from_legacy) else {
        return Ok(min);
    };
    if text.eq_ignore_ascii_case("latest") {
        return Ok(max);
    }
    let asked = parse(&text).ok_or_else(|| VersionError::Malformed(text.clone()))?;
    if asked < min || asked > max {
        return Err(VersionError::Unsupported { asked, min, max });
    }
    Ok(asked)
}

/// `X.Y` → a version.
pub fn parse(text: &str) -> Option<Version> {
    let (major, minor) = text.trim().split_once('.')?;
    Some(Version::new(major.parse().ok()?, minor.parse().ok()?))
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(k, v)| (http::HeaderName::from_static(k), v.parse().unwrap()))
            .collect()
    }

    #[test]
    fn microversions_are_read_from_either_header() {
        let (min, max) = (Version::new(2, 1), Version::new(2, 96));
        let legacy = Some("x-openstack-nova-api-version");
        let cases: &[(&[(&'static str, &str)], Result<Version, VersionError>)] = &[
            (&[], Ok(min)),
            (
                &[("openstack-api-version", "compute 2.47")],
                Ok(Version::new(2, 47)),
            ),
            (
                &[("openstack-api-version", "volume 3.5, compute 2.60")],
                Ok(Version::new(2, 60)),
            ),
            (&[("openstack-api-version", "volume 3.5")], Ok(min)),
            (
                &[("x-openstack-nova-api-version", "2.53")],
                Ok(Version::new(2, 53)),
            ),
            (&[("openstack-api-version", "compute latest")], Ok(max)),
            (
                &[("openstack-api-version", "compute 2.x")],
                Err(VersionError::Malformed("2.x".into())),
            ),
            (
                &[("openstack-api-version", "compute 3.0")],
                Err(VersionError::Unsupported {
                    asked: Version::new(3, 0),
                    min,
                    max,
                }),
            ),
        ];
        for (h, want) in cases {
            assert_eq!(
                &requested(&headers(h), "compute", legacy, min, max),
                want,
                "{h:?}"
            );
        }
        assert!(Version::new(2, 47).at_least(2, 47));
        assert!(!Version::new(2, 46).at_least(2, 47));
        assert!(Version::new(2, 100) > Version::new(2, 96));
    }
}
