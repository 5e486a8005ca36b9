//! The Keystone service catalog and endpoint selection (service type, interface, region), pure.

use serde::Deserialize;

use crate::config::Interface;

/// One endpoint of a service.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Endpoint {
    /// `public`, `internal` or `admin`.
    pub interface: String,
    /// The region (`region_id` in newer Keystones).
    #[serde(default)]
    pub region_id: Option<String>,
    /// The region, older spelling.
    #[serde(default)]
    pub region: Option<String>,
    /// The base URL.
    pub url: String,
}

/// One service of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CatalogEntry {
    /// Its type (`compute`, `network`…).
    #[serde(rename = "type")]
    pub service_type: String,
    /// Its endpoints.
    #[serde(default)]
    pub endpoints: Vec<Endpoint>,
}

/// The catalog of a token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog(pub Vec<CatalogEntry>);

/// A service Stratus calls, with the catalog types it may be registered under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Nova.
    Compute,
    /// Neutron.
    Network,
    /// Octavia.
    LoadBalancer,
    /// Cinder v3.
    BlockStorage,
    /// Glance.
    Image,
}

impl Service {
    /// The catalog types, preferred first (as openstacksdk's service-types-authority lists them).
    pub fn catalog_types(self) -> &'static [&'static str] {
        match self {
            Service::Compute => &["compute"],
            Service::Network => &["network"],
            Service::LoadBalancer => &["load-balancer"],
            Service::BlockStorage => &["block-storage", "volumev3", "volume"],
            Service::Image => &["image"],
        }
    }

    /// The `service` metric label.
    pub fn label(self) -> &'static str {
        match self {
            Service::Compute => "compute",
            Service::Network => "network",
            Service::LoadBalancer => "load-balancer",
            Service::BlockStorage => "block-storage",
            Service::Image => "image",
        }
    }
}

/// Why no endpoint was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the Keystone catalog has no {interface} endpoint of {service}{region} (services: {available})"
)]
pub struct NoEndpoint {
    /// The service's label.
    pub service: &'static str,
    /// The interface asked for.
    pub interface: &'static str,
    /// ` in <region>` when a region was asked for.
    pub region: String,
    /// The catalog types present.
    pub available: String,
}

impl Catalog {
    /// The base URL of `service` on `interface`, in `region` when given (without a trailing `/`).
    pub fn endpoint(
        &self,
        service: Service,
        interface: Interface,
        region: Option<&str>,
    ) -> Result<String, NoEndpoint> {
        for t in service.catalog_types() {
            let found = self
                .0
                .iter()
                .filter(|e| e.service_type == *t)
                .flat_map(|e| &e.endpoints)
                .find(|e| {
                    e.interface == interface.as_str()
                        && region.is_none_or(|r| {
                            e.region_id.as_deref() == Some(r) || e.region.as_deref() == Some(r)
                        })
                });
            if let Some(e) = found {
                return Ok(e.url.trim_end_matches('/').to_string());
            }
        }
        Err(NoEndpoint {
            service: service.label(),
            interface: interface.as_str(),
            region: region.map(|r| format!(" in {r}")).unwrap_or_default(),
            available: self
                .0
                .iter()
                .map(|e| e.service_type.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        let ep = |interface: &str, region: &str, url: &str| Endpoint {
            interface: interface.into(),
            region_id: Some(region.into()),
            region: None,
            url: url.into(),
        };
        Catalog(vec![
            CatalogEntry {
                service_type: "compute".into(),
                endpoints: vec![
                    ep("public", "RegionOne", "https://nova-one/v2.1/"),
                    ep("internal", "RegionOne", "http://nova-int/v2.1"),
                    ep("public", "RegionTwo", "https://nova-two/v2.1"),
                ],
            },
            CatalogEntry {
                service_type: "volumev3".into(),
                endpoints: vec![ep("public", "RegionOne", "https://cinder/v3/p")],
            },
        ])
    }

    #[test]
    fn picks_by_type_interface_and_region() {
        let c = catalog();
        assert_eq!(
            c.endpoint(Service::Compute, Interface::Public, Some("RegionTwo"))
                .unwrap(),
            "https://nova-two/v2.1"
        );
        assert_eq!(
            c.endpoint(Service::Compute, Interface::Internal, None)
                .unwrap(),
            "http://nova-int/v2.1"
        );
        assert_eq!(
            c.endpoint(Service::BlockStorage, Interface::Public, Some("RegionOne"))
                .unwrap(),
            "https://cinder/v3/p",
            "older catalog types are accepted"
        );
        let e = c
            .endpoint(Service::Network, Interface::Public, Some("RegionOne"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the Keystone catalog has no public endpoint of network in RegionOne (services: compute, volumev3)"
        );
    }
}
