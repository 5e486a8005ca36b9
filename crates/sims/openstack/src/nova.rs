//! Nova (compute v2.1, microversions 2.1–2.96): servers (list, detail with filters and
//! paging, create BUILD → ACTIVE, get, update, delete, os-stop/os-start/reboot actions,
//! os-interface, os-volume_attachments in [`crate::nova_volumes`]), flavors, availability zones and server groups. Addresses are read from
//! Neutron's ports and floating IPs, so associations show at once.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::{header, HeaderValue, StatusCode};
use hyper::body::Bytes;
use serde_json::{json, Map, Value};
use tokio::time::Instant;

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::microversion::{self, Version, VersionError};
use crate::model::{
    self, Change, ModelError, NetworkRequest, NewServer, Server, ServerGroup, ServerStatus,
    State as Model,
};
use crate::paging;
use crate::util::{first, iso_micro, iso_z, new_id, parse_time, values};
use crate::{json_answer, json_body, Origin, Query, Sim, MAX_LIMIT};

/// The lowest microversion served.
pub const MIN_VERSION: Version = Version::new(2, 1);
/// The highest microversion served.
pub const MAX_VERSION: Version = Version::new(2, 96);
const BASE: &str = "/compute/v2.1";

pub(crate) fn err(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::new(Service::Compute, status, message)
}

fn model_err(e: ModelError) -> ApiError {
    match e {
        ModelError::NotFound(kind, id) => err(
            StatusCode::BAD_REQUEST,
            format!("{kind} {id} could not be found."),
        ),
        ModelError::Invalid(m) => err(StatusCode::BAD_REQUEST, m),
        ModelError::Conflict(m) => err(StatusCode::CONFLICT, m),
    }
}

fn version_doc(origin: &str) -> Value {
    json!({
        "id": "v2.1", "status": "CURRENT", "version": MAX_VERSION.to_string(),
        "min_version": MIN_VERSION.to_string(), "updated": "2013-07-23T11:33:21Z",
        "links": [{"rel": "self", "href": format!("{origin}{BASE}/")},
                  {"rel": "describedby", "type": "text/html", "href": "https://docs.openstack.org/"}],
        "media-types": [{"base": "application/json",
                         "type": "application/vnd.openstack.compute+json;version=2.1"}],
    })
}

/// The unauthenticated version documents.
pub(crate) fn discovery() -> Router<Arc<Sim>> {
    async fn versions(Origin(origin): Origin) -> Response {
        json_answer(StatusCode::OK, json!({"versions": [version_doc(&origin)]}))
    }
    async fn version(Origin(origin): Origin) -> Response {
        json_answer(StatusCode::OK, json!({"version": version_doc(&origin)}))
    }
    Router::new()
        .route("/compute", get(versions))
        .route("/compute/", get(versions))
        .route(BASE, get(version))
        .route("/compute/v2.1/", get(version))
}

/// The API routes (token checked by the caller's layer).
pub(crate) fn routes() -> Router<Arc<Sim>> {
    Router::new()
        .route(
            &format!("{BASE}/servers"),
            get(list_servers).post(create_server),
        )
        .route(&format!("{BASE}/servers/detail"), get(list_servers_detail))
        // Boot from volume: the same request (with `block_device_mapping_v2`) under the older
        // `os-volumes_boot` path gophercloud's bootfromvolume posts to.
        .route(
            &format!("{BASE}/os-volumes_boot"),
            axum::routing::post(create_server),
        )
        // The deprecated image proxy (gone from 2.36 on): Glance's images in Nova's shape.
        .route(&format!("{BASE}/images/detail"), get(list_images_detail))
        .route(
            &format!("{BASE}/servers/{{id}}"),
            get(show_server).put(update_server).delete(delete_server),
        )
        .route(
            &format!("{BASE}/servers/{{id}}/action"),
            axum::routing::post(server_action),
        )
        .route(
            &format!("{BASE}/servers/{{id}}/os-interface"),
            get(list_interfaces),
        )
        .route(&format!("{BASE}/flavors"), get(list_flavors))
        .route(&format!("{BASE}/flavors/detail"), get(list_flavors_detail))
        .route(&format!("{BASE}/flavors/{{id}}"), get(show_flavor))
        .route(
            &format!("{BASE}/os-availability-zone"),
            get(availability_zones),
        )
        .route(
            &format!("{BASE}/os-availability-zone/detail"),
            get(availability_zones),
        )
        .route(
            &format!("{BASE}/os-server-groups"),
            get(list_server_groups).post(create_server_group),
        )
        .route(
            &format!("{BASE}/os-server-groups/{{id}}"),
            get(show_server_group).delete(delete_server_group),
        )
        .merge(crate::nova_volumes::routes())
        .route_layer(middleware::from_fn(with_microversion))
}

