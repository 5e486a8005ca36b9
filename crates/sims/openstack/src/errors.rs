//! Error answers in each service's own format, shared with the test proxy's injected faults:
//! Nova and Cinder wrap `{code, message}` in a fault name chosen by status (`itemNotFound`,
//! `badRequest`, `conflictingRequest`, `overLimit`, `computeFault`…), Neutron answers
//! `{"NeutronError": {type, message, detail}}`, Octavia (WSME) `{faultcode, faultstring,
//! debuginfo}`, Glance webob HTML pages, and Keystone `{"error": {code, message, title}}`.

use axum::response::{IntoResponse, Response};
use http::{header, HeaderValue, StatusCode};
use serde_json::json;

/// An OpenStack service, as the simulators and the proxy name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// Keystone.
    Identity,
    /// Nova.
    Compute,
    /// Neutron.
    Network,
    /// Cinder.
    BlockStorage,
    /// Glance.
    Image,
    /// Octavia.
    LoadBalancer,
}

impl Service {
    /// Every service.
    pub const ALL: [Service; 6] = [
        Service::Identity,
        Service::Compute,
        Service::Network,
        Service::BlockStorage,
        Service::Image,
        Service::LoadBalancer,
    ];

    /// The service type (`compute`, `network`, `block-storage`…), also the proxy's counter
    /// prefix.
    pub fn service_type(self) -> &'static str {
        match self {
            Service::Identity => "identity",
            Service::Compute => "compute",
            Service::Network => "network",
            Service::BlockStorage => "block-storage",
            Service::Image => "image",
            Service::LoadBalancer => "load-balancer",
        }
    }

    /// The URL path prefix the service is served under (`/compute`, `/volume`…).
    pub fn prefix(self) -> &'static str {
        match self {
            Service::Identity => "/identity",
            Service::Compute => "/compute",
            Service::Network => "/network",
            Service::BlockStorage => "/volume",
            Service::Image => "/image",
            Service::LoadBalancer => "/load-balancer",
        }
    }

    /// The service whose prefix starts `path`.
    pub fn from_path(path: &str) -> Option<Service> {
        Service::ALL.into_iter().find(|s| {
            path.strip_prefix(s.prefix())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    }
}

/// An error answer of one service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// Whose format to answer in.
    pub service: Service,
    /// HTTP status.
    pub status: StatusCode,
    /// Neutron's error `type` (e.g. `NetworkNotFound`); others ignore it.
    pub kind: &'static str,
    /// The message.
    pub message: String,
    /// `Retry-After` seconds (429/503).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error of `service` with `status` and `message`.
    pub fn new(service: Service, status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            service,
            status,
            kind: default_kind(status),
            message: message.into(),
            retry_after: None,
        }
    }

    /// 404.
    pub fn not_found(service: Service, message: impl Into<String>) -> ApiError {
        ApiError::new(service, StatusCode::NOT_FOUND, message)
    }

    /// 400.
    pub fn bad_request(service: Service, message: impl Into<String>) -> ApiError {
        ApiError::new(service, StatusCode::BAD_REQUEST, message)
    }

    /// 409.
    pub fn conflict(service: Service, message: impl Into<String>) -> ApiError {
        ApiError::new(service, StatusCode::CONFLICT, message)
    }

    /// Sets Neutron's error type.
    pub fn kind(mut self, kind: &'static str) -> ApiError {
        self.kind = kind;
        self
    }

    /// The content type and body of this error.
    pub fn body(&self) -> (&'static str, String) {
        error_body(
            self.service,
            self.status,
            self.kind,
            &self.message,
            self.retry_after,
        )
    }
}

fn default_kind(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "HTTPBadRequest",
        401 => "HTTPUnauthorized",
        403 => "HTTPForbidden",
        404 => "HTTPNotFound",
        409 => "HTTPConflict",
        429 => "HTTPTooManyRequests",
        503 => "HTTPServiceUnavailable",
        _ => "HTTPInternalServerError",
    }
}

