//! Nova `os-volume_attachments` under `/servers/{id}`: list, attach (Cinder volume
//! available → attaching → in-use; multi-attach volumes from 2.60; tags 2.49+,
//! delete_on_termination 2.79+, attachment ids 2.89+), show and detach (detaching →
//! available), with Nova's 400/404/409 refusals.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use hyper::body::Bytes;
use serde_json::{json, Value};
use tokio::time::Instant;

use crate::attachments::{AttachOptions, Attachment};
use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::microversion::Version;
use crate::model::{ModelError, State as Model};
use crate::nova::{err, not_found, visible};
use crate::{json_answer, json_body, Sim};

/// The routes (the caller adds the microversion layer).
pub(crate) fn routes() -> Router<Arc<Sim>> {
    const BASE: &str = "/compute/v2.1/servers/{id}/os-volume_attachments";
    Router::new()
        .route(BASE, get(list).post(attach))
        .route(&format!("{BASE}/{{volume}}"), get(show).delete(detach))
}

/// One `volumeAttachment` as `version` shows it.
fn render(a: &Attachment, version: Version) -> Value {
    let mut out = json!({"device": a.device, "serverId": a.server_id, "volumeId": a.volume_id});
    if !version.at_least(2, 89) {
        out["id"] = json!(a.volume_id);
    }
    if version.at_least(2, 70) {
        out["tag"] = json!(a.tag);
    }
    if version.at_least(2, 79) {
        out["delete_on_termination"] = json!(a.delete_on_termination);
    }
    if version.at_least(2, 89) {
        out["attachment_id"] = json!(a.id);
        out["bdm_uuid"] = json!(a.bdm_uuid);
    }
    out
}

/// A server's `os-extended-volumes:volumes_attached`.
pub(crate) fn volumes_attached(state: &Model, server_id: &str, version: Version) -> Value {
    state
        .server_attachments(server_id)
        .iter()
        .map(|a| {
            if version.at_least(2, 3) {
                json!({"id": a.volume_id, "delete_on_termination": a.delete_on_termination})
            } else {
                json!({"id": a.volume_id})
            }
        })
        .collect()
}

fn not_attached(volume: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("volume_id not found: {volume}"),
    )
}

fn model_err(e: ModelError) -> ApiError {
    match e {
        ModelError::NotFound("Instance", id) => not_found(&id),
        ModelError::NotFound("volume_id", id) => not_attached(&id),
        ModelError::NotFound(kind, id) => err(
            StatusCode::NOT_FOUND,
            format!("{kind} {id} could not be found."),
        ),
        ModelError::Invalid(m) => err(StatusCode::BAD_REQUEST, m),
        ModelError::Conflict(m) => err(StatusCode::CONFLICT, m),
    }
}

/// The server, if the caller sees it.
fn check_server(state: &Model, caller: &Caller, id: &str) -> Result<(), ApiError> {
    state
        .servers
        .get(id)
        .filter(|s| visible(s, caller, true))
        .map(drop)
        .ok_or_else(|| not_found(id))
}

async fn list(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    check_server(&state, &caller, &id)?;
    let listed: Vec<Value> = state
        .server_attachments(&id)
        .iter()
        .map(|a| render(a, version))
        .collect();
    Ok(json_answer(
        StatusCode::OK,
        json!({"volumeAttachments": listed}),
    ))
}

async fn show(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path((id, volume)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    check_server(&state, &caller, &id)?;
    let found = state
        .server_attachments(&id)
        .into_iter()
        .find(|a| a.volume_id == volume)
        .ok_or_else(|| not_attached(&volume))?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"volumeAttachment": render(found, version)}),
    ))
}

async fn attach(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_body(Service::Compute, &body)?;
    let request = &body["volumeAttachment"];
    let volume = request["volumeId"].as_str().ok_or_else(|| {
        err(
            StatusCode::BAD_REQUEST,
            "Invalid input for field/attribute volumeAttachment. Value: 'volumeId' is a required property",
        )
    })?;
    let options = AttachOptions {
        tag: request["tag"]
            .as_str()
            .filter(|_| version.at_least(2, 49))
            .map(str::to_owned),
        delete_on_termination: version.at_least(2, 79)
            && request["delete_on_termination"] == json!(true),
        multiattach_allowed: version.at_least(2, 60),
    };
    let mut state = sim.state();
    check_server(&state, &caller, &id)?;
    let project = (!caller.is_admin).then_some(caller.project_id.as_str());
    let made = state
        .attach_volume(&id, volume, project, options, Instant::now())
        .map_err(model_err)?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"volumeAttachment": render(&made, version)}),
    ))
}

async fn detach(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path((id, volume)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let mut state = sim.state();
    check_server(&state, &caller, &id)?;
    state
        .detach_volume(&id, &volume, Instant::now())
        .map_err(model_err)?;
    Ok(StatusCode::ACCEPTED.into_response())
}
