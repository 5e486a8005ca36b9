//! Cinder volume actions (`POST /volumes/{id}/action`): `os-extend` (available volumes; in-use
//! ones from microversion 3.42), extending → available/in-use with the new size.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use tokio::time::Instant;

use crate::auth::Caller;
use crate::cinder::{check_project, err, not_found, owner};
use crate::errors::{ApiError, Service};
use crate::microversion::Version;
use crate::model::ModelError;
use crate::{json_body, Sim};

/// The action route (the caller adds the microversion layer).
pub(crate) fn routes() -> Router<Arc<Sim>> {
    Router::new().route("/volume/v3/{project}/volumes/{id}/action", post(action))
}

/// Reads `new_size` (a number or a numeric string).
fn new_size(body: &serde_json::Value) -> Option<u64> {
    let v = &body["os-extend"]["new_size"];
    v.as_u64()
        .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
}

async fn action(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path((project, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let body = json_body(Service::BlockStorage, &body)?;
    let name = body
        .as_object()
        .and_then(|o| o.keys().next().cloned())
        .unwrap_or_default();
    if name != "os-extend" {
        return Err(err(
            StatusCode::BAD_REQUEST,
            format!("There is no such action: {name}"),
        ));
    }
    let size = new_size(&body).ok_or_else(|| {
        err(
            StatusCode::BAD_REQUEST,
            "Invalid input for field/attribute new_size. Value: must be an integer",
        )
    })?;
    let mut state = sim.state();
    state
        .volumes
        .get(&id)
        .filter(|v| caller.is_admin || owner(v) == caller.project_id)
        .ok_or_else(|| not_found(&id))?;
    state
        .extend_volume(&id, size, version.at_least(3, 42), Instant::now())
        .map_err(|e| match e {
            ModelError::NotFound(..) => not_found(&id),
            ModelError::Invalid(m) | ModelError::Conflict(m) => err(StatusCode::BAD_REQUEST, m),
        })?;
    Ok(StatusCode::ACCEPTED.into_response())
}