/// Nova's and Cinder's fault name for a status (`nova/api/openstack/wsgi.py` naming).
fn fault_name(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "badRequest",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "itemNotFound",
        405 => "badMethod",
        409 => "conflictingRequest",
        413 | 429 => "overLimit",
        415 => "badMediaType",
        501 => "notImplemented",
        503 => "serviceUnavailable",
        _ => "computeFault",
    }
}

/// The content type and body of an error of `service` (also used by the proxy's injected
/// faults). `kind` is Neutron's error type.
pub fn error_body(
    service: Service,
    status: StatusCode,
    kind: &str,
    message: &str,
    retry_after: Option<u64>,
) -> (&'static str, String) {
    let code = status.as_u16();
    let title = status.canonical_reason().unwrap_or("Error");
    match service {
        Service::Identity => (
            "application/json",
            json!({"error": {"code": code, "message": message, "title": title}}).to_string(),
        ),
        Service::Compute | Service::BlockStorage => {
            let mut fault = json!({"code": code, "message": message});
            if let Some(after) = retry_after.filter(|_| code == 429 || code == 413) {
                fault["retryAfter"] = json!(after.to_string());
            }
            (
                "application/json",
                json!({ fault_name(status): fault }).to_string(),
            )
        }
        Service::Network => (
            "application/json",
            json!({"NeutronError": {"type": kind, "message": message, "detail": ""}}).to_string(),
        ),
        Service::LoadBalancer => (
            "application/json",
            json!({
                "faultcode": if code >= 500 { "Server" } else { "Client" },
                "faultstring": message,
                "debuginfo": null,
            })
            .to_string(),
        ),
        Service::Image => (
            "text/html; charset=UTF-8",
            format!(
                "<html>\n <head>\n  <title>{code} {title}</title>\n </head>\n <body>\n  <h1>{code} {title}</h1>\n  {message}<br /><br />\n\n\n\n </body>\n</html>"
            ),
        ),
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (content_type, body) = self.body();
        let mut response = (self.status, body).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(after) = self.retry_after {
            if let Ok(value) = HeaderValue::from_str(&after.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(service: Service, status: u16) -> serde_json::Value {
        let (_, body) = error_body(
            service,
            StatusCode::from_u16(status).unwrap(),
            "NetworkNotFound",
            "nope",
            Some(7),
        );
        serde_json::from_str(&body).unwrap()
    }

    #[test]
    fn each_service_speaks_its_own_error_format() {
        assert_eq!(parsed(Service::Compute, 404)["itemNotFound"]["code"], 404);
        assert_eq!(
            parsed(Service::Compute, 409)["conflictingRequest"]["message"],
            "nope"
        );
        assert_eq!(
            parsed(Service::Compute, 429)["overLimit"]["retryAfter"],
            "7"
        );
        assert_eq!(
            parsed(Service::BlockStorage, 503)["serviceUnavailable"]["code"],
            503
        );
        assert_eq!(parsed(Service::Compute, 500)["computeFault"]["code"], 500);
        assert_eq!(
            parsed(Service::Network, 404)["NeutronError"]["type"],
            "NetworkNotFound"
        );
        assert_eq!(parsed(Service::LoadBalancer, 503)["faultcode"], "Server");
        assert_eq!(parsed(Service::LoadBalancer, 404)["faultstring"], "nope");
        assert_eq!(
            parsed(Service::Identity, 401)["error"]["title"],
            "Unauthorized"
        );
        let (ct, html) = error_body(Service::Image, StatusCode::NOT_FOUND, "", "No image", None);
        assert!(
            ct.starts_with("text/html") && html.contains("404 Not Found"),
            "{html}"
        );
    }

    #[test]
    fn services_are_found_by_path_prefix() {
        assert_eq!(
            Service::from_path("/compute/v2.1/servers"),
            Some(Service::Compute)
        );
        assert_eq!(
            Service::from_path("/volume/v3/abc/volumes"),
            Some(Service::BlockStorage)
        );
        assert_eq!(Service::from_path("/identity"), Some(Service::Identity));
        assert_eq!(Service::from_path("/computer"), None);
        assert_eq!(Service::from_path("/"), None);
    }
}
