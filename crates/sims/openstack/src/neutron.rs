//! Neutron (network v2.0): networks, subnets, ports, floating IPs, security groups and rules,
//! routers. Lists filter on any attribute (repeated values are alternatives, unknown attributes
//! are refused as Neutron's filter validation does), `fixed_ips=ip_address=…`, tag filters,
//! `fields`, and `limit`/`marker` paging with `<collection>_links`.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use serde_json::{json, Map, Value};

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::model::{self, ModelError, State as Model};
use crate::paging;
use crate::util::{first, iso_z, new_id, now_secs, values};
use crate::{json_answer, json_body, Origin, Query, Sim, MAX_LIMIT};

const BASE: &str = "/network/v2.0";

/// One Neutron collection.
#[derive(Debug)]
pub(crate) struct Coll {
    /// URL path segment (`security-groups`).
    path: &'static str,
    /// JSON key of a list (`security_groups`).
    plural: &'static str,
    /// JSON key of one (`security_group`).
    one: &'static str,
    /// Error type when missing (`SecurityGroupNotFound`).
    missing: &'static str,
    /// Name in messages (`Security group`).
    label: &'static str,
}

const NETWORKS: Coll = Coll {
    path: "networks",
    plural: "networks",
    one: "network",
    missing: "NetworkNotFound",
    label: "Network",
};
const SUBNETS: Coll = Coll {
    path: "subnets",
    plural: "subnets",
    one: "subnet",
    missing: "SubnetNotFound",
    label: "Subnet",
};
const PORTS: Coll = Coll {
    path: "ports",
    plural: "ports",
    one: "port",
    missing: "PortNotFound",
    label: "Port",
};
const FLOATING_IPS: Coll = Coll {
    path: "floatingips",
    plural: "floatingips",
    one: "floatingip",
    missing: "FloatingIPNotFound",
    label: "Floating IP",
};
const SECURITY_GROUPS: Coll = Coll {
    path: "security-groups",
    plural: "security_groups",
    one: "security_group",
    missing: "SecurityGroupNotFound",
    label: "Security group",
};
const RULES: Coll = Coll {
    path: "security-group-rules",
    plural: "security_group_rules",
    one: "security_group_rule",
    missing: "SecurityGroupRuleNotFound",
    label: "Security group rule",
};
const ROUTERS: Coll = Coll {
    path: "routers",
    plural: "routers",
    one: "router",
    missing: "RouterNotFound",
    label: "Router",
};

static COLLECTIONS: [&Coll; 7] = [
    &NETWORKS,
    &SUBNETS,
    &PORTS,
    &FLOATING_IPS,
    &SECURITY_GROUPS,
    &RULES,
    &ROUTERS,
];

fn err(status: StatusCode, kind: &'static str, message: impl Into<String>) -> ApiError {
    ApiError::new(Service::Network, status, message).kind(kind)
}

fn bad(message: impl Into<String>) -> ApiError {
    err(StatusCode::BAD_REQUEST, "HTTPBadRequest", message)
}

fn missing(coll: &Coll, id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        coll.missing,
        format!("{} {id} could not be found.", coll.label),
    )
}

fn model_err(e: ModelError) -> ApiError {
    match e {
        ModelError::NotFound(kind, id) => err(
            StatusCode::NOT_FOUND,
            "HTTPNotFound",
            format!("{kind} {id} could not be found."),
        ),
        ModelError::Invalid(m) => bad(m),
        ModelError::Conflict(m) if m.contains("already allocated") => {
            err(StatusCode::CONFLICT, "IpAddressAlreadyAllocated", m)
        }
        ModelError::Conflict(m) => err(StatusCode::CONFLICT, "IpAddressGenerationFailure", m),
    }
}

fn map<'a>(state: &'a mut Model, coll: &Coll) -> &'a mut BTreeMap<String, Value> {
    let n = &mut state.neutron;
    match coll.plural {
        "networks" => &mut n.networks,
        "subnets" => &mut n.subnets,
        "ports" => &mut n.ports,
        "floatingips" => &mut n.floatingips,
        "security_groups" => &mut n.security_groups,
        "security_group_rules" => &mut n.security_group_rules,
        _ => &mut n.routers,
    }
}

