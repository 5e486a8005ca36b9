//! In-memory simulators of the OpenStack services Stratus talks to — Nova (`/compute/v2.1`),
//! Neutron (`/network/v2.0`), Cinder (`/volume/v3/{project_id}`), Glance (`/image/v2`) and
//! Octavia (`/load-balancer/v2`) — on one axum server bound to loopback, registered in a real
//! Keystone's catalog by the test environment. Every API request's `X-Auth-Token` is validated
//! against that Keystone ([`auth`]); answers follow the API references (paths, microversions,
//! `limit`/`marker` paging with `*_links`, error bodies, status codes). A [`SimHandle`] drives
//! the cloud from tests (fixtures, statuses, stalled or failed transitions).
//!
//! It watches nothing and writes nothing outside its own memory.

pub mod attachments;
pub mod auth;
pub mod errors;
mod handle;
mod handle_adopt;
mod handle_lb;
mod handle_volumes;
pub mod microversion;
pub mod model;
pub mod paging;
pub mod util;

mod cinder;
mod cinder_actions;
mod glance;
mod neutron;
mod neutron_routes;
mod nova;
mod nova_volumes;
mod octavia;
pub mod octavia_model;
mod octavia_tree;

use std::convert::Infallible;
use std::net::TcpListener as StdTcpListener;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::extract::{FromRequestParts, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use http::request::Parts;
use http::{header, HeaderValue};
use tokio::time::Instant;

pub use auth::{Auth, Caller, KeystoneValidator, ServiceCredentials};
pub use errors::{ApiError, Service};
pub use handle::{ServerSpec, SimHandle};
pub use handle_lb::LbCounts;
pub use model::{Knobs, ServerStatus};

/// The largest page any list answers (Nova's default `osapi_max_limit`).
pub const MAX_LIMIT: usize = 1000;

/// What a simulator starts with.
pub struct SimConfig {
    /// The project fixtures and seeded resources belong to (the CCM's project).
    pub project_id: String,
    /// The user fixtures are created by.
    pub user_id: String,
    /// Availability zones (empty: `nova`).
    pub zones: Vec<String>,
    /// How tokens are checked.
    pub auth: Auth,
}

/// The shared simulator: state and token validation.
pub struct Sim {
    state: Mutex<model::State>,
    auth: Auth,
}

impl Sim {
    /// A simulator seeded for `config`'s project.
    pub fn new(config: SimConfig) -> Arc<Sim> {
        Arc::new(Sim {
            state: Mutex::new(model::State::new(
                &config.project_id,
                &config.user_id,
                config.zones,
            )),
            auth: config.auth,
        })
    }

    /// The state, with due transitions applied.
    pub(crate) fn state(&self) -> MutexGuard<'_, model::State> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.settle(Instant::now());
        state
    }
}

/// The scheme and authority the client used (`http://127.0.0.1:PORT`, the proxy's when it sits
/// in front), for the links in answers.
pub(crate) struct Origin(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Origin {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Origin, Infallible> {
        let host = parts
            .headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("127.0.0.1");
        Ok(Origin(format!("http://{host}")))
    }
}

/// The decoded query pairs, in order, repeats kept.
pub(crate) struct Query(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for Query {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Query, Infallible> {
        Ok(Query(util::parse_query(parts.uri.query())))
    }
}

/// Parses a JSON request body in the service's error format.
pub(crate) fn json_body(service: Service, body: &[u8]) -> Result<serde_json::Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(service, format!("Malformed request body: {e}")))
}

/// A JSON answer with a status.
pub(crate) fn json_answer(status: http::StatusCode, body: serde_json::Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// Checks the token of every API request (version documents are open, as in OpenStack) and
/// puts the [`Caller`] in the request's extensions.
async fn require_token(State(sim): State<Arc<Sim>>, mut request: Request, next: Next) -> Response {
    let token = request
        .headers()
        .get("x-auth-token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match sim.auth.validate(token.as_deref()).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(auth::AuthError::Keystone(reason)) => {
            tracing::warn!(%reason, "openstack sim: keystone unavailable");
            let service = Service::from_path(request.uri().path()).unwrap_or(Service::Compute);
            ApiError::new(
                service,
                http::StatusCode::SERVICE_UNAVAILABLE,
                "The service is unavailable: identity service unreachable",
            )
            .into_response()
        }
        Err(_) => {
            let mut response = ApiError::new(
                Service::Identity,
                http::StatusCode::UNAUTHORIZED,
                "The request you have made requires authentication.",
            )
            .into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Keystone uri=\"/identity\""),
            );
            response
        }
    }
}

/// Adds `X-Openstack-Request-Id` to every answer.
async fn request_id(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    if let Ok(value) = HeaderValue::from_str(&format!("req-{}", util::new_id())) {
        response
            .headers_mut()
            .insert("x-openstack-request-id", value);
    }
    response
}

/// The whole API: each service's routes, token checks on all but the version documents.
pub fn router(sim: Arc<Sim>) -> Router {
    let api = Router::new()
        .merge(nova::routes())
        .merge(neutron::routes())
        .merge(cinder::routes())
        .merge(glance::routes())
        .merge(octavia::routes())
        .merge(octavia_tree::routes())
        .merge(neutron_routes::routes())
        .route_layer(middleware::from_fn_with_state(sim.clone(), require_token));
    Router::new()
        .merge(nova::discovery())
        .merge(neutron::discovery())
        .merge(cinder::discovery())
        .merge(glance::discovery())
        .merge(octavia::discovery())
        .merge(api)
        .fallback(not_found)
        .layer(middleware::from_fn(request_id))
        .with_state(sim)
}

async fn not_found(request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let service = Service::from_path(&path).unwrap_or(Service::Compute);
    ApiError::not_found(service, format!("The resource could not be found: {path}")).into_response()
}

/// A simulator serving on its own thread (with its own runtime, so it keeps answering whatever
/// the caller's runtime does) until dropped.
pub struct SimServer {
    handle: SimHandle,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SimServer {
    /// Serves a new simulator for `config` on `listener`.
    pub fn start(listener: StdTcpListener, config: SimConfig) -> std::io::Result<SimServer> {
        let sim = Sim::new(config);
        let app = router(sim.clone());
        listener.set_nonblocking(true)?;
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let (started, startup) = std::sync::mpsc::channel::<std::io::Result<()>>();
        let thread = std::thread::Builder::new()
            .name("stratus-openstack-sim".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = started.send(Err(err));
                        return;
                    }
                };
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(listener) => listener,
                        Err(err) => {
                            let _ = started.send(Err(err));
                            return;
                        }
                    };
                    let _ = started.send(Ok(()));
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(err) = result {
                                tracing::warn!("openstack sim stopped: {err}");
                            }
                        }
                        _ = stopped => {}
                    }
                });
            })?;
        startup
            .recv()
            .map_err(|_| std::io::Error::other("the simulator thread died while starting"))??;
        Ok(SimServer {
            handle: SimHandle::new(sim),
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The test-control handle.
    pub fn handle(&self) -> &SimHandle {
        &self.handle
    }

    /// Stops serving and joins the thread.
    pub fn stop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Serves a simulator on `listener` in the current runtime until the future is dropped (the
/// `testenv openstack-sim` process).
pub async fn serve(listener: tokio::net::TcpListener, config: SimConfig) -> std::io::Result<()> {
    axum::serve(listener, router(Sim::new(config))).await
}