/// Reads the requested microversion (400/406 when bad), hands it to the handler and echoes it
/// in the answer's headers.
async fn with_microversion(mut request: Request, next: Next) -> Response {
    let version = match microversion::requested(
        request.headers(),
        "compute",
        Some("x-openstack-nova-api-version"),
        MIN_VERSION,
        MAX_VERSION,
    ) {
        Ok(v) => v,
        Err(e @ VersionError::Malformed(_)) => {
            return err(StatusCode::BAD_REQUEST, e.to_string()).into_response()
        }
        Err(e) => return err(StatusCode::NOT_ACCEPTABLE, e.to_string()).into_response(),
    };
    request.extensions_mut().insert(version);
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&format!("compute {version}")) {
        headers.insert("openstack-api-version", v);
    }
    if let Ok(v) = HeaderValue::from_str(&version.to_string()) {
        headers.insert("x-openstack-nova-api-version", v);
    }
    headers.insert(
        header::VARY,
        HeaderValue::from_static("OpenStack-API-Version, X-OpenStack-Nova-API-Version"),
    );
    response
}

/// Ports by device id and floating IPs by port id, built once per request.
struct Index<'a> {
    ports: HashMap<&'a str, Vec<&'a Value>>,
    fips: HashMap<&'a str, Vec<&'a Value>>,
}