/// The unauthenticated version documents.
pub(crate) fn discovery() -> Router<Arc<Sim>> {
    async fn versions(Origin(origin): Origin) -> Response {
        json_answer(
            StatusCode::OK,
            json!({"versions": [{"id": "v2.0", "status": "CURRENT",
            "links": [{"href": format!("{origin}{BASE}/"), "rel": "self"}]}]}),
        )
    }
    async fn resources(Origin(origin): Origin) -> Response {
        let list: Vec<Value> = COLLECTIONS
            .iter()
            .map(|c| json!({"name": c.one, "collection": c.plural,
                            "links": [{"href": format!("{origin}{BASE}/{}", c.path), "rel": "self"}]}))
            .collect();
        json_answer(StatusCode::OK, json!({ "resources": list }))
    }
    Router::new()
        .route("/network", get(versions))
        .route("/network/", get(versions))
        .route(BASE, get(resources))
        .route("/network/v2.0/", get(resources))
}

/// The API routes.
pub(crate) fn routes() -> Router<Arc<Sim>> {
    let mut router = Router::new().route(&format!("{BASE}/extensions"), get(extensions));
    for coll in COLLECTIONS {
        router = router
            .route(
                &format!("{BASE}/{}", coll.path),
                get(
                    move |s: State<Arc<Sim>>, c: Extension<Caller>, o: Origin, q: Query| {
                        list(coll, s, c, o, q)
                    },
                )
                .post(move |s: State<Arc<Sim>>, c: Extension<Caller>, b: Bytes| {
                    create(coll, s, c, b)
                }),
            )
            .route(
                &format!("{BASE}/{}/{{id}}", coll.path),
                get(
                    move |s: State<Arc<Sim>>, c: Extension<Caller>, p: Path<String>, q: Query| {
                        show(coll, s, c, p, q)
                    },
                )
                .put(
                    move |s: State<Arc<Sim>>, c: Extension<Caller>, p: Path<String>, b: Bytes| {
                        update(coll, s, c, p, b)
                    },
                )
                .delete(
                    move |s: State<Arc<Sim>>, c: Extension<Caller>, p: Path<String>| {
                        delete(coll, s, c, p)
                    },
                ),
            );
    }
    router
}

async fn extensions() -> Response {
    let list: Vec<Value> = [
        ("external-net", "Neutron external network"),
        ("router", "Neutron L3 Router"),
        ("extraroute", "Neutron Extra Route"),
        ("security-group", "security-group"),
        ("port-security", "Port Security"),
        ("allowed-address-pairs", "Allowed Address Pairs"),
        ("binding", "Port Binding"),
        ("standard-attr-description", "standard-attr-description"),
        ("standard-attr-timestamp", "Resource timestamps"),
        ("standard-attr-revisions", "Resource revision numbers"),
        (
            "standard-attr-tag",
            "Tag support for resources with standard attribute",
        ),
        ("project-id", "project_id field enabled"),
        ("pagination", "Pagination support"),
        ("filter-validation", "Filter parameters validation"),
    ]
    .iter()
    .map(|(alias, name)| {
        json!({"alias": alias, "name": name, "description": name,
                                "updated": "2013-01-20T00:00:00-00:00", "links": []})
    })
    .collect();
    json_answer(StatusCode::OK, json!({ "extensions": list }))
}

/// Whether `caller` sees `object` of `coll`.
fn visible(state: &Model, coll: &Coll, object: &Value, caller: &Caller) -> bool {
    if caller.is_admin || object["project_id"] == caller.project_id.as_str() {
        return true;
    }
    match coll.plural {
        "networks" => object["shared"] == true || object["router:external"] == true,
        "subnets" => object["network_id"]
            .as_str()
            .and_then(|n| state.neutron.networks.get(n))
            .is_some_and(|n| n["shared"] == true || n["router:external"] == true),
        _ => false,
    }
}

/// Whether a scalar field equals a query value as Neutron converts it.
fn scalar_matches(field: &Value, wanted: &str) -> bool {
    match field {
        Value::Bool(b) => match wanted.to_ascii_lowercase().as_str() {
            "true" | "1" => *b,
            "false" | "0" => !*b,
            _ => false,
        },
        Value::String(s) => s == wanted,
        Value::Number(n) => n.to_string() == wanted,
        Value::Array(items) => items.iter().any(|i| scalar_matches(i, wanted)),
        _ => false,
    }
}

