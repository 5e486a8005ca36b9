//! Octavia (load-balancer v2, API versions up to 2.28): version discovery and load balancers
//! (create PENDING_CREATE → ACTIVE with a Neutron VIP port, list with filters and paging, get,
//! update PENDING_UPDATE → ACTIVE, delete PENDING_DELETE → gone; changes refused with 409 while
//! a load balancer is immutable; cascade delete). A fully populated create (listeners with
//! default pools, members and monitors) builds the whole tree at once (`octavia_tree`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::model::Change;
use crate::paging;
use crate::util::{first, iso_plain, new_id, now_secs, values};
use crate::{json_answer, json_body, Origin, Query, Sim, MAX_LIMIT};

/// The newest Octavia API version listed as CURRENT.
pub const MAX_MINOR: u16 = 28;

fn err(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::new(Service::LoadBalancer, status, message)
}

fn not_found(id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("Load Balancer {id} not found."),
    )
}

/// The unauthenticated version list.
pub(crate) fn discovery() -> Router<Arc<Sim>> {
    async fn versions(Origin(origin): Origin) -> Response {
        let list: Vec<Value> = (0..=MAX_MINOR)
            .map(|minor| {
                json!({"id": format!("v2.{minor}"),
                "status": if minor == MAX_MINOR { "CURRENT" } else { "SUPPORTED" },
                "updated": "2016-12-11T00:00:00Z",
                "links": [{"href": format!("{origin}/load-balancer/v2"), "rel": "self"}]})
            })
            .collect();
        json_answer(StatusCode::OK, json!({ "versions": list }))
    }
    Router::new()
        .route("/load-balancer", get(versions))
        .route("/load-balancer/", get(versions))
}

/// The API routes (under `/v2` and its alias `/v2.0`).
pub(crate) fn routes() -> Router<Arc<Sim>> {
    let mut router = Router::new();
    for base in ["/load-balancer/v2", "/load-balancer/v2.0"] {
        router = router
            .route(
                &format!("{base}/lbaas/loadbalancers"),
                get(list).post(create),
            )
            .route(
                &format!("{base}/lbaas/loadbalancers/{{id}}"),
                get(show).put(update).delete(delete),
            );
    }
    router
}

fn owned(lb: &Value, caller: &Caller) -> bool {
    caller.is_admin || lb["project_id"] == caller.project_id.as_str()
}

async fn list(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Origin(origin): Origin,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let tags = values(&query, "tags");
    let selected: Vec<&Value> = state
        .load_balancers
        .values()
        .filter(|lb| owned(lb, &caller))
        .filter(|lb| {
            [
                "id",
                "name",
                "description",
                "provisioning_status",
                "operating_status",
                "vip_address",
                "vip_port_id",
                "vip_subnet_id",
                "vip_network_id",
                "provider",
                "availability_zone",
                "flavor_id",
            ]
            .iter()
            .all(|k| first(&query, k).is_none_or(|want| lb[*k].as_str() == Some(want)))
                && tags.iter().flat_map(|t| t.split(',')).all(|t| {
                    lb["tags"]
                        .as_array()
                        .is_some_and(|have| have.iter().any(|h| h == t))
                })
        })
        .collect();
    let ids: Vec<&str> = selected
        .iter()
        .map(|lb| lb["id"].as_str().unwrap_or_default())
        .collect();
    let page = paging::page(
        &ids,
        first(&query, "limit"),
        first(&query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| err(StatusCode::BAD_REQUEST, e.to_string()))?;
    let shown: Vec<Value> = selected[page.start..page.end]
        .iter()
        .map(|lb| with_refs(&state, lb))
        .collect();
    let mut body = json!({ "loadbalancers": shown });
    if let Some(marker) = page.next_marker {
        body["loadbalancers_links"] = json!([{"rel": "next", "href": format!("{origin}/load-balancer/v2/lbaas/loadbalancers?{}",
            paging::next_query(&query, page.end - page.start, &marker))}]);
    }
    Ok(json_answer(StatusCode::OK, body))
}

async fn show(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let lb = state
        .load_balancers
        .get(&id)
        .filter(|lb| owned(lb, &caller))
        .ok_or_else(|| not_found(&id))?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"loadbalancer": with_refs(&state, lb)}),
    ))
}