impl<'a> Index<'a> {
    fn new(state: &'a Model) -> Index<'a> {
        let mut ports: HashMap<&str, Vec<&Value>> = HashMap::new();
        for port in state.neutron.ports.values() {
            if let Some(device) = port["device_id"].as_str().filter(|d| !d.is_empty()) {
                ports.entry(device).or_default().push(port);
            }
        }
        let mut fips: HashMap<&str, Vec<&Value>> = HashMap::new();
        for fip in state.neutron.floatingips.values() {
            if let Some(port) = fip["port_id"].as_str() {
                fips.entry(port).or_default().push(fip);
            }
        }
        Index { ports, fips }
    }

    /// `addresses`: per network name, the fixed IPs, then the floating IPs on those ports.
    fn addresses(&self, state: &Model, server_id: &str) -> Map<String, Value> {
        let mut out = Map::new();
        let mut ports = self.ports.get(server_id).cloned().unwrap_or_default();
        ports.retain(|p| model::is_compute_owner(&p["device_owner"]));
        ports.sort_by_key(|p| p["created_at"].as_str().unwrap_or_default().to_owned());
        for port in ports {
            let network = port["network_id"].as_str().unwrap_or_default();
            let name = state
                .neutron
                .networks
                .get(network)
                .and_then(|n| n["name"].as_str())
                .unwrap_or(network)
                .to_owned();
            let mac = port["mac_address"].clone();
            let list = out.entry(name).or_insert_with(|| json!([]));
            let Some(list) = list.as_array_mut() else {
                continue;
            };
            for ip in port["fixed_ips"].as_array().into_iter().flatten() {
                let addr = ip["ip_address"].as_str().unwrap_or_default();
                list.push(json!({
                    "version": if addr.contains(':') { 6 } else { 4 }, "addr": addr,
                    "OS-EXT-IPS:type": "fixed", "OS-EXT-IPS-MAC:mac_addr": mac,
                }));
            }
            let port_id = port["id"].as_str().unwrap_or_default();
            for fip in self.fips.get(port_id).into_iter().flatten() {
                list.push(json!({
                    "version": 4, "addr": fip["floating_ip_address"],
                    "OS-EXT-IPS:type": "floating", "OS-EXT-IPS-MAC:mac_addr": mac,
                }));
            }
        }
        out
    }
}

fn links(origin: &str, kind: &str, id: &str) -> Value {
    json!([
        {"rel": "self", "href": format!("{origin}{BASE}/{kind}/{id}")},
        {"rel": "bookmark", "href": format!("{origin}/compute/{kind}/{id}")},
    ])
}

/// A server's detailed representation at `version`.
fn render_server(
    state: &Model,
    index: &Index,
    server: &Server,
    deleted_at: Option<i64>,
    version: Version,
    origin: &str,
    caller: &Caller,
) -> Value {
    let flavor = match state.flavor(&server.flavor_id) {
        Some(f) if version.at_least(2, 47) => json!({
            "original_name": f.name, "vcpus": f.vcpus, "ram": f.ram, "disk": f.disk,
            "ephemeral": f.ephemeral, "swap": 0, "extra_specs": f.extra_specs,
        }),
        _ => json!({"id": server.flavor_id,
                    "links": [{"rel": "bookmark", "href": format!("{origin}/compute/flavors/{}", server.flavor_id)}]}),
    };
    let image = match &server.image_id {
        Some(id) => {
            json!({"id": id, "links": [{"rel": "bookmark", "href": format!("{origin}/compute/images/{id}")}]})
        }
        None => json!(""),
    };
    let (status, vm_state, task_state, power_state) = match deleted_at {
        Some(_) => ("DELETED", "deleted", Value::Null, 0),
        None => (
            server.status.as_str(),
            server.status.vm_state(),
            server.task_state.map_or(Value::Null, |t| json!(t)),
            server.status.power_state(),
        ),
    };
    let addresses = if deleted_at.is_some() {
        Map::new()
    } else {
        index.addresses(state, &server.id)
    };
    let mut out = json!({
        "id": server.id, "name": server.name, "status": status, "tenant_id": server.project_id,
        "user_id": server.user_id, "metadata": server.metadata, "hostId": server.host_id,
        "image": image, "flavor": flavor, "created": iso_z(server.created),
        "updated": iso_z(deleted_at.unwrap_or(server.updated)), "addresses": addresses,
        "accessIPv4": "", "accessIPv6": "", "links": links(origin, "servers", &server.id),
        "OS-DCF:diskConfig": "MANUAL", "progress": 0,
        "OS-EXT-AZ:availability_zone": server.az, "config_drive": "",
        "key_name": server.key_name, "OS-SRV-USG:launched_at": server.launched_at.map(iso_micro),
        "OS-SRV-USG:terminated_at": deleted_at.map(iso_micro), "OS-EXT-STS:task_state": task_state,
        "OS-EXT-STS:vm_state": vm_state, "OS-EXT-STS:power_state": power_state,
        "os-extended-volumes:volumes_attached": crate::nova_volumes::volumes_attached(state, &server.id, version),
        "security_groups": server.security_groups.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
    });
    let extra = |out: &mut Value, key: &str, value: Value| {
        out[key] = value;
    };
    if caller.is_admin {
        extra(&mut out, "OS-EXT-SRV-ATTR:host", json!("stratus-compute-1"));
        extra(
            &mut out,
            "OS-EXT-SRV-ATTR:hypervisor_hostname",
            json!("stratus-compute-1"),
        );
        extra(
            &mut out,
            "OS-EXT-SRV-ATTR:instance_name",
            json!(format!("instance-{:08x}", server.seq)),
        );
    }
    if version.at_least(2, 9) {
        extra(&mut out, "locked", json!(false));
    }
    if version.at_least(2, 19) {
        extra(&mut out, "description", json!(server.description));
    }
    if version.at_least(2, 26) {
        extra(&mut out, "tags", json!(server.tags));
    }
    if version.at_least(2, 63) {
        extra(&mut out, "trusted_image_certificates", Value::Null);
    }
    if version.at_least(2, 73) {
        extra(&mut out, "locked_reason", Value::Null);
    }
    out
}

pub(crate) fn visible(server: &Server, caller: &Caller, all_tenants: bool) -> bool {
    server.project_id == caller.project_id || (caller.is_admin && all_tenants)
}

fn truthy(value: Option<&str>) -> bool {
    value.is_some_and(|v| {
        !matches!(
            v.to_ascii_lowercase().as_str(),
            "0" | "false" | "off" | "no" | ""
        )
    }) || value == Some("")
}

/// A regex as Nova applies it to names and IPs (a search); a bad pattern matches literally.
fn matcher(pattern: &str) -> regex::Regex {
    regex::Regex::new(pattern)
        .unwrap_or_else(|_| regex::Regex::new(&regex::escape(pattern)).expect("escaped pattern"))
}

/// The servers a list answers, newest first, each with its deletion time if a tombstone.
fn select_servers<'a>(
    state: &'a Model,
    index: &Index,
    caller: &Caller,
    query: &[(String, String)],
) -> Result<Vec<(&'a Server, Option<i64>)>, ApiError> {
    let all_tenants = truthy(first(query, "all_tenants")) || truthy(first(query, "all_projects"));
    let statuses: Vec<String> = values(query, "status")
        .iter()
        .map(|s| s.to_ascii_uppercase())
        .collect();
    let changes_since = match first(query, "changes-since") {
        Some(t) => Some(parse_time(t).ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                format!("Invalid input for field/attribute changes-since. Value: {t}"),
            )
        })?),
        None => None,
    };
    let deleted_only = caller.is_admin && truthy(first(query, "deleted"));
    let name = first(query, "name").map(matcher);
    let ip = first(query, "ip").map(matcher);
    let ip6 = first(query, "ip6").map(matcher);
    let flavor = first(query, "flavor");
    let image = first(query, "image");
    let zone = first(query, "availability_zone");
    let key_name = first(query, "key_name");
    let tag_list = |key: &str| -> Vec<String> {
        first(query, key)
            .map(|t| {
                t.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let (tags, tags_any, not_tags, not_tags_any) = (
        tag_list("tags"),
        tag_list("tags-any"),
        tag_list("not-tags"),
        tag_list("not-tags-any"),
    );

    let mut candidates: Vec<(&Server, Option<i64>)> = Vec::new();
    if !deleted_only {
        candidates.extend(state.servers.values().map(|s| (s, None)));
    }
    if deleted_only || changes_since.is_some() || statuses.iter().any(|s| s == "DELETED") {
        candidates.extend(
            state
                .tombstones
                .iter()
                .map(|t| (&t.server, Some(t.deleted_at))),
        );
    }
    let mut out: Vec<(&Server, Option<i64>)> = candidates
        .into_iter()
        .filter(|(s, deleted)| {
            if !visible(s, caller, all_tenants) {
                return false;
            }
            let status = if deleted.is_some() {
                "DELETED"
            } else {
                s.status.as_str()
            };
            if !statuses.is_empty() && !statuses.iter().any(|w| w == status) {
                return false;
            }
            if let Some(since) = changes_since {
                if deleted.unwrap_or(s.updated) < since {
                    return false;
                }
            } else if deleted.is_some() && !deleted_only && !statuses.iter().any(|w| w == "DELETED")
            {
                return false;
            }
            if name.as_ref().is_some_and(|re| !re.is_match(&s.name))
                || flavor.is_some_and(|f| f != s.flavor_id)
                || image.is_some_and(|i| s.image_id.as_deref() != Some(i))
                || zone.is_some_and(|z| z != s.az)
                || key_name.is_some_and(|k| s.key_name.as_deref() != Some(k))
                || !tags.iter().all(|t| s.tags.contains(t))
                || (!tags_any.is_empty() && !tags_any.iter().any(|t| s.tags.contains(t)))
                || (!not_tags.is_empty() && not_tags.iter().all(|t| s.tags.contains(t)))
                || not_tags_any.iter().any(|t| s.tags.contains(t))
            {
                return false;
            }
            if ip.is_some() || ip6.is_some() {
                let addresses = index.addresses(state, &s.id);
                let addrs: Vec<&str> = addresses
                    .values()
                    .flat_map(|list| list.as_array().into_iter().flatten())
                    .filter_map(|a| a["addr"].as_str())
                    .collect();
                let hit = |re: &Option<regex::Regex>, v6: bool| {
                    re.as_ref().is_none_or(|re| {
                        addrs
                            .iter()
                            .any(|a| a.contains(':') == v6 && re.is_match(a))
                    })
                };
                if !hit(&ip, false) || !hit(&ip6, true) {
                    return false;
                }
            }
            true
        })
        .collect();
    out.sort_by_key(|(s, _)| std::cmp::Reverse(s.seq));
    Ok(out)
}

async fn list(
    sim: &Sim,
    caller: &Caller,
    version: Version,
    origin: &str,
    query: &[(String, String)],
    detail: bool,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let index = Index::new(&state);
    let selected = select_servers(&state, &index, caller, query)?;
    let ids: Vec<&str> = selected.iter().map(|(s, _)| s.id.as_str()).collect();
    let page = paging::page(
        &ids,
        first(query, "limit"),
        first(query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| err(StatusCode::BAD_REQUEST, e.to_string()))?;
    let servers: Vec<Value> = selected[page.start..page.end]
        .iter()
        .map(|(s, deleted)| {
            if detail {
                render_server(&state, &index, s, *deleted, version, origin, caller)
            } else {
                json!({"id": s.id, "name": s.name, "links": links(origin, "servers", &s.id)})
            }
        })
        .collect();
    let mut body = json!({ "servers": servers });
    if let Some(marker) = page.next_marker {
        let path = if detail { "servers/detail" } else { "servers" };
        let limit = page.end - page.start;
        body["servers_links"] = json!([{"rel": "next",
            "href": format!("{origin}{BASE}/{path}?{}", paging::next_query(query, limit, &marker))}]);
    }
    Ok(json_answer(StatusCode::OK, body))
}

async fn list_servers(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    list(&sim, &caller, version, &origin, &query, false).await
}

async fn list_servers_detail(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    list(&sim, &caller, version, &origin, &query, true).await
}

pub(crate) fn not_found(id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("Instance {id} could not be found."),
    )
}

async fn show_server(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let server = state
        .servers
        .get(&id)
        .filter(|s| visible(s, &caller, true))
        .ok_or_else(|| not_found(&id))?;
    let index = Index::new(&state);
    let body = render_server(&state, &index, server, None, version, &origin, &caller);
    Ok(json_answer(StatusCode::OK, json!({ "server": body })))
}

/// Reads a `flavorRef`/`imageRef`, which may be an id or a link ending in one.
fn reference(value: &Value) -> Option<String> {
    let text = value.as_str()?.trim();
    let id = text.rsplit('/').next().unwrap_or(text);
    (!id.is_empty()).then(|| id.to_owned())
}

/// Turns a create request into the servers to make (`max_count` of them).
fn plan_create(
    state: &Model,
    caller: &Caller,
    version: Version,
    body: &Value,
) -> Result<Vec<NewServer>, ApiError> {
    let bad = |m: String| err(StatusCode::BAD_REQUEST, m);
    let server = body
        .get("server")
        .filter(|s| s.is_object())
        .ok_or_else(|| bad("Invalid input for field/attribute server. Value: missing".into()))?;
    let name = server["name"]
        .as_str()
        .filter(|n| !n.trim().is_empty() && n.len() <= 255)
        .ok_or_else(|| bad("Invalid input for field/attribute name.".into()))?;
    let flavor_id = reference(&server["flavorRef"])
        .ok_or_else(|| bad("Invalid input for field/attribute flavorRef.".into()))?;
    if state.flavor(&flavor_id).is_none() {
        return Err(bad(format!("Flavor {flavor_id} could not be found.")));
    }
    let image_id = match reference(&server["imageRef"]) {
        None => None,
        Some(id) if state.images.contains_key(&id) => Some(id),
        Some(_) => return Err(bad("Can not find requested image".into())),
    };
    if image_id.is_none()
        && server["block_device_mapping_v2"]
            .as_array()
            .is_none_or(|b| b.is_empty())
    {
        return Err(bad("Can not find requested image".into()));
    }
    let az = match server["availability_zone"].as_str() {
        None | Some("") => state.zones[0].clone(),
        Some(z) if state.zones.iter().any(|known| known == z) => z.to_owned(),
        Some(z) => {
            return Err(bad(format!(
                "The requested availability zone is not available: {z}"
            )))
        }
    };
    let networks = match &server["networks"] {
        Value::Null if version.at_least(2, 37) => {
            return Err(bad(
                "Invalid input for field/attribute networks: required since 2.37".into(),
            ))
        }
        Value::Null => auto_network(state, caller)?,
        Value::String(s) if s == "auto" => auto_network(state, caller)?,
        Value::String(s) if s == "none" => Vec::new(),
        Value::Array(list) => list
            .iter()
            .map(|n| {
                if let Some(port) = n["port"].as_str() {
                    if !state.neutron.ports.contains_key(port) {
                        return Err(bad(format!("Port id {port} could not be found.")));
                    }
                    return Ok(NetworkRequest::Port(port.to_owned()));
                }
                let id = n["uuid"].as_str().ok_or_else(|| {
                    bad("Bad networks format: network uuid is not in proper format".into())
                })?;
                if !state.neutron.networks.contains_key(id) {
                    return Err(bad(format!("Network {id} could not be found.")));
                }
                Ok(NetworkRequest::Network {
                    id: id.to_owned(),
                    fixed_ip: n["fixed_ip"].as_str().map(str::to_owned),
                })
            })
            .collect::<Result<_, _>>()?,
        other => {
            return Err(bad(format!(
                "Invalid input for field/attribute networks. Value: {other}"
            )))
        }
    };
    let security_groups: Vec<String> = match server["security_groups"].as_array() {
        None => vec!["default".to_owned()],
        Some(list) => list
            .iter()
            .map(|g| {
                let name = g["name"].as_str().unwrap_or_default();
                let known = state.neutron.security_groups.values().any(|sg| {
                    (sg["name"] == name || sg["id"] == name)
                        && (sg["project_id"] == caller.project_id.as_str() || name == "default")
                });
                if known {
                    Ok(name.to_owned())
                } else {
                    Err(bad(format!(
                        "Security group {name} not found for project {}.",
                        caller.project_id
                    )))
                }
            })
            .collect::<Result<_, _>>()?,
    };
    let count = server["max_count"]
        .as_u64()
        .or_else(|| server["min_count"].as_u64())
        .unwrap_or(1);
    if !(1..=1000).contains(&count) {
        return Err(bad(format!(
            "Invalid input for field/attribute max_count. Value: {count}"
        )));
    }
    let tags: Vec<String> = server["tags"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok((1..=count)
        .map(|n| NewServer {
            name: if count > 1 {
                format!("{name}-{n}")
            } else {
                name.to_owned()
            },
            project_id: caller.project_id.clone(),
            user_id: caller.user_id.clone(),
            flavor_id: flavor_id.clone(),
            image_id: image_id.clone(),
            az: az.clone(),
            networks: networks.clone(),
            metadata: server["metadata"].as_object().cloned().unwrap_or_default(),
            tags: tags.clone(),
            key_name: server["key_name"].as_str().map(str::to_owned),
            security_groups: security_groups.clone(),
            description: server["description"].as_str().map(str::to_owned),
            status: None,
        })
        .collect())
}

/// `networks: auto`: the project's only tenant network.
fn auto_network(state: &Model, caller: &Caller) -> Result<Vec<NetworkRequest>, ApiError> {
    let tenant: Vec<&String> = state
        .neutron
        .networks
        .iter()
        .filter(|(_, n)| {
            n["router:external"] != true && n["project_id"] == caller.project_id.as_str()
        })
        .map(|(id, _)| id)
        .collect();
    match tenant.as_slice() {
        [one] => Ok(vec![NetworkRequest::Network {
            id: (*one).clone(),
            fixed_ip: None,
        }]),
        [] => Err(err(
            StatusCode::BAD_REQUEST,
            "Unable to automatically allocate a network for project",
        )),
        _ => Err(err(
            StatusCode::CONFLICT,
            "Multiple possible networks found, use a Network ID to be more specific.",
        )),
    }
}

async fn create_server(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Compute, &body)?;
    let mut state = sim.state();
    let specs = plan_create(&state, &caller, version, &body)?;
    let group = body["os:scheduler_hints"]["group"]
        .as_str()
        .map(str::to_owned);
    if let Some(g) = &group {
        if !state.server_groups.contains_key(g) {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("Invalid server group {g}"),
            ));
        }
    }
    let now = Instant::now();
    let mut first_server = None;
    for spec in specs {
        let server = state.create_server(spec, now).map_err(model_err)?;
        if let Some(g) = group.as_ref().and_then(|g| state.server_groups.get_mut(g)) {
            g.members.push(server.id.clone());
        }
        first_server.get_or_insert(server);
    }
    let server = first_server.expect("at least one server");
    let answer = json!({"server": {
        "id": server.id, "links": links(&origin, "servers", &server.id),
        "OS-DCF:diskConfig": "MANUAL",
        "security_groups": server.security_groups.iter().map(|n| json!({"name": n})).collect::<Vec<_>>(),
        "adminPass": &new_id()[..12],
    }});
    let mut response = json_answer(StatusCode::ACCEPTED, answer);
    if let Ok(location) = HeaderValue::from_str(&format!("{origin}{BASE}/servers/{}", server.id)) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

async fn update_server(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Compute, &body)?;
    let mut state = sim.state();
    let server = state
        .servers
        .get_mut(&id)
        .filter(|s| visible(s, &caller, true))
        .ok_or_else(|| not_found(&id))?;
    if let Some(name) = body["server"]["name"].as_str() {
        server.name = name.to_owned();
    }
    if let Some(description) = body["server"]["description"].as_str() {
        server.description = Some(description.to_owned());
    }
    server.updated = crate::util::now_secs();
    let server = server.clone();
    let index = Index::new(&state);
    let body = render_server(&state, &index, &server, None, version, &origin, &caller);
    Ok(json_answer(StatusCode::OK, json!({ "server": body })))
}

