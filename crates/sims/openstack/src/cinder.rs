//! Cinder (block-storage v3, microversions 3.0–3.70) under `/volume/v3/{project_id}`: volumes
//! (create creating → available, list, detail with filters and paging, get, update, delete
//! deleting → gone) and volume types (list, default, get); the `os-extend` action is in
//! [`crate::cinder_actions`].

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

use crate::attachments::type_is_multiattach;
use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::microversion::{self, Version, VersionError};
use crate::model::{Change, State as Model};
use crate::paging;
use crate::util::{first, iso_micro, new_id, now_secs};
use crate::{json_answer, json_body, Origin, Query, Sim, MAX_LIMIT};

/// The lowest microversion served.
pub const MIN_VERSION: Version = Version::new(3, 0);
/// The highest microversion served.
pub const MAX_VERSION: Version = Version::new(3, 70);

pub(crate) fn err(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::new(Service::BlockStorage, status, message)
}

fn version_doc(origin: &str) -> Value {
    json!({
        "id": "v3.0", "status": "CURRENT", "version": MAX_VERSION.to_string(),
        "min_version": MIN_VERSION.to_string(), "updated": "2023-08-31T00:00:00Z",
        "links": [{"href": format!("{origin}/volume/v3/"), "rel": "self"}],
        "media-types": [{"base": "application/json", "type": "application/vnd.openstack.volume+json;version=3"}],
    })
}

/// The unauthenticated version documents.
pub(crate) fn discovery() -> Router<Arc<Sim>> {
    async fn versions(Origin(origin): Origin) -> Response {
        json_answer(StatusCode::OK, json!({"versions": [version_doc(&origin)]}))
    }
    Router::new()
        .route("/volume", get(versions))
        .route("/volume/", get(versions))
        .route("/volume/v3", get(versions))
        .route("/volume/v3/", get(versions))
}

/// The API routes.
pub(crate) fn routes() -> Router<Arc<Sim>> {
    const BASE: &str = "/volume/v3/{project}";
    Router::new()
        .route(
            &format!("{BASE}/volumes"),
            get(list_summary).post(create_volume),
        )
        .route(&format!("{BASE}/volumes/detail"), get(list_detail))
        .route(
            &format!("{BASE}/volumes/{{id}}"),
            get(show_volume).put(update_volume).delete(delete_volume),
        )
        .route(&format!("{BASE}/types"), get(list_types))
        .route(&format!("{BASE}/types/default"), get(default_type))
        .route(&format!("{BASE}/types/{{id}}"), get(show_type))
        .merge(crate::cinder_actions::routes())
        .route_layer(middleware::from_fn(with_microversion))
}

async fn with_microversion(mut request: Request, next: Next) -> Response {
    let version = match microversion::requested(
        request.headers(),
        "volume",
        None,
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
    if let Ok(v) = HeaderValue::from_str(&format!("volume {version}")) {
        response.headers_mut().insert("openstack-api-version", v);
    }
    response.headers_mut().insert(
        header::VARY,
        HeaderValue::from_static("OpenStack-API-Version"),
    );
    response
}

/// The URL's project must be the token's (an admin may name any).
pub(crate) fn check_project(caller: &Caller, project: &str) -> Result<(), ApiError> {
    if caller.is_admin || caller.project_id == project {
        Ok(())
    } else {
        Err(err(StatusCode::BAD_REQUEST, "Malformed request url"))
    }
}

pub(crate) fn owner(volume: &Value) -> &str {
    volume["os-vol-tenant-attr:tenant_id"]
        .as_str()
        .unwrap_or_default()
}

/// Drops the fields newer than `version`.
pub(crate) fn render(volume: &Value, version: Version) -> Value {
    let mut out = volume.clone();
    if let Some(o) = out.as_object_mut() {
        for (field, since) in [
            ("group_id", (3, 13)),
            ("provider_id", (3, 21)),
            ("service_uuid", (3, 48)),
            ("shared_targets", (3, 48)),
            ("volume_type_id", (3, 63)),
            ("consumes_quota", (3, 65)),
        ] {
            if !version.at_least(since.0, since.1) {
                o.remove(field);
            }
        }
    }
    out
}

pub(crate) fn not_found(id: &str) -> ApiError {
    err(
        StatusCode::NOT_FOUND,
        format!("Volume {id} could not be found."),
    )
}

/// Cinder's `metadata` filter: a dict literal (`{'k': 'v'}` or JSON).
fn metadata_filter(text: &str) -> Option<Map<String, Value>> {
    serde_json::from_str::<Map<String, Value>>(&text.replace('\'', "\"")).ok()
}

fn select<'a>(
    state: &'a Model,
    caller: &Caller,
    query: &[(String, String)],
) -> Result<Vec<&'a Value>, ApiError> {
    let all =
        caller.is_admin && first(query, "all_tenants").is_some_and(|v| v != "0" && v != "false");
    let metadata = match first(query, "metadata") {
        Some(text) => Some(metadata_filter(text).ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                format!("Invalid metadata filter {text}"),
            )
        })?),
        None => None,
    };
    let mut out: Vec<&Value> = state
        .volumes
        .values()
        .filter(|v| all || owner(v) == caller.project_id)
        .filter(|v| {
            ["name", "status", "availability_zone", "bootable"]
                .iter()
                .all(|k| first(query, k).is_none_or(|want| v[*k].as_str() == Some(want)))
                && metadata
                    .as_ref()
                    .is_none_or(|m| m.iter().all(|(k, want)| &v["metadata"][k] == want))
        })
        .collect();
    out.sort_by(|a, b| {
        b["created_at"]
            .as_str()
            .cmp(&a["created_at"].as_str())
            .then(b["_seq"].as_u64().cmp(&a["_seq"].as_u64()))
    });
    Ok(out)
}

