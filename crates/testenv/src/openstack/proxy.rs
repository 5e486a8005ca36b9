//! The OpenStack protocol of the proxy: one listener in front of Keystone (`/identity/…`, sent
//! to uwsgi) and the simulators (`/compute`, `/network`, `/volume`, `/image`,
//! `/load-balancer`). Requests are counted as `<service>:<METHOD> <path>` with the version
//! prefix (and Cinder's project) left out and ids replaced by `{id}` — `compute:GET
//! /servers/detail`, `compute:POST /servers/{id}/action`, `network:GET /ports`,
//! `block-storage:GET /volumes/detail`; Keystone keeps its `/v3`: `identity:POST
//! /v3/auth/tokens`. Injected errors speak each service's JSON error format; a throttle is a
//! 429 with `Retry-After`.

use std::sync::Arc;

use anyhow::Result;
use http::{header, HeaderMap, HeaderValue, Method, StatusCode, Uri};
use stratus_openstack_sim::errors::{error_body, Service};

use crate::core::proxy::{FaultKind, Protocol, RequestInfo, Upstream};

/// Seconds a client is told to wait after an injected throttle.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// Routes `/identity` to Keystone and everything else to the simulators.
pub struct OpenStackProtocol {
    keystone: Upstream,
}

/// The OpenStack protocol, ready for [`crate::core::proxy::serve`] (whose upstream is the simulators),
/// sending `/identity/…` to `keystone_url` (`http://127.0.0.1:PORT`).
pub fn openstack(keystone_url: &str) -> Result<Arc<dyn Protocol>> {
    Ok(Arc::new(OpenStackProtocol {
        keystone: Upstream::new(keystone_url)?,
    }))
}

/// Whether a path segment is an id: a UUID (with or without dashes) or a number.
fn is_id(segment: &str) -> bool {
    let hex = segment.chars().filter(|c| *c != '-').count();
    let uuid_like = (hex == 32)
        && segment.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
        && (segment.len() == 32 || segment.len() == 36);
    uuid_like || (!segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()))
}

/// The service and the counted path of a request path.
pub fn classify_path(path: &str) -> (&'static str, String) {
    let Some(service) = Service::from_path(path) else {
        return ("unknown", normalise(path));
    };
    let rest = &path[service.prefix().len()..];
    let mut segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let drop = match service {
        Service::Identity => 0,
        Service::Compute => usize::from(segments.first().is_some_and(|s| s.starts_with("v2"))),
        Service::Network | Service::Image | Service::LoadBalancer => {
            usize::from(segments.first().is_some_and(|s| s.starts_with('v')))
        }
        // `/v3/{project_id}/…`
        Service::BlockStorage => match segments.as_slice() {
            [v, project, ..] if v.starts_with('v') && is_id(project) => 2,
            [v, ..] if v.starts_with('v') => 1,
            _ => 0,
        },
    };
    segments.drain(..drop.min(segments.len()));
    (
        service.service_type(),
        normalise(&format!("/{}", segments.join("/"))),
    )
}

fn normalise(path: &str) -> String {
    let out: Vec<&str> = path
        .split('/')
        .map(|s| if is_id(s) { "{id}" } else { s })
        .collect();
    let joined = out.join("/");
    if joined.is_empty() {
        "/".to_owned()
    } else {
        joined
    }
}

fn service_of(info: &RequestInfo) -> Service {
    Service::ALL
        .into_iter()
        .find(|s| s.service_type() == info.service)
        .unwrap_or(Service::Compute)
}

#[async_trait::async_trait]
impl Protocol for OpenStackProtocol {
    fn classify(&self, headers: &HeaderMap, uri: &Uri, body: &[u8]) -> RequestInfo {
        self.classify_request(&Method::GET, headers, uri, body)
    }

    fn classify_request(
        &self,
        method: &Method,
        _headers: &HeaderMap,
        uri: &Uri,
        _body: &[u8],
    ) -> RequestInfo {
        let (service, path) = classify_path(uri.path());
        RequestInfo {
            service: service.to_owned(),
            action: format!("{method} {path}"),
        }
    }