async fn delete_server(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let server = state
        .servers
        .get_mut(&id)
        .filter(|s| visible(s, &caller, true))
        .ok_or_else(|| not_found(&id))?;
    server.task_state = Some("deleting");
    let delay = state.knobs.delete_delay;
    if delay.is_zero() && !state.knobs.stall {
        state.remove_server(&id);
    } else {
        state.schedule(&id, Change::ServerGone, Instant::now(), delay);
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// What an action does to a server in `status` with `task_state`: the task state while it runs
/// and the status it ends in, or Nova's 409 message.
pub fn plan_action(
    id: &str,
    status: ServerStatus,
    task_state: Option<&str>,
    action: &str,
) -> Result<(&'static str, ServerStatus), String> {
    let verb = match action {
        "os-stop" => "stop",
        "os-start" => "start",
        _ => "reboot",
    };
    if let Some(task) = task_state {
        return Err(format!(
            "Cannot '{verb}' instance {id} while it is in task_state {task}"
        ));
    }
    let allowed = match action {
        "os-stop" => matches!(status, ServerStatus::Active | ServerStatus::Error),
        "os-start" => status == ServerStatus::Shutoff,
        _ => matches!(
            status,
            ServerStatus::Active | ServerStatus::Shutoff | ServerStatus::Error
        ),
    };
    if !allowed {
        return Err(format!(
            "Cannot '{verb}' instance {id} while it is in vm_state {}",
            status.vm_state()
        ));
    }
    Ok(match action {
        "os-stop" => ("powering-off", ServerStatus::Shutoff),
        "os-start" => ("powering-on", ServerStatus::Active),
        _ => ("rebooting", ServerStatus::Active),
    })
}

async fn server_action(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Compute, &body)?;
    let action = body
        .as_object()
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_default();
    if !matches!(action.as_str(), "os-stop" | "os-start" | "reboot") {
        return Err(err(
            StatusCode::BAD_REQUEST,
            format!("There is no such action: {action}"),
        ));
    }
    let mut state = sim.state();
    let delay = state.knobs.action_delay;
    let server = state
        .servers
        .get_mut(&id)
        .filter(|s| visible(s, &caller, true))
        .ok_or_else(|| not_found(&id))?;
    let (task, to) = plan_action(&id, server.status, server.task_state, &action)
        .map_err(|m| err(StatusCode::CONFLICT, m))?;
    server.task_state = Some(task);
    server.updated = crate::util::now_secs();
    state.schedule(&id, Change::Server(to), Instant::now(), delay);
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn list_interfaces(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    state
        .servers
        .get(&id)
        .filter(|s| visible(s, &caller, true))
        .ok_or_else(|| not_found(&id))?;
    let attachments: Vec<Value> = state
        .neutron
        .ports
        .values()
        .filter(|p| p["device_id"] == id.as_str())
        .map(|p| {
            json!({
                "port_id": p["id"], "net_id": p["network_id"], "mac_addr": p["mac_address"],
                "port_state": p["status"], "fixed_ips": p["fixed_ips"],
            })
        })
        .collect();
    Ok(json_answer(
        StatusCode::OK,
        json!({"interfaceAttachments": attachments}),
    ))
}

fn render_flavor(f: &model::Flavor, version: Version, origin: &str, detail: bool) -> Value {
    let mut out = json!({"id": f.id, "name": f.name, "links": links(origin, "flavors", &f.id)});
    if version.at_least(2, 55) {
        out["description"] = Value::Null;
    }
    if detail {
        out["ram"] = json!(f.ram);
        out["disk"] = json!(f.disk);
        out["vcpus"] = json!(f.vcpus);
        out["swap"] = if version.at_least(2, 75) {
            json!(0)
        } else {
            json!("")
        };
        out["OS-FLV-EXT-DATA:ephemeral"] = json!(f.ephemeral);
        out["OS-FLV-DISABLED:disabled"] = json!(false);
        out["os-flavor-access:is_public"] = json!(true);
        out["rxtx_factor"] = json!(1.0);
        if version.at_least(2, 61) {
            out["extra_specs"] = json!(f.extra_specs);
        }
    }
    out
}

async fn flavors(
    sim: &Sim,
    version: Version,
    origin: &str,
    query: &[(String, String)],
    detail: bool,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let min_ram: u32 = first(query, "minRam")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let min_disk: u32 = first(query, "minDisk")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let selected: Vec<&model::Flavor> = state
        .flavors
        .iter()
        .filter(|f| f.ram >= min_ram && f.disk >= min_disk)
        .collect();
    let ids: Vec<&str> = selected.iter().map(|f| f.id.as_str()).collect();
    let page = paging::page(
        &ids,
        first(query, "limit"),
        first(query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| err(StatusCode::BAD_REQUEST, e.to_string()))?;
    let list: Vec<Value> = selected[page.start..page.end]
        .iter()
        .map(|f| render_flavor(f, version, origin, detail))
        .collect();
    let mut body = json!({ "flavors": list });
    if let Some(marker) = page.next_marker {
        let path = if detail { "flavors/detail" } else { "flavors" };
        body["flavors_links"] = json!([{"rel": "next", "href": format!(
            "{origin}{BASE}/{path}?{}", paging::next_query(query, page.end - page.start, &marker))}]);
    }
    Ok(json_answer(StatusCode::OK, body))
}

/// `GET /images/detail`: the images the caller sees, newest first, optionally one `name`; 404
/// from microversion 2.36, as Nova answers since its image proxy was removed.
async fn list_images_detail(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    if version.at_least(2, 36) {
        return Err(err(
            StatusCode::NOT_FOUND,
            "The resource could not be found.",
        ));
    }
    let state = sim.state();
    let name = first(&query, "name");
    let mut images: Vec<&Value> = state
        .images
        .values()
        .filter(|i| crate::glance::visible(i, &caller))
        .filter(|i| name.is_none_or(|n| i["name"].as_str() == Some(n)))
        .collect();
    images.sort_by(|a, b| {
        b["created_at"]
            .as_str()
            .cmp(&a["created_at"].as_str())
            .then_with(|| a["id"].as_str().cmp(&b["id"].as_str()))
    });
    let images: Vec<Value> = images
        .into_iter()
        .map(|i| {
            let id = i["id"].as_str().unwrap_or_default();
            json!({
                "id": id, "name": i["name"],
                "status": i["status"].as_str().unwrap_or_default().to_ascii_uppercase(),
                "created": i["created_at"], "updated": i["updated_at"],
                "minDisk": i["min_disk"], "minRam": i["min_ram"], "progress": 100,
                "metadata": {}, "links": links(&origin, "images", id),
            })
        })
        .collect();
    Ok(json_answer(StatusCode::OK, json!({"images": images})))
}

async fn list_flavors(
    State(sim): State<Arc<Sim>>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    flavors(&sim, version, &origin, &query, false).await
}

async fn list_flavors_detail(
    State(sim): State<Arc<Sim>>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    flavors(&sim, version, &origin, &query, true).await
}

async fn show_flavor(
    State(sim): State<Arc<Sim>>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let flavor = state.flavor(&id).ok_or_else(|| {
        err(
            StatusCode::NOT_FOUND,
            format!("Flavor {id} could not be found."),
        )
    })?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"flavor": render_flavor(flavor, version, &origin, true)}),
    ))
}