async fn list(
    sim: &Sim,
    caller: &Caller,
    version: Version,
    origin: &str,
    project: &str,
    query: &[(String, String)],
    detail: bool,
) -> Result<Response, ApiError> {
    check_project(caller, project)?;
    let state = sim.state();
    let selected = select(&state, caller, query)?;
    let ids: Vec<&str> = selected
        .iter()
        .map(|v| v["id"].as_str().unwrap_or_default())
        .collect();
    let page = paging::page(
        &ids,
        first(query, "limit"),
        first(query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| err(StatusCode::BAD_REQUEST, e.to_string()))?;
    let volumes: Vec<Value> = selected[page.start..page.end]
        .iter()
        .map(|v| {
            if detail {
                strip(render(v, version))
            } else {
                json!({"id": v["id"], "name": v["name"], "links": v["links"]})
            }
        })
        .collect();
    let mut body = json!({ "volumes": volumes });
    if let Some(marker) = page.next_marker {
        let path = if detail { "volumes/detail" } else { "volumes" };
        body["volumes_links"] = json!([{"rel": "next", "href": format!("{origin}/volume/v3/{project}/{path}?{}",
            paging::next_query(query, page.end - page.start, &marker))}]);
    }
    Ok(json_answer(StatusCode::OK, body))
}

/// Removes the simulator's private fields (`_seq`).
pub(crate) fn strip(mut volume: Value) -> Value {
    if let Some(o) = volume.as_object_mut() {
        o.remove("_seq");
    }
    volume
}

async fn list_summary(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(project): Path<String>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    list(&sim, &caller, version, &origin, &project, &query, false).await
}

async fn list_detail(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(project): Path<String>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    list(&sim, &caller, version, &origin, &project, &query, true).await
}

async fn show_volume(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path((project, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let state = sim.state();
    let volume = state
        .volumes
        .get(&id)
        .filter(|v| caller.is_admin || owner(v) == caller.project_id)
        .ok_or_else(|| not_found(&id))?;
    Ok(json_answer(
        StatusCode::OK,
        json!({"volume": strip(render(volume, version))}),
    ))
}

fn find_type<'a>(state: &'a Model, key: &str) -> Option<&'a Value> {
    state
        .volume_types
        .get(key)
        .or_else(|| state.volume_types.values().find(|t| t["name"] == key))
}

async fn create_volume(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Origin(origin): Origin,
    Path(project): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let body = json_body(Service::BlockStorage, &body)?;
    let input = body
        .get("volume")
        .and_then(|v| v.as_object())
        .ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                "Missing required element 'volume' in request body.",
            )
        })?;
    let size = input
        .get("size")
        .and_then(|s| {
            s.as_u64()
                .or_else(|| s.as_str().and_then(|t| t.parse().ok()))
        })
        .filter(|s| *s >= 1)
        .ok_or_else(|| {
            err(
                StatusCode::BAD_REQUEST,
                "Invalid input for field/attribute size. Value: must be an integer >= 1",
            )
        })?;
    let mut state = sim.state();
    let vtype = match input.get("volume_type").and_then(|t| t.as_str()) {
        Some(key) => find_type(&state, key).cloned().ok_or_else(|| {
            err(
                StatusCode::NOT_FOUND,
                format!("Volume type with name {key} could not be found."),
            )
        })?,
        None => state.volume_types[&state.default_volume_type].clone(),
    };
    let zone = match input.get("availability_zone").and_then(|z| z.as_str()) {
        Some(z) if !state.zones.iter().any(|k| k == z) => {
            return Err(err(
                StatusCode::BAD_REQUEST,
                format!("Invalid input received: Availability zone '{z}' is invalid."),
            ))
        }
        Some(z) => z.to_owned(),
        None => state.zones[0].clone(),
    };
    let id = new_id();
    let now = now_secs();
    let seq = state.next_seq();
    let volume = json!({
        "id": id, "name": input.get("name").cloned().unwrap_or(Value::Null),
        "description": input.get("description").cloned().unwrap_or(Value::Null),
        "status": "creating", "size": size, "availability_zone": zone,
        "created_at": iso_micro(now), "updated_at": Value::Null,
        "volume_type": vtype["name"], "volume_type_id": vtype["id"],
        "snapshot_id": input.get("snapshot_id").cloned().unwrap_or(Value::Null),
        "source_volid": input.get("source_volid").cloned().unwrap_or(Value::Null),
        "metadata": input.get("metadata").cloned().unwrap_or(json!({})),
        "links": [{"rel": "self", "href": format!("{origin}/volume/v3/{project}/volumes/{id}")},
                  {"rel": "bookmark", "href": format!("{origin}/volume/{project}/volumes/{id}")}],
        "user_id": caller.user_id, "bootable": if input.contains_key("imageRef") { "true" } else { "false" },
        "encrypted": false, "replication_status": Value::Null, "consistencygroup_id": Value::Null,
        "multiattach": input.get("multiattach") == Some(&json!(true)) || type_is_multiattach(&vtype), "attachments": [],
        "migration_status": Value::Null, "os-vol-tenant-attr:tenant_id": caller.project_id,
        "group_id": Value::Null, "provider_id": Value::Null, "service_uuid": new_id(),
        "shared_targets": false, "consumes_quota": true, "_seq": seq,
    });
    state.volumes.insert(id.clone(), volume.clone());
    let to = if state.knobs.fail {
        "error"
    } else {
        "available"
    };
    let delay = state.knobs.volume_delay;
    state.schedule(&id, Change::Volume(to), Instant::now(), delay);
    Ok(json_answer(
        StatusCode::ACCEPTED,
        json!({"volume": strip(render(&volume, version))}),
    ))
}