    fn error_answer(
        &self,
        info: &RequestInfo,
        kind: &FaultKind,
    ) -> Option<(StatusCode, &'static str, String)> {
        let (status, message) = match kind {
            FaultKind::Throttle => (
                StatusCode::TOO_MANY_REQUESTS,
                "Rate limit exceeded (injected)",
            ),
            FaultKind::ServerError { status } => (
                StatusCode::from_u16(*status).ok()?,
                "The server is currently unavailable (injected fault)",
            ),
            FaultKind::AuthFailure => (
                StatusCode::UNAUTHORIZED,
                "The request you have made requires authentication (injected)",
            ),
            FaultKind::Latency { .. } | FaultKind::Drop => return None,
        };
        let kind_name = match status {
            StatusCode::TOO_MANY_REQUESTS => "OverQuota",
            StatusCode::UNAUTHORIZED => "Unauthorized",
            _ => "ServiceUnavailable",
        };
        let retry = (status == StatusCode::TOO_MANY_REQUESTS).then_some(RETRY_AFTER_SECONDS);
        let (content_type, body) = error_body(service_of(info), status, kind_name, message, retry);
        Some((status, content_type, body))
    }

    fn error_headers(
        &self,
        _info: &RequestInfo,
        kind: &FaultKind,
    ) -> Vec<(header::HeaderName, HeaderValue)> {
        match kind {
            FaultKind::Throttle => {
                vec![(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS))]
            }
            _ => Vec::new(),
        }
    }

    fn upstream<'a>(&'a self, info: &RequestInfo, default: &'a Upstream) -> &'a Upstream {
        if info.service == Service::Identity.service_type() {
            &self.keystone
        } else {
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_named_by_service_method_and_path_without_ids() {
        let p = OpenStackProtocol {
            keystone: Upstream::new("http://127.0.0.1:1").unwrap(),
        };
        let key = |method: Method, uri: &str| {
            p.classify_request(&method, &HeaderMap::new(), &uri.parse().unwrap(), b"")
                .key()
        };
        let id = "3f1e6c1a-8d3b-4f7e-9c55-0a1b2c3d4e5f";
        let cases = [
            (
                Method::POST,
                "/identity/v3/auth/tokens",
                "identity:POST /v3/auth/tokens",
            ),
            (Method::GET, "/identity/v3", "identity:GET /v3"),
            (
                Method::GET,
                "/compute/v2.1/servers/detail?limit=10",
                "compute:GET /servers/detail",
            ),
            (
                Method::POST,
                &format!("/compute/v2.1/servers/{id}/action"),
                "compute:POST /servers/{id}/action",
            ),
            (
                Method::GET,
                "/compute/v2.1/flavors/2",
                "compute:GET /flavors/{id}",
            ),
            (Method::GET, "/compute/v2.1/", "compute:GET /"),
            (
                Method::GET,
                "/network/v2.0/ports?device_id=x",
                "network:GET /ports",
            ),
            (
                Method::PUT,
                &format!("/network/v2.0/floatingips/{id}"),
                "network:PUT /floatingips/{id}",
            ),
            (Method::GET, "/network/", "network:GET /"),
            (
                Method::GET,
                "/volume/v3/0123456789abcdef0123456789abcdef/volumes/detail",
                "block-storage:GET /volumes/detail",
            ),
            (Method::GET, "/image/v2/images", "image:GET /images"),
            (
                Method::DELETE,
                &format!("/load-balancer/v2/lbaas/loadbalancers/{id}"),
                "load-balancer:DELETE /lbaas/loadbalancers/{id}",
            ),
            (Method::GET, "/elsewhere/x", "unknown:GET /elsewhere/x"),
        ];
        for (method, uri, want) in cases {
            assert_eq!(key(method, uri), want, "{uri}");
        }
    }

    #[test]
    fn injected_errors_speak_each_service_and_throttles_say_when_to_retry() {
        let p = OpenStackProtocol {
            keystone: Upstream::new("http://127.0.0.1:1").unwrap(),
        };
        let info = |service: &str| RequestInfo {
            service: service.to_owned(),
            action: "GET /".to_owned(),
        };
        let (status, _, body) = p
            .error_answer(&info("compute"), &FaultKind::Throttle)
            .unwrap();
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["overLimit"]["retryAfter"], "1");
        assert_eq!(
            p.error_headers(&info("compute"), &FaultKind::Throttle)[0].0,
            header::RETRY_AFTER
        );
        let (status, _, body) = p
            .error_answer(&info("network"), &FaultKind::ServerError { status: 503 })
            .unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("NeutronError"), "{body}");
        let (_, _, body) = p
            .error_answer(&info("identity"), &FaultKind::ServerError { status: 500 })
            .unwrap();
        assert!(body.contains("\"error\""), "{body}");
        assert!(p.error_answer(&info("compute"), &FaultKind::Drop).is_none());
        let routed = p.upstream(&info("identity"), &p.keystone) as *const Upstream;
        assert_eq!(routed, &p.keystone as *const Upstream);
    }
}
