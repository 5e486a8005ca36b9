//! Neutron's `extraroute-atomic` extension: `PUT /routers/{id}/add_extraroutes` and
//! `remove_extraroutes` change a router's routes by set union and difference under the
//! simulator's lock, so two writers never drop each other's routes.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::put;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::model;
use crate::util::{iso_z, now_secs};
use crate::{json_answer, json_body, Sim};

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(Service::Network, StatusCode::BAD_REQUEST, message).kind("HTTPBadRequest")
}

pub(crate) fn routes() -> Router<Arc<Sim>> {
    Router::new()
        .route(
            "/network/v2.0/routers/{id}/add_extraroutes",
            put(
                |s: State<Arc<Sim>>, c: Extension<Caller>, p: Path<String>, b: Bytes| {
                    change(true, s, c, p, b)
                },
            ),
        )
        .route(
            "/network/v2.0/routers/{id}/remove_extraroutes",
            put(
                |s: State<Arc<Sim>>, c: Extension<Caller>, p: Path<String>, b: Bytes| {
                    change(false, s, c, p, b)
                },
            ),
        )
}

/// A route normalised for comparison (the destination's network address, the next hop as
/// parsed).
fn normal(route: &Value) -> Option<(String, String)> {
    let (ip, prefix) = model::parse_cidr(route["destination"].as_str()?).ok()?;
    let hop: std::net::IpAddr = route["nexthop"].as_str()?.parse().ok()?;
    Some((format!("{ip}/{prefix}"), hop.to_string()))
}

async fn change(
    add: bool,
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Network, &body)?;
    let given = body["router"]["routes"]
        .as_array()
        .cloned()
        .ok_or_else(|| bad("Resource body required: router.routes"))?;
    let mut wanted = Vec::new();
    for route in &given {
        wanted
            .push(normal(route).ok_or_else(|| bad(format!("Invalid format for routes: {route}")))?);
    }
    let mut state = sim.state();
    let router = state
        .neutron
        .routers
        .get_mut(&id)
        .filter(|r| caller.is_admin || r["project_id"] == caller.project_id.as_str())
        .ok_or_else(|| {
            ApiError::new(
                Service::Network,
                StatusCode::NOT_FOUND,
                format!("Router {id} could not be found."),
            )
            .kind("RouterNotFound")
        })?;
    let mut current: Vec<(String, String)> = router["routes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(normal)
        .collect();
    if add {
        for w in wanted {
            if !current.contains(&w) {
                current.push(w);
            }
        }
    } else {
        current.retain(|c| !wanted.contains(c));
    }
    router["routes"] = Value::Array(
        current
            .into_iter()
            .map(|(destination, nexthop)| json!({"destination": destination, "nexthop": nexthop}))
            .collect(),
    );
    router["updated_at"] = json!(iso_z(now_secs()));
    router["revision_number"] = json!(router["revision_number"].as_u64().unwrap_or(0) + 1);
    let answer = router.clone();
    Ok(json_answer(StatusCode::OK, json!({ "router": answer })))
}
