//! Octavia (load-balancer v2, API versions up to 2.28): version discovery and load balancers
//! (create PENDING_CREATE → ACTIVE with a Neutron VIP port, list with filters and paging, get,
//! update PENDING_UPDATE → ACTIVE, delete PENDING_DELETE → gone; changes refused with 409 while
//! a load balancer is immutable). Listeners, pools, members and monitors come with the next
//! issue; a fully populated create is refused rather than half done.

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
    let mut body = json!({"loadbalancers": selected[page.start..page.end]});
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
    Ok(json_answer(StatusCode::OK, json!({"loadbalancer": lb})))
}

async fn create(
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
    if ["listeners", "pools"].iter().any(|k| {
        input
            .get(*k)
            .and_then(|v| v.as_array())
            .is_some_and(|a| !a.is_empty())
    }) {
        return Err(err(
            StatusCode::BAD_REQUEST,
            "stratus simulator: fully populated load balancer creation is not simulated yet",
        ));
    }
    let mut state = sim.state();
    let (network, subnet) = if let Some(subnet) =
        input.get("vip_subnet_id").and_then(|s| s.as_str())
    {
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
    let mut fixed = json!({});
    if let Some(s) = &subnet {
        fixed["subnet_id"] = json!(s);
    }
    if let Some(ip) = input.get("vip_address").and_then(|a| a.as_str()) {
        fixed["ip_address"] = json!(ip);
    }
    let fixed = (fixed.as_object().is_some_and(|o| !o.is_empty())).then(|| vec![fixed]);
    let project = caller.project_id.clone();
    let port = state
        .create_port(
            &project,
            &network,
            fixed.as_deref(),
            &format!("lb-{id}"),
            "Octavia",
            &format!("octavia-lb-{id}"),
            Some(vec![]),
        )
        .map_err(|e| err(StatusCode::CONFLICT, format!("{e:?}")))?;
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
    state.load_balancers.insert(id.clone(), lb.clone());
    let to = if state.knobs.fail { "ERROR" } else { "ACTIVE" };
    let delay = state.knobs.lb_delay;
    state.schedule(&id, Change::LoadBalancer(to), Instant::now(), delay);
    Ok(json_answer(
        StatusCode::CREATED,
        json!({"loadbalancer": lb}),
    ))
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
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    let lb = state
        .load_balancers
        .get_mut(&id)
        .filter(|lb| owned(lb, &caller))
        .ok_or_else(|| not_found(&id))?;
    immutable(lb, &id)?;
    lb["provisioning_status"] = json!("PENDING_DELETE");
    let delay = state.knobs.lb_delay;
    state.schedule(&id, Change::LoadBalancerGone, Instant::now(), delay);
    Ok(StatusCode::NO_CONTENT.into_response())
}