pub(crate) async fn create(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::LoadBalancer, &body)?;
    let input = body
        .get("loadbalancer")
        .and_then(|l| l.as_object())
        .ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                "Invalid input for field/attribute loadbalancer.",
            )
        })?;
    let mut state = sim.state();
    if state.octavia.take_conflict() {
        return Err(err(
            StatusCode::CONFLICT,
            "Quota or a concurrent change blocks creating this load balancer.",
        ));
    }
    if let Some(flavor) = input.get("flavor_id").and_then(|f| f.as_str()) {
        if flavor != crate::octavia_tree::FLAVOR_ID {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("Validation failure: Invalid flavor_id {flavor}."),
            ));
        }
    }
    if let Some(zone) = input.get("availability_zone").and_then(|f| f.as_str()) {
        if !state.zones.iter().any(|z| z == zone) {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("Validation failure: Invalid availability zone {zone}."),
            ));
        }
    }
    let user_port = match input.get("vip_port_id").and_then(|p| p.as_str()) {
        Some(id) => {
            let port = state
                .neutron
                .ports
                .get(id)
                .filter(|p| p["project_id"] == caller.project_id.as_str())
                .cloned()
                .ok_or_else(|| {
                    err(
                        StatusCode::BAD_REQUEST,
                        format!("Validation failure: Port {id} not found."),
                    )
                })?;
            if port["device_id"].as_str().is_some_and(|d| !d.is_empty()) {
                return Err(err(
                    StatusCode::CONFLICT,
                    format!(
                        "Port {id} is already in use by device {}.",
                        port["device_id"]
                    ),
                ));
            }
            Some(port)
        }
        None => None,
    };
    let (network, subnet) = if let Some(port) = &user_port {
        (
            port["network_id"].as_str().unwrap_or_default().to_owned(),
            port["fixed_ips"][0]["subnet_id"]
                .as_str()
                .map(str::to_owned),
        )
    } else if let Some(subnet) = input.get("vip_subnet_id").and_then(|s| s.as_str()) {
        let net = state
            .neutron
            .subnets
            .get(subnet)
            .and_then(|s| s["network_id"].as_str())
            .map(str::to_owned)
            .ok_or_else(|| {
                err(
                    StatusCode::BAD_REQUEST,
                    format!("Validation failure: Subnet {subnet} not found."),
                )
            })?;
        (net, Some(subnet.to_owned()))
    } else if let Some(net) = input.get("vip_network_id").and_then(|s| s.as_str()) {
        if !state.neutron.networks.contains_key(net) {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("Validation failure: Network {net} not found."),
            ));
        }
        (net.to_owned(), None)
    } else {
        return Err(err(StatusCode::BAD_REQUEST, "Validation failure: VIP must contain one of: vip_port_id, vip_network_id, vip_subnet_id."));
    };
    let id = new_id();
    crate::octavia_tree::populate(&mut state, &id, &caller.project_id, input)?;
    let mut fixed = json!({});
    if let Some(s) = &subnet {
        fixed["subnet_id"] = json!(s);
    }
    if let Some(ip) = input.get("vip_address").and_then(|a| a.as_str()) {
        fixed["ip_address"] = json!(ip);
    }
    let fixed = (fixed.as_object().is_some_and(|o| !o.is_empty())).then(|| vec![fixed]);
    let project = caller.project_id.clone();
    let port = match &user_port {
        Some(p) => {
            let pid = p["id"].as_str().unwrap_or_default().to_owned();
            let port = state.neutron.ports.get_mut(&pid).expect("checked above");
            port["device_id"] = json!(format!("octavia-lb-{id}"));
            Ok(port.clone())
        }
        None => state
            .create_port(
                &project,
                &network,
                fixed.as_deref(),
                &format!("lb-{id}"),
                "Octavia",
                &format!("octavia-lb-{id}"),
                Some(vec![]),
            )
            .map_err(|e| err(StatusCode::CONFLICT, format!("{e:?}"))),
    };
    let port = match port {
        Ok(port) => port,
        Err(e) => {
            state.octavia.remove_all(&id);
            return Err(e);
        }
    };
    let vip = port["fixed_ips"][0].clone();
    let now = iso_plain(now_secs());
    let lb = json!({
        "id": id, "name": input.get("name").cloned().unwrap_or(json!("")),
        "description": input.get("description").cloned().unwrap_or(json!("")),
        "provisioning_status": "PENDING_CREATE", "operating_status": "OFFLINE",
        "admin_state_up": input.get("admin_state_up").cloned().unwrap_or(json!(true)),
        "project_id": project, "tenant_id": project, "created_at": now, "updated_at": Value::Null,
        "vip_address": vip["ip_address"], "vip_port_id": port["id"], "vip_subnet_id": vip["subnet_id"],
        "vip_network_id": network, "vip_qos_policy_id": Value::Null, "vip_vnic_type": "normal",
        "listeners": [], "pools": [], "provider": input.get("provider").cloned().unwrap_or(json!("amphora")),
        "flavor_id": input.get("flavor_id").cloned().unwrap_or(Value::Null),
        "availability_zone": input.get("availability_zone").cloned().unwrap_or(Value::Null),
        "tags": input.get("tags").cloned().unwrap_or(json!([])), "additional_vips": [],
    });
    let (listeners, pools) = state.octavia.refs(&id);
    let mut lb = lb;
    lb["listeners"] = listeners;
    lb["pools"] = pools;
    state.load_balancers.insert(id.clone(), lb.clone());
    let to = if state.knobs.fail { "ERROR" } else { "ACTIVE" };
    let delay = state.knobs.lb_delay;
    state.schedule(&id, Change::LoadBalancer(to), Instant::now(), delay);
    Ok(json_answer(
        StatusCode::CREATED,
        json!({"loadbalancer": lb}),
    ))
}