async fn availability_zones(State(sim): State<Arc<Sim>>) -> Response {
    let state = sim.state();
    let zones: Vec<Value> = state
        .zones
        .iter()
        .map(|z| json!({"zoneName": z, "zoneState": {"available": true}, "hosts": null}))
        .collect();
    json_answer(StatusCode::OK, json!({"availabilityZoneInfo": zones}))
}

fn render_group(g: &ServerGroup, version: Version) -> Value {
    let mut out = json!({"id": g.id, "name": g.name, "members": g.members});
    if version.at_least(2, 64) {
        out["policy"] = json!(g.policy);
        out["rules"] = json!({});
    } else {
        out["policies"] = json!([g.policy]);
        out["metadata"] = json!({});
    }
    if version.at_least(2, 13) {
        out["project_id"] = json!(g.project_id);
        out["user_id"] = json!(g.user_id);
    }
    out
}

async fn list_server_groups(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
) -> Response {
    let state = sim.state();
    let groups: Vec<Value> = state
        .server_groups
        .values()
        .filter(|g| g.project_id == caller.project_id)
        .map(|g| render_group(g, version))
        .collect();
    json_answer(StatusCode::OK, json!({"server_groups": groups}))
}

async fn create_server_group(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Compute, &body)?;
    let group = &body["server_group"];
    let name = group["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                "Invalid input for field/attribute name.",
            )
        })?;
    let policy = if version.at_least(2, 64) {
        group["policy"].as_str()
    } else {
        group["policies"]
            .as_array()
            .and_then(|p| p.first())
            .and_then(|p| p.as_str())
    };
    let policy = policy
        .filter(|p| {
            matches!(
                *p,
                "affinity" | "anti-affinity" | "soft-affinity" | "soft-anti-affinity"
            )
        })
        .ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                "Invalid input for field/attribute policy.",
            )
        })?;
    let g = ServerGroup {
        id: new_id(),
        name: name.to_owned(),
        policy: policy.to_owned(),
        members: Vec::new(),
        project_id: caller.project_id.clone(),
        user_id: caller.user_id.clone(),
    };
    let rendered = render_group(&g, version);
    sim.state().server_groups.insert(g.id.clone(), g);
    Ok(json_answer(
        StatusCode::OK,
        json!({"server_group": rendered}),
    ))
}

