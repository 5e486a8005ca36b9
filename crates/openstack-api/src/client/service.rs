//! Calls to one OpenStack service: the shared session's token, the endpoint from its catalog,
//! the call guard (rate limiter, metrics, retries), one re-authentication after a 401, and one
//! paging helper for every `*_links`-paged collection.

use std::sync::Arc;

use http::{HeaderName, HeaderValue, Method};
use serde::de::DeserializeOwned;
use serde_json::Value;
use stratus_cloud::CloudError;
use stratus_cloud_kit::CallGuard;

use super::catalog::Service;
use super::errors::{check, classify, is_expired_token};
use super::http::HttpResponse;
use super::page::parse_page;
use super::session::Session;

/// Most pages one listing follows (a runaway `next` link must not loop forever).
const MAX_PAGES: usize = 10_000;

/// The items of a paged listing and when the service answered its first page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<T> {
    /// Every item of every page.
    pub items: Vec<T>,
    /// The service's `Date` header on the first page (`None` when it sent none we can read).
    pub answered_at: Option<jiff::Timestamp>,
}

/// The `Date` header of an answer (an HTTP date: `Sun, 06 Nov 1994 08:49:37 GMT`).
fn response_date(response: &HttpResponse) -> Option<jiff::Timestamp> {
    let value = response.headers.get(http::header::DATE)?.to_str().ok()?;
    jiff::fmt::rfc2822::parse(value)
        .ok()
        .map(|zoned| zoned.timestamp())
}

/// A client of one service.
#[derive(Debug, Clone)]
pub struct ServiceClient {
    session: Arc<Session>,
    service: Service,
    guard: CallGuard,
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// The answer to `operation` is not what it should be; `why` is scrubbed (an answer's values are
/// never quoted).
fn parse_error(operation: &str, why: impl std::fmt::Display) -> CloudError {
    CloudError::Unavailable {
        operation: operation.into(),
        message: format!(
            "the answer does not parse: {}",
            stratus_runtime::redact::scrub(&why.to_string())
        ),
    }
}

impl ServiceClient {
    /// A client of `service` through `session`, sending `headers` (e.g. a microversion) always.
    pub fn new(
        session: Arc<Session>,
        service: Service,
        guard: CallGuard,
        headers: Vec<(HeaderName, HeaderValue)>,
    ) -> ServiceClient {
        ServiceClient {
            session,
            service,
            guard,
            headers,
        }
    }

    /// The project the session's token is scoped to (Cinder's URLs carry it).
    pub async fn project_id(&self) -> Result<Option<String>, CloudError> {
        Ok(self.session.auth().await?.project_id.clone())
    }

    /// Sends `method path` (relative to the service's endpoint) with an optional JSON body;
    /// the success answer, or the guarded error.
    pub async fn send(
        &self,
        operation: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<HttpResponse, CloudError> {
        let body = body
            .map(serde_json::to_vec)
            .transpose()
            .map_err(|e| parse_error(operation, e))?;
        let mut reauthenticated = false;
        loop {
            let auth = self.session.auth().await?;
            let url = format!("{}{path}", self.session.endpoint(&auth, self.service)?);
            let mut headers = self.headers.clone();
            headers.push((HeaderName::from_static("x-auth-token"), auth.token.clone()));
            let http = self.session.http();
            let result = self
                .guard
                .call(
                    operation,
                    || {
                        let (method, body) = (method.clone(), body.clone());
                        let (url, headers) = (&url, &headers);
                        async move { check(http.send(method, url, headers, body).await) }
                    },
                    classify,
                )
                .await;
            match result {
                Err(e) if is_expired_token(&e) && !reauthenticated => {
                    tracing::debug!(operation, "token refused; authenticating again");
                    self.session.invalidate(&auth).await;
                    reauthenticated = true;
                }
                other => return other,
            }
        }
    }

    /// `GET path` read as `T`.
    pub async fn get<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        path: &str,
    ) -> Result<T, CloudError> {
        let response = self.send(operation, Method::GET, path, None).await?;
        serde_json::from_slice(&response.body).map_err(|e| parse_error(operation, e))
    }

    /// Every item of a paged collection: `GET path`, `collection` holds the items and
    /// `<collection>_links` the `next` link, whose query (its marker) is followed from our own
    /// endpoint (a service may advertise an address we cannot reach).
    pub async fn list<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        path: &str,
        collection: &str,
    ) -> Result<Vec<T>, CloudError> {
        Ok(self.list_dated(operation, path, collection).await?.items)
    }

    /// [`ServiceClient::list`], with the service's own clock reading when it answered the first
    /// page (its `Date` header), so that a later "changed since" question can be asked in the
    /// service's time rather than ours.
    pub async fn list_dated<T: DeserializeOwned>(
        &self,
        operation: &'static str,
        path: &str,
        collection: &str,
    ) -> Result<Listing<T>, CloudError> {
        let base = path.split('?').next().unwrap_or(path).to_string();
        let mut next = Some(path.to_string());
        let mut items = Vec::new();
        let mut answered_at = None;
        for _ in 0..MAX_PAGES {
            let Some(page_path) = next.take() else {
                return Ok(Listing { items, answered_at });
            };
            let response = self.send(operation, Method::GET, &page_path, None).await?;
            if items.is_empty() && answered_at.is_none() {
                answered_at = response_date(&response);
            }
            let page = parse_page::<T>(&response.body, collection)
                .map_err(|e| parse_error(operation, e))?;
            drop(response);
            let empty = page.items.is_empty();
            items.extend(page.items);
            next = page
                .next_query
                .filter(|_| !empty)
                .map(|q| format!("{base}?{q}"));
        }
        Err(parse_error(
            operation,
            format!("more than {MAX_PAGES} pages"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(date: Option<&str>) -> HttpResponse {
        let mut headers = http::HeaderMap::new();
        if let Some(d) = date {
            headers.insert(http::header::DATE, HeaderValue::from_str(d).unwrap());
        }
        HttpResponse {
            status: http::StatusCode::OK,
            headers,
            body: Default::default(),
        }
    }

    #[test]
    fn the_date_header_is_read_as_the_services_clock() {
        assert_eq!(
            response_date(&answer(Some("Fri, 27 Nov 2026 13:48:13 GMT")))
                .unwrap()
                .to_string(),
            "2026-11-27T13:48:13Z"
        );
        assert_eq!(response_date(&answer(Some("yesterday"))), None);
        assert_eq!(response_date(&answer(None)), None);
    }
}