/// A load balancer with its current listener and pool references.
fn with_refs(state: &crate::model::State, lb: &Value) -> Value {
    let mut lb = lb.clone();
    let (listeners, pools) = state.octavia.refs(lb["id"].as_str().unwrap_or_default());
    lb["listeners"] = listeners;
    lb["pools"] = pools;
    lb
}

fn immutable(lb: &Value, id: &str) -> Result<(), ApiError> {
    match lb["provisioning_status"].as_str() {
        Some("ACTIVE" | "ERROR") => Ok(()),
        _ => Err(err(
            StatusCode::CONFLICT,
            format!("Load Balancer {id} is immutable and cannot be updated."),
        )),
    }
}

async fn update(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::LoadBalancer, &body)?;
    let mut state = sim.state();
    let lb = state
        .load_balancers
        .get_mut(&id)
        .filter(|lb| owned(lb, &caller))
        .ok_or_else(|| not_found(&id))?;
    immutable(lb, &id)?;
    let lb_id = id.clone();
    if state.octavia.take_conflict() {
        return Err(err(
            StatusCode::CONFLICT,
            format!("Load Balancer {lb_id} is immutable and cannot be updated."),
        ));
    }
    let lb = state.load_balancers.get_mut(&id).expect("checked");
    for key in [
        "name",
        "description",
        "admin_state_up",
        "tags",
        "vip_qos_policy_id",
    ] {
        if let Some(v) = body["loadbalancer"].get(key) {
            lb[key] = v.clone();
        }
    }
    lb["provisioning_status"] = json!("PENDING_UPDATE");
    lb["updated_at"] = json!(iso_plain(now_secs()));
    let answer = lb.clone();
    let delay = state.knobs.lb_delay;
    state.schedule(&id, Change::LoadBalancer("ACTIVE"), Instant::now(), delay);
    Ok(json_answer(StatusCode::OK, json!({"loadbalancer": answer})))
}

async fn delete(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let cascade = first(&query, "cascade").is_some_and(|c| c.eq_ignore_ascii_case("true"));
    let conflict = state.octavia.take_conflict();
    let has_children = state.octavia.has_children(&id);
    let lb = state
        .load_balancers
        .get_mut(&id)
        .filter(|lb| owned(lb, &caller))
        .ok_or_else(|| not_found(&id))?;
    immutable(lb, &id)?;
    if conflict {
        return Err(err(
            StatusCode::CONFLICT,
            format!("Load Balancer {id} is immutable and cannot be updated."),
        ));
    }
    if has_children && !cascade {
        return Err(err(
            StatusCode::BAD_REQUEST,
            format!("Cannot delete Load Balancer {id} - it has children"),
        ));
    }
    lb["provisioning_status"] = json!("PENDING_DELETE");
    let delay = state.knobs.lb_delay;
    state.schedule(&id, Change::LoadBalancerGone, Instant::now(), delay);
    Ok(StatusCode::NO_CONTENT.into_response())
}