fn group_not_found(id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("Instance group {id} could not be found."),
    )
}

async fn show_server_group(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let group = state
        .server_groups
        .get(&id)
        .filter(|g| g.project_id == caller.project_id)
        .ok_or_else(|| group_not_found(&id))?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"server_group": render_group(group, version)}),
    ))
}

async fn delete_server_group(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    if state
        .server_groups
        .get(&id)
        .is_none_or(|g| g.project_id != caller.project_id)
    {
        return Err(group_not_found(&id));
    }
    state.server_groups.remove(&id);
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
#[allow(clippy::type_complexity)]
mod tests {
    use super::*;

    #[test]
    fn actions_follow_nova_state_rules() {
        use ServerStatus::*;
        let cases: &[(
            ServerStatus,
            Option<&str>,
            &str,
            Result<(&str, ServerStatus), &str>,
        )] = &[
            (Active, None, "os-stop", Ok(("powering-off", Shutoff))),
            (Error, None, "os-stop", Ok(("powering-off", Shutoff))),
            (
                Shutoff,
                None,
                "os-stop",
                Err("Cannot 'stop' instance i while it is in vm_state stopped"),
            ),
            (
                Build,
                None,
                "os-stop",
                Err("Cannot 'stop' instance i while it is in vm_state building"),
            ),
            (Shutoff, None, "os-start", Ok(("powering-on", Active))),
            (
                Active,
                None,
                "os-start",
                Err("Cannot 'start' instance i while it is in vm_state active"),
            ),
            (
                Active,
                Some("powering-off"),
                "os-start",
                Err("Cannot 'start' instance i while it is in task_state powering-off"),
            ),
            (Shutoff, None, "reboot", Ok(("rebooting", Active))),
            (
                Build,
                None,
                "reboot",
                Err("Cannot 'reboot' instance i while it is in vm_state building"),
            ),
        ];
        for (status, task, action, want) in cases {
            let got = plan_action("i", *status, *task, action);
            assert_eq!(
                got,
                want.map_err(str::to_owned),
                "{status:?} {task:?} {action}"
            );
        }
    }

    #[test]
    fn creates_are_validated_like_nova() {
        let state = Model::new("p", "u", vec![]);
        let caller = Caller {
            project_id: "p".into(),
            user_id: "u".into(),
            is_admin: false,
        };
        let image = state.images.keys().next().unwrap().clone();
        let net = state
            .network_id(crate::model::seed::INTERNAL_NETWORK)
            .unwrap();
        let v = Version::new(2, 47);
        let ok = json!({"server": {"name": "n", "flavorRef": "http://x/flavors/2", "imageRef": image,
                                   "networks": [{"uuid": net}], "max_count": 3}});
        let specs = plan_create(&state, &caller, v, &ok).unwrap();
        assert_eq!(specs.len(), 3);
        assert_eq!(specs[2].name, "n-3");
        assert_eq!(specs[0].flavor_id, "2");
        let message = |body: Value| plan_create(&state, &caller, v, &body).unwrap_err().message;
        assert!(
            message(json!({"server": {"name": "n", "flavorRef": "2", "imageRef": image}}))
                .contains("networks")
        );
        assert_eq!(
            message(
                json!({"server": {"name": "n", "flavorRef": "9", "imageRef": image, "networks": "none"}})
            ),
            "Flavor 9 could not be found."
        );
        assert_eq!(
            message(
                json!({"server": {"name": "n", "flavorRef": "2", "imageRef": "nope", "networks": "auto"}})
            ),
            "Can not find requested image"
        );
        assert!(message(
            json!({"server": {"name": "n", "flavorRef": "2", "imageRef": image,
            "networks": "auto", "availability_zone": "mars"}})
        )
        .contains("mars"));
        assert!(message(
            json!({"server": {"name": "n", "flavorRef": "2", "imageRef": image,
            "networks": "auto", "security_groups": [{"name": "web"}]}})
        )
        .contains("web"));
        // Before 2.37 networks may be left out: the only tenant network is used.
        let old = plan_create(
            &state,
            &caller,
            Version::new(2, 1),
            &json!({"server": {"name": "n", "flavorRef": "2", "imageRef": image}}),
        )
        .unwrap();
        assert_eq!(
            old[0].networks,
            vec![NetworkRequest::Network {
                id: net,
                fixed_ip: None
            }]
        );
    }
}
