//! Glance (image v2): the image list (filters `name`, `status`, `visibility`, `owner`, `tag`;
//! `limit`/`marker` paging with Glance's relative `next` link) and single images.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use http::StatusCode;
use serde_json::{json, Value};

use crate::auth::Caller;
use crate::errors::{ApiError, Service};
use crate::paging;
use crate::util::{first, values};
use crate::{json_answer, Origin, Query, Sim, MAX_LIMIT};

/// The unauthenticated version list (300 Multiple Choices, as Glance answers).
pub(crate) fn discovery() -> Router<Arc<Sim>> {
    async fn versions(Origin(origin): Origin) -> Response {
        let list: Vec<Value> = (0..=16)
            .rev()
            .map(|minor| json!({"id": format!("v2.{minor}"), "status": if minor == 16 { "CURRENT" } else { "SUPPORTED" },
                               "links": [{"rel": "self", "href": format!("{origin}/image/v2/")}]}))
            .collect();
        json_answer(StatusCode::MULTIPLE_CHOICES, json!({ "versions": list }))
    }
    Router::new()
        .route("/image", get(versions))
        .route("/image/", get(versions))
        .route("/image/versions", get(versions))
}

/// The API routes.
pub(crate) fn routes() -> Router<Arc<Sim>> {
    Router::new()
        .route("/image/v2/images", get(list_images))
        .route("/image/v2/images/{id}", get(show_image))
}

/// Whether `caller` sees `image` (Nova's image proxy uses the same rule).
pub(crate) fn visible(image: &Value, caller: &Caller) -> bool {
    caller.is_admin
        || image["owner"] == caller.project_id.as_str()
        || matches!(
            image["visibility"].as_str(),
            Some("public" | "community" | "shared")
        )
}

async fn list_images(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Query(query): Query,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let tags = values(&query, "tag");
    let mut selected: Vec<&Value> = state
        .images
        .values()
        .filter(|i| visible(i, &caller))
        .filter(|i| {
            [
                "name",
                "status",
                "visibility",
                "owner",
                "disk_format",
                "container_format",
            ]
            .iter()
            .all(|k| first(&query, k).is_none_or(|want| i[*k].as_str() == Some(want)))
                && tags.iter().all(|t| {
                    i["tags"]
                        .as_array()
                        .is_some_and(|have| have.iter().any(|h| h == *t))
                })
        })
        .collect();
    selected.sort_by(|a, b| {
        b["created_at"]
            .as_str()
            .cmp(&a["created_at"].as_str())
            .then(b["id"].as_str().cmp(&a["id"].as_str()))
    });
    let ids: Vec<&str> = selected
        .iter()
        .map(|i| i["id"].as_str().unwrap_or_default())
        .collect();
    let page = paging::page(
        &ids,
        first(&query, "limit"),
        first(&query, "marker"),
        MAX_LIMIT,
    )
    .map_err(|e| match e {
        paging::PageError::MarkerNotFound(m) => ApiError::bad_request(
            Service::Image,
            format!("Invalid marker. Image {m} could not be found."),
        ),
        other => ApiError::bad_request(Service::Image, other.to_string()),
    })?;
    let mut body = json!({"images": selected[page.start..page.end], "first": "/v2/images", "schema": "/v2/schemas/images"});
    if let Some(marker) = page.next_marker {
        body["next"] = json!(format!(
            "/v2/images?{}",
            paging::next_query(&query, page.end - page.start, &marker)
        ));
    }
    Ok(json_answer(StatusCode::OK, body))
}

async fn show_image(
    State(sim): State<Arc<Sim>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let state = sim.state();
    let image = state
        .images
        .get(&id)
        .filter(|i| visible(i, &caller))
        .ok_or_else(|| {
            ApiError::not_found(Service::Image, format!("No image found with ID {id}"))
        })?;
    Ok(json_answer(StatusCode::OK, image.clone()))
}