const RESERVED: [&str; 11] = [
    "limit",
    "marker",
    "fields",
    "sort_key",
    "sort_dir",
    "page_reverse",
    "tags",
    "tags-any",
    "not-tags",
    "not-tags-any",
    "fixed_ips",
];

/// Filters objects by the query (see the module doc).
fn filter<'a>(
    objects: Vec<&'a Value>,
    query: &[(String, String)],
) -> Result<Vec<&'a Value>, ApiError> {
    let mut by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (k, v) in query {
        if !RESERVED.contains(&k.as_str()) {
            by_key.entry(k).or_default().push(v);
        }
    }
    if let Some(sample) = objects.first() {
        if let Some(unknown) = by_key.keys().find(|k| sample.get(**k).is_none()) {
            return Err(bad(format!(
                "[{unknown}] is invalid attribute for filtering"
            )));
        }
    }
    let tags = |key: &str| -> Vec<String> {
        values(query, key)
            .iter()
            .flat_map(|v| v.split(','))
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (all, any, not_all, not_any) = (
        tags("tags"),
        tags("tags-any"),
        tags("not-tags"),
        tags("not-tags-any"),
    );
    let mut fixed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for value in values(query, "fixed_ips") {
        let (k, v) = value
            .split_once('=')
            .ok_or_else(|| bad(format!("Invalid fixed_ips filter {value}")))?;
        fixed.entry(k.to_owned()).or_default().push(v.to_owned());
    }
    Ok(objects
        .into_iter()
        .filter(|o| {
            by_key
                .iter()
                .all(|(k, wanted)| wanted.iter().any(|w| scalar_matches(&o[*k], w)))
                && {
                    let has: Vec<&str> = o["tags"]
                        .as_array()
                        .map(|t| t.iter().filter_map(|v| v.as_str()).collect())
                        .unwrap_or_default();
                    all.iter().all(|t| has.contains(&t.as_str()))
                        && (any.is_empty() || any.iter().any(|t| has.contains(&t.as_str())))
                        && (not_all.is_empty()
                            || !not_all.iter().all(|t| has.contains(&t.as_str())))
                        && !not_any.iter().any(|t| has.contains(&t.as_str()))
                }
                && fixed.iter().all(|(k, wanted)| {
                    o["fixed_ips"].as_array().into_iter().flatten().any(|ip| {
                        wanted.iter().any(|w| match k.as_str() {
                            "ip_address_substr" => ip["ip_address"]
                                .as_str()
                                .is_some_and(|a| a.contains(w.as_str())),
                            key => ip[key].as_str() == Some(w.as_str()),
                        })
                    })
                })
        })
        .collect())
}

/// Keeps only the `fields` asked for, if any.
fn select_fields(object: &Value, query: &[(String, String)]) -> Value {
    let fields = values(query, "fields");
    if fields.is_empty() {
        return object.clone();
    }
    let mut out = Map::new();
    for f in fields {
        if let Some(v) = object.get(f) {
            out.insert(f.to_owned(), v.clone());
        }
    }
    Value::Object(out)
}

