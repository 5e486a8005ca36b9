//! A loopback stand-in for the few OpenStack read calls a takeover plan makes (`tofu plan
//! -refresh=false` refreshes nothing, but data sources are read): a Keystone token with a
//! catalog, Nova's availability zones and keypairs, Neutron's networks, subnets and security
//! groups, Glance's images — fixed answers, bound to 127.0.0.1, every request logged.

use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

/// The external network's ID.
pub const EXTERNAL_NETWORK_ID: &str = "0f3c1d52-6a0e-4e57-9c1b-2f4e7d0a9b11";
/// The cluster's internal network's ID.
pub const INTERNAL_NETWORK_ID: &str = "6a1b2c3d-0000-4000-8000-000000000001";
/// The internal subnet's ID.
pub const INTERNAL_SUBNET_ID: &str = "5d2e0b8a-1c3f-4a6d-8e9b-7f0a1b2c3d44";
/// Every security group's ID.
pub const SECURITY_GROUP_ID: &str = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c66";
/// Every image's ID.
pub const IMAGE_ID: &str = "c4d5e6f7-a8b9-4c0d-9e1f-2a3b4c5d6e77";

/// The running stand-in.
pub struct OpenStackApi {
    /// `http://127.0.0.1:<port>/v3`, the `authURL` to configure.
    pub auth_url: String,
    /// `METHOD path?query` of every request, in order.
    pub requests: Arc<Mutex<Vec<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for OpenStackApi {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Starts the stand-in on a free loopback port.
pub async fn start() -> OpenStackApi {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .fallback(answer)
        .with_state((base.clone(), requests.clone()));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    OpenStackApi {
        auth_url: format!("{base}/v3"),
        requests,
        server,
    }
}

type Shared = (String, Arc<Mutex<Vec<String>>>);

async fn answer(State((base, log)): State<Shared>, request: Request) -> Response {
    let method = request.method().clone();
    let uri = request.uri().clone();
    log.lock().unwrap().push(format!("{method} {uri}"));
    let path = uri.path();
    let query: Vec<(String, String)> = uri.query().map(url_pairs).unwrap_or_default();
    let param = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    if method == "POST" && path.ends_with("/auth/tokens") {
        let mut headers = HeaderMap::new();
        headers.insert("X-Subject-Token", HeaderValue::from_static("stratus-token"));
        return (StatusCode::CREATED, headers, Json(token(&base))).into_response();
    }
    let body = if path.ends_with("/os-availability-zone") {
        let zones: Vec<Value> = ["nova", "zone-b"]
            .iter()
            .map(|z| json!({"zoneName": z, "zoneState": {"available": true}, "hosts": null}))
            .collect();
        json!({ "availabilityZoneInfo": zones })
    } else if path.ends_with("/v2.0/networks") {
        let networks: Vec<Value> = [("public", EXTERNAL_NETWORK_ID), ("c1", INTERNAL_NETWORK_ID)]
            .iter()
            .filter(|(name, id)| {
                param("name").is_none_or(|n| n == *name) && param("id").is_none_or(|i| i == *id)
            })
            .map(|(name, id)| {
                json!({"id": id, "name": name, "router:external": (*name == "public"),
                "admin_state_up": true, "status": "ACTIVE", "subnets": [], "tenant_id": "p",
                "project_id": "p", "shared": false, "tags": [], "mtu": 1500})
            })
            .collect();
        json!({ "networks": networks })
    } else if path.ends_with("/v2.0/subnets") {
        json!({"subnets": [{"id": INTERNAL_SUBNET_ID, "name": "c1", "network_id": INTERNAL_NETWORK_ID,
            "cidr": "192.168.199.0/24", "ip_version": 4, "gateway_ip": "192.168.199.1",
            "enable_dhcp": true, "allocation_pools": [], "dns_nameservers": [], "host_routes": [],
            "tags": [], "tenant_id": "p", "project_id": "p"}]})
    } else if path.ends_with("/v2.0/security-groups") {
        json!({"security_groups": [{"id": SECURITY_GROUP_ID, "name": param("name").unwrap_or_default(),
            "description": "", "tenant_id": "p", "project_id": "p", "security_group_rules": [], "tags": []}]})
    } else if path.contains("/v2/images") {
        json!({"images": [{"id": IMAGE_ID, "name": param("name").unwrap_or_default(), "status": "active",
            "visibility": "public", "created_at": "2024-01-01T00:00:00Z", "updated_at": "2024-01-01T00:00:00Z",
            "tags": [], "min_disk": 0, "min_ram": 0, "size": 1, "container_format": "bare",
            "disk_format": "qcow2", "protected": false}]})
    } else if let Some(name) = path.split("/os-keypairs/").nth(1) {
        json!({"keypair": {"name": name, "public_key": "ssh-ed25519 AAAA", "fingerprint": "f"}})
    } else {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": format!("not served: {path}")})),
        )
            .into_response();
    };
    Json(body).into_response()
}

/// A Keystone v3 token whose catalog points every service at this stand-in.
fn token(base: &str) -> Value {
    let services = [
        ("compute", "/compute/v2.1"),
        ("network", "/network"),
        ("image", "/image"),
        ("volumev3", "/volume/v3"),
        ("identity", "/v3"),
    ];
    let catalog: Vec<Value> = services
        .iter()
        .map(|(kind, path)| {
            let endpoints: Vec<Value> = ["public", "internal", "admin"]
                .iter()
                .map(|i| {
                    json!({"interface": i, "region": "RegionOne", "region_id": "RegionOne",
                    "url": format!("{base}{path}")})
                })
                .collect();
            json!({"type": kind, "name": kind, "endpoints": endpoints})
        })
        .collect();
    let domain = json!({"id": "default", "name": "Default"});
    json!({"token": {"expires_at": "2099-01-01T00:00:00.000000Z", "catalog": catalog,
        "methods": ["password"], "roles": [],
        "user": {"id": "u", "name": "deckhouse", "domain": domain},
        "project": {"id": "p", "name": "tenant-a", "domain": domain}}})
}

/// `a=b&c=d` with `%XX` escapes decoded.
fn url_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (unescape(k), unescape(v)))
        .collect()
}

fn unescape(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