async fn update_volume(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Extension(version): Extension<Version>,
    Path((project, id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let body = json_body(Service::BlockStorage, &body)?;
    let mut state = sim.state();
    let volume = state
        .volumes
        .get_mut(&id)
        .filter(|v| caller.is_admin || owner(v) == caller.project_id)
        .ok_or_else(|| not_found(&id))?;
    for key in ["name", "description", "metadata"] {
        if let Some(v) = body["volume"].get(key) {
            volume[key] = v.clone();
        }
    }
    volume["updated_at"] = json!(iso_micro(now_secs()));
    Ok(json_answer(
        StatusCode::OK,
        json!({"volume": strip(render(volume, version))}),
    ))
}

async fn delete_volume(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path((project, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let mut state = sim.state();
    let volume = state
        .volumes
        .get_mut(&id)
        .filter(|v| caller.is_admin || owner(v) == caller.project_id)
        .ok_or_else(|| not_found(&id))?;
    let status = volume["status"].as_str().unwrap_or_default();
    let attached = volume["attachments"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    if !matches!(
        status,
        "available" | "error" | "error_restoring" | "error_extending" | "error_managing"
    ) || attached
    {
        return Err(err(StatusCode::BAD_REQUEST, "Invalid volume: Volume status must be available or error or error_restoring or error_extending or error_managing and must not be migrating, attached, belong to a group, have snapshots, awaiting a transfer, or be disassociated from snapshots after volume transfer."));
    }
    volume["status"] = json!("deleting");
    let delay = state.knobs.volume_delay;
    state.schedule(&id, Change::VolumeGone, Instant::now(), delay);
    Ok(StatusCode::ACCEPTED.into_response())
}

async fn list_types(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(project): Path<String>,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let types: Vec<Value> = sim.state().volume_types.values().cloned().collect();
    Ok(json_answer(StatusCode::OK, json!({"volume_types": types})))
}

async fn default_type(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(project): Path<String>,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let state = sim.state();
    Ok(json_answer(
        StatusCode::OK,
        json!({"volume_type": state.volume_types[&state.default_volume_type]}),
    ))
}

async fn show_type(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path((project, id)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    check_project(&caller, &project)?;
    let state = sim.state();
    let t = state.volume_types.get(&id).ok_or_else(|| {
        err(
            StatusCode::NOT_FOUND,
            format!("Volume type {id} could not be found."),
        )
    })?;
    Ok(json_answer(StatusCode::OK, json!({"volume_type": t})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filters_and_version_fields() {
        let m = metadata_filter("{'cinder.csi.openstack.org/cluster': 'c1'}").unwrap();
        assert_eq!(m["cinder.csi.openstack.org/cluster"], "c1");
        assert!(metadata_filter("cluster=c1").is_none());
        let v = json!({"id": "x", "group_id": null, "volume_type_id": "t", "consumes_quota": true});
        assert!(render(&v, Version::new(3, 0)).get("group_id").is_none());
        assert!(render(&v, Version::new(3, 63))
            .get("volume_type_id")
            .is_some());
        assert!(render(&v, Version::new(3, 63))
            .get("consumes_quota")
            .is_none());
    }
}