async fn list(
    coll: &'static Coll,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let objects: Vec<Value> = map(&mut state, coll).values().cloned().collect();
    let seen: Vec<&Value> = objects
        .iter()
        .filter(|o| visible(&state, coll, o, &caller))
        .collect();
    let selected = filter(seen, &query)?;
    let ids: Vec<&str> = selected
        .iter()
        .map(|o| o["id"].as_str().unwrap_or_default())
        .collect();
    let page = paging::page(
        &ids,
        first(&query, "limit"),
        first(&query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| bad(e.to_string()))?;
    let items: Vec<Value> = selected[page.start..page.end]
        .iter()
        .map(|o| select_fields(o, &query))
        .collect();
    let mut body = json!({ coll.plural: items });
    let mut links = Vec::new();
    if let Some(marker) = &page.next_marker {
        links.push(
            json!({"rel": "next", "href": format!("{origin}{BASE}/{}?{}", coll.path,
            paging::next_query(&query, page.end - page.start, marker))}),
        );
    }
    if let (Some(_), Some(first_id)) = (first(&query, "marker"), ids.get(page.start)) {
        let mut back = paging::next_query(&query, page.end - page.start, first_id);
        back.push_str("&page_reverse=True");
        links.push(
            json!({"rel": "previous", "href": format!("{origin}{BASE}/{}?{back}", coll.path)}),
        );
    }
    if !links.is_empty() {
        body[format!("{}_links", coll.plural)] = json!(links);
    }
    Ok(json_answer(StatusCode::OK, body))
}

async fn show(
    coll: &'static Coll,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let object = map(&mut state, coll)
        .get(&id)
        .cloned()
        .ok_or_else(|| missing(coll, &id))?;
    if !visible(&state, coll, &object, &caller) {
        return Err(missing(coll, &id));
    }
    Ok(json_answer(
        StatusCode::OK,
        json!({ coll.one: select_fields(&object, &query) }),
    ))
}

/// The object of a create or update body (`{"port": {...}}`).
fn input(coll: &Coll, body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let body = json_body(Service::Network, body)?;
    body.get(coll.one)
        .and_then(|o| o.as_object())
        .cloned()
        .ok_or_else(|| bad(format!("Resource body required: {}", coll.one)))
}

fn owner(caller: &Caller, body: &Map<String, Value>) -> String {
    match body
        .get("project_id")
        .or_else(|| body.get("tenant_id"))
        .and_then(|p| p.as_str())
    {
        Some(p) if caller.is_admin => p.to_owned(),
        _ => caller.project_id.clone(),
    }
}

fn string_list(value: Option<&Value>) -> Option<Vec<String>> {
    value.and_then(|v| v.as_array()).map(|a| {
        a.iter()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    })
}

async fn create(
    coll: &'static Coll,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = input(coll, &body)?;
    let project = owner(&caller, &body);
    let mut state = sim.state();
    let created = match coll.plural {
        "networks" => {
            let name = body
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            let external = body.get("router:external") == Some(&json!(true));
            let shared = body.get("shared") == Some(&json!(true));
            let id = state.add_network(&project, name, external, shared);
            state.neutron.networks[&id].clone()
        }
        "subnets" => {
            let network = body
                .get("network_id")
                .and_then(|n| n.as_str())
                .ok_or_else(|| bad("network_id is required"))?;
            let cidr = body
                .get("cidr")
                .and_then(|n| n.as_str())
                .ok_or_else(|| bad("cidr is required"))?;
            let name = body
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            if !state.neutron.networks.contains_key(network) {
                return Err(missing(&NETWORKS, network));
            }
            let id = state
                .add_subnet(&project, network, name, cidr)
                .map_err(model_err)?;
            state.neutron.subnets[&id].clone()
        }
        "ports" => create_port(&mut state, &project, &body)?,
        "floatingips" => create_floating_ip(&mut state, &project, &body)?,
        "security_groups" => {
            let name = body
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default()
                .to_owned();
            let id = new_id();
            let now = iso_z(now_secs());
            let mut rules = Vec::new();
            for ethertype in ["IPv4", "IPv6"] {
                let rule = new_rule(
                    &project,
                    &id,
                    &json!({"direction": "egress", "ethertype": ethertype})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                );
                state.neutron.security_group_rules.insert(
                    rule["id"].as_str().unwrap_or_default().to_owned(),
                    rule.clone(),
                );
                rules.push(rule);
            }
            let group = json!({
                "id": id, "name": name, "description": body.get("description").cloned().unwrap_or(json!("")),
                "tenant_id": project, "project_id": project, "stateful": true, "shared": false,
                "security_group_rules": rules, "tags": [], "created_at": now, "updated_at": now, "revision_number": 1,
            });
            state.neutron.security_groups.insert(id, group.clone());
            group
        }
        "security_group_rules" => create_rule(&mut state, &project, &caller, &body)?,
        _ => {
            let id = new_id();
            let now = iso_z(now_secs());
            let router = json!({
                "id": id, "name": body.get("name").cloned().unwrap_or(json!("")),
                "description": body.get("description").cloned().unwrap_or(json!("")),
                "status": "ACTIVE", "admin_state_up": body.get("admin_state_up").cloned().unwrap_or(json!(true)),
                "tenant_id": project, "project_id": project,
                "external_gateway_info": gateway(&mut state, body.get("external_gateway_info"))?,
                "routes": [], "distributed": false, "ha": false, "flavor_id": null,
                "availability_zones": [model::seed::ZONE], "availability_zone_hints": [], "tags": [],
                "created_at": now, "updated_at": now, "revision_number": 1,
            });
            state.neutron.routers.insert(id, router.clone());
            router
        }
    };
    Ok(json_answer(
        StatusCode::CREATED,
        json!({ coll.one: created }),
    ))
}

fn gateway(state: &mut Model, info: Option<&Value>) -> Result<Value, ApiError> {
    let Some(network) = info.and_then(|i| i["network_id"].as_str()) else {
        return Ok(Value::Null);
    };
    let net = state
        .neutron
        .networks
        .get(network)
        .ok_or_else(|| missing(&NETWORKS, network))?;
    if net["router:external"] != true {
        return Err(bad(format!(
            "Network {network} is not a valid external network"
        )));
    }
    let subnet = net["subnets"][0].as_str().unwrap_or_default().to_owned();
    let ip = state.allocate_ip(&subnet).map_err(model_err)?;
    Ok(json!({"network_id": network, "enable_snat": true,
              "external_fixed_ips": [{"subnet_id": subnet, "ip_address": ip.to_string()}]}))
}

fn create_port(
    state: &mut Model,
    project: &str,
    body: &Map<String, Value>,
) -> Result<Value, ApiError> {
    let network = body
        .get("network_id")
        .and_then(|n| n.as_str())
        .ok_or_else(|| bad("network_id is required"))?;
    if !state.neutron.networks.contains_key(network) {
        return Err(missing(&NETWORKS, network));
    }
    let fixed = body.get("fixed_ips").and_then(|f| f.as_array()).cloned();
    let text = |k: &str| {
        body.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    let groups = string_list(body.get("security_groups"));
    if let Some(groups) = &groups {
        if let Some(unknown) = groups
            .iter()
            .find(|g| !state.neutron.security_groups.contains_key(*g))
        {
            return Err(missing(&SECURITY_GROUPS, unknown));
        }
    }
    let mut port = state
        .create_port(
            project,
            network,
            fixed.as_deref(),
            &text("device_id"),
            &text("device_owner"),
            &text("name"),
            groups,
        )
        .map_err(model_err)?;
    for key in [
        "description",
        "allowed_address_pairs",
        "admin_state_up",
        "port_security_enabled",
        "binding:vnic_type",
    ] {
        if let Some(v) = body.get(key) {
            port[key] = v.clone();
        }
    }
    let id = port["id"].as_str().unwrap_or_default().to_owned();
    state.neutron.ports.insert(id, port.clone());
    Ok(port)
}

/// The router serving a floating network (its gateway is on it).
fn router_for(state: &Model, floating_network: &str) -> Value {
    state
        .neutron
        .routers
        .values()
        .find(|r| r["external_gateway_info"]["network_id"] == floating_network)
        .map_or(Value::Null, |r| r["id"].clone())
}

/// Points a floating IP at a port (its first IPv4 address, or `fixed_ip`), refusing a fixed IP
/// that already has one on the same external network.
pub(crate) fn associate(
    state: &mut Model,
    fip_id: &str,
    port_id: &str,
    fixed_ip: Option<&str>,
) -> Result<(), ApiError> {
    let port = state
        .neutron
        .ports
        .get(port_id)
        .ok_or_else(|| missing(&PORTS, port_id))?;
    let address = port["fixed_ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["ip_address"].as_str())
        .find(|ip| fixed_ip.map_or(!ip.contains(':'), |want| want == *ip))
        .ok_or_else(|| {
            bad(format!(
                "Port {port_id} does not have fixed ip {}",
                fixed_ip.unwrap_or("(IPv4)")
            ))
        })?
        .to_owned();
    let floating_network = state.neutron.floatingips[fip_id]["floating_network_id"].clone();
    if let Some(other) = state.neutron.floatingips.values().find(|f| {
        f["id"] != fip_id
            && f["port_id"] == port_id
            && f["fixed_ip_address"] == address.as_str()
            && f["floating_network_id"] == floating_network
    }) {
        return Err(err(StatusCode::CONFLICT, "FloatingIPPortAlreadyAssociated", format!(
            "Cannot associate floating IP {} ({fip_id}) with port {port_id} using fixed IP {address}, as that fixed IP already has a floating IP on external network {}.",
            other["floating_ip_address"].as_str().unwrap_or_default(),
            floating_network.as_str().unwrap_or_default())));
    }
    let router = router_for(state, floating_network.as_str().unwrap_or_default());
    let fip = state.neutron.floatingips.get_mut(fip_id).expect("checked");
    fip["port_id"] = json!(port_id);
    fip["fixed_ip_address"] = json!(address);
    fip["router_id"] = router;
    fip["status"] = json!("ACTIVE");
    Ok(())
}

fn create_floating_ip(
    state: &mut Model,
    project: &str,
    body: &Map<String, Value>,
) -> Result<Value, ApiError> {
    let network_id = body
        .get("floating_network_id")
        .and_then(|n| n.as_str())
        .ok_or_else(|| bad("floating_network_id is required"))?
        .to_owned();
    let network = state
        .neutron
        .networks
        .get(&network_id)
        .ok_or_else(|| missing(&NETWORKS, &network_id))?;
    if network["router:external"] != true {
        return Err(bad(format!(
            "Network {network_id} is not a valid external network"
        )));
    }
    let subnet = match body.get("subnet_id").and_then(|s| s.as_str()) {
        Some(s) => s.to_owned(),
        None => network["subnets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str())
            .find(|s| {
                state
                    .neutron
                    .subnets
                    .get(*s)
                    .is_some_and(|sub| sub["ip_version"] == 4)
            })
            .ok_or_else(|| bad(format!("Network {network_id} has no IPv4 subnet")))?
            .to_owned(),
    };
    let address = match body.get("floating_ip_address").and_then(|a| a.as_str()) {
        Some(text) => {
            let ip = text
                .parse()
                .map_err(|_| bad(format!("Invalid IP address {text}")))?;
            state.claim_ip(&subnet, ip).map_err(model_err)?;
            ip
        }
        None => state.allocate_ip(&subnet).map_err(model_err)?,
    };
    let id = new_id();
    let now = iso_z(now_secs());
    let fip = json!({
        "id": id, "floating_ip_address": address.to_string(), "floating_network_id": network_id,
        "router_id": null, "port_id": null, "fixed_ip_address": null, "status": "DOWN",
        "tenant_id": project, "project_id": project,
        "description": body.get("description").cloned().unwrap_or(json!("")),
        "dns_domain": "", "dns_name": "", "qos_policy_id": null, "port_details": null, "tags": [],
        "created_at": now, "updated_at": now, "revision_number": 0,
    });
    state.neutron.floatingips.insert(id.clone(), fip);
    if let Some(port) = body.get("port_id").and_then(|p| p.as_str()) {
        let fixed = body.get("fixed_ip_address").and_then(|f| f.as_str());
        if let Err(e) = associate(state, &id, port, fixed) {
            state.neutron.floatingips.remove(&id);
            state.release_ip(&subnet, &address.to_string());
            return Err(e);
        }
    }
    Ok(state.neutron.floatingips[&id].clone())
}

fn new_rule(project: &str, group: &str, body: &Map<String, Value>) -> Value {
    let now = iso_z(now_secs());
    let get = |k: &str| body.get(k).cloned().unwrap_or(Value::Null);
    json!({
        "id": new_id(), "security_group_id": group, "direction": get("direction"),
        "ethertype": body.get("ethertype").cloned().unwrap_or(json!("IPv4")), "protocol": get("protocol"),
        "port_range_min": get("port_range_min"), "port_range_max": get("port_range_max"),
        "remote_ip_prefix": get("remote_ip_prefix"), "remote_group_id": get("remote_group_id"),
        "remote_address_group_id": null, "normalized_cidr": get("remote_ip_prefix"),
        "description": body.get("description").cloned().unwrap_or(json!("")), "tenant_id": project,
        "project_id": project, "created_at": now, "updated_at": now, "revision_number": 0,
        "belongs_to_default_sg": false,
    })
}

fn create_rule(
    state: &mut Model,
    project: &str,
    caller: &Caller,
    body: &Map<String, Value>,
) -> Result<Value, ApiError> {
    let group_id = body
        .get("security_group_id")
        .and_then(|g| g.as_str())
        .ok_or_else(|| bad("security_group_id is required"))?
        .to_owned();
    let group = state
        .neutron
        .security_groups
        .get(&group_id)
        .ok_or_else(|| missing(&SECURITY_GROUPS, &group_id))?;
    if !caller.is_admin && group["project_id"] != caller.project_id.as_str() {
        return Err(missing(&SECURITY_GROUPS, &group_id));
    }
    if !matches!(
        body.get("direction").and_then(|d| d.as_str()),
        Some("ingress" | "egress")
    ) {
        return Err(bad(
            "Invalid input for direction. Reason: must be ingress or egress.",
        ));
    }
    let rule = new_rule(project, &group_id, body);
    let same = |r: &Value| {
        [
            "direction",
            "ethertype",
            "protocol",
            "port_range_min",
            "port_range_max",
            "remote_ip_prefix",
            "remote_group_id",
        ]
        .iter()
        .all(|k| r[*k] == rule[*k])
    };
    if let Some(existing) = state
        .neutron
        .security_group_rules
        .values()
        .find(|r| r["security_group_id"] == group_id.as_str() && same(r))
    {
        return Err(err(
            StatusCode::CONFLICT,
            "SecurityGroupRuleExists",
            format!(
                "Security group rule already exists. Rule id is {}.",
                existing["id"].as_str().unwrap_or_default()
            ),
        ));
    }
    let id = rule["id"].as_str().unwrap_or_default().to_owned();
    state.neutron.security_group_rules.insert(id, rule.clone());
    if let Some(rules) = state
        .neutron
        .security_groups
        .get_mut(&group_id)
        .and_then(|g| g["security_group_rules"].as_array_mut())
    {
        rules.push(rule.clone());
    }
    Ok(rule)
}

/// Attributes a PUT may change, per collection.
fn updatable(coll: &Coll) -> &'static [&'static str] {
    match coll.plural {
        "networks" => &[
            "name",
            "description",
            "admin_state_up",
            "shared",
            "mtu",
            "port_security_enabled",
        ],
        "subnets" => &[
            "name",
            "description",
            "enable_dhcp",
            "dns_nameservers",
            "host_routes",
            "gateway_ip",
        ],
        "ports" => &[
            "name",
            "description",
            "device_id",
            "device_owner",
            "security_groups",
            "allowed_address_pairs",
            "admin_state_up",
            "port_security_enabled",
        ],
        "floatingips" => &["description"],
        "security_groups" => &["name", "description"],
        "routers" => &["name", "description", "admin_state_up", "routes"],
        _ => &[],
    }
}

async fn update(
    coll: &'static Coll,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = input(coll, &body)?;
    let mut state = sim.state();
    let current = map(&mut state, coll)
        .get(&id)
        .cloned()
        .ok_or_else(|| missing(coll, &id))?;
    if !caller.is_admin && current["project_id"] != caller.project_id.as_str() {
        return Err(missing(coll, &id));
    }
    if coll.plural == "floatingips" && body.contains_key("port_id") {
        match body.get("port_id").and_then(|p| p.as_str()) {
            Some(port) => associate(
                &mut state,
                &id,
                port,
                body.get("fixed_ip_address").and_then(|f| f.as_str()),
            )?,
            None => {
                if let Some(fip) = state.neutron.floatingips.get_mut(&id) {
                    model::disassociate(fip);
                }
            }
        }
    }
    if coll.plural == "routers" {
        if let Some(routes) = body.get("routes") {
            let ok = routes.as_array().is_some_and(|r| {
                r.iter().all(|route| {
                    route["destination"]
                        .as_str()
                        .is_some_and(|d| model::parse_cidr(d).is_ok())
                        && route["nexthop"]
                            .as_str()
                            .is_some_and(|n| n.parse::<std::net::IpAddr>().is_ok())
                })
            });
            if !ok {
                return Err(bad(format!("Invalid format for routes: {routes}")));
            }
        }
        if body.contains_key("external_gateway_info") {
            let info = gateway(&mut state, body.get("external_gateway_info"))?;
            if let Some(r) = state.neutron.routers.get_mut(&id) {
                r["external_gateway_info"] = info;
            }
        }
    }
    let allowed = updatable(coll);
    let object = map(&mut state, coll).get_mut(&id).expect("checked above");
    for (k, v) in &body {
        if allowed.contains(&k.as_str()) {
            object[k.as_str()] = v.clone();
        }
    }
    object["updated_at"] = json!(iso_z(now_secs()));
    object["revision_number"] = json!(object["revision_number"].as_u64().unwrap_or(0) + 1);
    let answer = object.clone();
    Ok(json_answer(StatusCode::OK, json!({ coll.one: answer })))
}

async fn delete(
    coll: &'static Coll,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let current = map(&mut state, coll)
        .get(&id)
        .cloned()
        .ok_or_else(|| missing(coll, &id))?;
    if !caller.is_admin && current["project_id"] != caller.project_id.as_str() {
        return Err(missing(coll, &id));
    }
    match coll.plural {
        "networks" => {
            if state.neutron.ports.values().any(|p| {
                p["network_id"] == id.as_str() && model::is_compute_owner(&p["device_owner"])
            }) {
                return Err(err(StatusCode::CONFLICT, "NetworkInUse", format!(
                    "Unable to complete operation on network {id}. There are one or more ports still in use on the network.")));
            }
            let subnets: Vec<String> = state
                .neutron
                .subnets
                .iter()
                .filter(|(_, s)| s["network_id"] == id.as_str())
                .map(|(k, _)| k.clone())
                .collect();
            for s in subnets {
                state.neutron.subnets.remove(&s);
            }
            state.neutron.networks.remove(&id);
        }
        "ports" => {
            state.delete_port(&id);
        }
        "floatingips" => {
            if let Some(fip) = state.neutron.floatingips.remove(&id) {
                let address = fip["floating_ip_address"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let network = fip["floating_network_id"].as_str().unwrap_or_default();
                let subnets: Vec<String> =
                    string_list(state.neutron.networks.get(network).map(|n| &n["subnets"]))
                        .unwrap_or_default();
                for s in subnets {
                    state.release_ip(&s, &address);
                }
            }
        }
        "security_groups" => {
            if state.neutron.ports.values().any(|p| {
                p["security_groups"]
                    .as_array()
                    .is_some_and(|g| g.iter().any(|x| x == id.as_str()))
            }) {
                return Err(err(
                    StatusCode::CONFLICT,
                    "SecurityGroupInUse",
                    format!("Security Group {id} in use."),
                ));
            }
            state
                .neutron
                .security_group_rules
                .retain(|_, r| r["security_group_id"] != id.as_str());
            state.neutron.security_groups.remove(&id);
        }
        "security_group_rules" => {
            state.neutron.security_group_rules.remove(&id);
            let group = current["security_group_id"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if let Some(rules) = state
                .neutron
                .security_groups
                .get_mut(&group)
                .and_then(|g| g["security_group_rules"].as_array_mut())
            {
                rules.retain(|r| r["id"] != id.as_str());
            }
        }
        _ => {
            map(&mut state, coll).remove(&id);
        }
    }
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn filters_match_any_attribute_fixed_ips_and_tags() {
        let a = json!({"id": "a", "device_id": "s1", "admin_state_up": true, "tags": ["x", "y"],
                       "fixed_ips": [{"subnet_id": "sn", "ip_address": "10.0.0.5"}]});
        let b = json!({"id": "b", "device_id": "s2", "admin_state_up": false, "tags": [],
                       "fixed_ips": [{"subnet_id": "sn", "ip_address": "10.0.0.6"}]});
        let ids = |query: &[(&str, &str)]| -> Result<Vec<String>, String> {
            filter(vec![&a, &b], &q(query))
                .map(|l| {
                    l.iter()
                        .map(|o| o["id"].as_str().unwrap().to_owned())
                        .collect()
                })
                .map_err(|e| e.message)
        };
        assert_eq!(ids(&[("device_id", "s1")]), Ok(vec!["a".into()]));
        assert_eq!(
            ids(&[("device_id", "s1"), ("device_id", "s2")]),
            Ok(vec!["a".into(), "b".into()])
        );
        assert_eq!(ids(&[("admin_state_up", "False")]), Ok(vec!["b".into()]));
        assert_eq!(
            ids(&[("fixed_ips", "ip_address=10.0.0.6")]),
            Ok(vec!["b".into()])
        );
        assert_eq!(
            ids(&[("fixed_ips", "ip_address_substr=10.0.0.")])
                .unwrap()
                .len(),
            2
        );
        assert_eq!(ids(&[("tags", "x,y")]), Ok(vec!["a".into()]));
        assert_eq!(ids(&[("not-tags-any", "x")]), Ok(vec!["b".into()]));
        assert_eq!(ids(&[("limit", "1")]).unwrap().len(), 2);
        assert_eq!(
            ids(&[("colour", "red")]),
            Err("[colour] is invalid attribute for filtering".into())
        );
        assert_eq!(
            select_fields(&a, &q(&[("fields", "id")])),
            json!({"id": "a"})
        );
    }
}
