//! The runtime-extension HTTPS server (controller-runtime's webhook server: `--webhook-port`,
//! certificate and key from `--webhook-cert-dir`, read again when they change, on the shared
//! `stratus-serving` listener): routes `POST` bodies to the hooks of [`super::hooks`], answers
//! from the pure [`super::answer`] functions, and carries out UpdateMachine's VM patch. A body
//! that is not the hook's request is an HTTP 400, which Cluster API reports as a failed call.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use serde::de::DeserializeOwned;
use serde::Serialize;
use stratus_serving::handler::{text, Body};
use stratus_serving::{HttpsListener, Respond, TlsPolicy, TlsSource};

use super::answer::{self, UpdateStep};
use super::hooks::{self, Hook, UpdateMachineResponse, FAILURE, SUCCESS};
use crate::metrics::Metrics;
use crate::parent::{Parent, ParentError};

/// Largest request read (a Machine, its DeckhouseMachine and bootstrap config, twice).
const MAX_BODY: usize = 4 << 20;
/// When Cluster API asks again after UpdateMachine patched a VM.
const RETRY_AFTER_PATCH: i32 = 5;

/// Where and how the server listens.
#[derive(Debug, Clone)]
pub struct ExtensionSettings {
    /// `--webhook-host` and `--webhook-port`.
    pub address: SocketAddr,
    /// The serving certificate (the cert dir's pair).
    pub tls: TlsSource,
    /// `--tls-min-version`, `--tls-cipher-suites`.
    pub tls_policy: TlsPolicy,
    /// `--enable-http2`.
    pub listen: stratus_serving::listener::ListenOptions,
}

/// A running extension server.
pub struct ExtensionServer {
    listener: HttpsListener,
}

impl ExtensionServer {
    /// Loads the certificate, binds and serves in the background.
    pub async fn start(
        settings: ExtensionSettings,
        parent: Parent,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<ExtensionServer> {
        let responder = Arc::new(Extension { parent, metrics });
        let listener = HttpsListener::start(
            settings.address,
            &settings.listen,
            &settings.tls,
            &settings.tls_policy,
            "--webhook-host/--webhook-port",
            responder,
        )
        .await
        .context("the runtime-extension server")?;
        tracing::info!(
            address = %listener.local_addr(),
            discovery = hooks::DISCOVERY_PATH,
            "serving the Cluster API runtime extension"
        );
        Ok(ExtensionServer { listener })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Stops accepting calls, waits up to `grace` for those in flight.
    pub async fn shutdown(self, grace: Duration) {
        self.listener.shutdown(grace).await;
    }
}

struct Extension {
    parent: Parent,
    metrics: Arc<Metrics>,
}

type Failed = (StatusCode, String);

fn json(value: &impl Serialize) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn decode<T: DeserializeOwned>(body: &[u8]) -> Result<T, Failed> {
    serde_json::from_slice(body).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            format!("the body is not this hook's request: {e}"),
        )
    })
}

impl Respond for Extension {
    async fn respond(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(hook) = hooks::route(request.uri().path()) else {
            return text(StatusCode::NOT_FOUND, "404 page not found\n");
        };
        if request.method() != Method::POST {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        let answer = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => self.answer(hook, &body.to_bytes()).await,
            Err(e) => Err((
                StatusCode::BAD_REQUEST,
                format!("cannot read the body (at most {MAX_BODY} bytes): {e}"),
            )),
        };
        match answer {
            Ok((response, status)) => {
                let outcome = if status == SUCCESS {
                    "success"
                } else {
                    "failure"
                };
                self.metrics.hook_call(hook.name(), outcome);
                response
            }
            Err((code, message)) => {
                self.metrics.hook_call(hook.name(), "error");
                tracing::warn!(hook = hook.name(), %code, message, "runtime-extension call failed");
                text(code, format!("{message}\n"))
            }
        }
    }
}

/// A failed parent call: a refusal (forbidden, invalid) fails the update with the parent's
/// message; an unreachable parent is asked again later.
fn parent_failed(e: ParentError) -> UpdateMachineResponse {
    match e {
        ParentError::Refused { .. } => UpdateMachineResponse::new(FAILURE, e.to_string(), 0),
        ParentError::Unavailable { .. } => {
            UpdateMachineResponse::new(SUCCESS, e.to_string(), RETRY_AFTER_PATCH)
        }
    }
}

impl Extension {
    async fn answer(&self, hook: Hook, body: &[u8]) -> Result<(Response<Body>, String), Failed> {
        match hook {
            Hook::Discovery => Ok((json(&hooks::discovery()), SUCCESS.into())),
            Hook::CanUpdateMachine => {
                let a = answer::can_update_machine(&decode(body)?);
                tracing::info!(hook = hook.name(), message = %a.message, "answered");
                Ok((json(&a), a.status.clone()))
            }
            Hook::CanUpdateMachineSet => {
                let a = answer::can_update_machine_set(&decode(body)?);
                tracing::info!(hook = hook.name(), message = %a.message, "answered");
                Ok((json(&a), a.status.clone()))
            }
            Hook::UpdateMachine => {
                let request: hooks::UpdateMachineRequest = decode(body)?;
                let a = self.update_machine(&request).await;
                tracing::info!(hook = hook.name(), status = %a.status, message = %a.message, "answered");
                Ok((json(&a), a.status.clone()))
            }
        }
    }

    async fn update_machine(&self, request: &hooks::UpdateMachineRequest) -> UpdateMachineResponse {
        let desired = match answer::desired_machine(
            &request.desired.machine,
            &request.desired.infrastructure_machine,
        ) {
            Ok(d) => d,
            Err(message) => return UpdateMachineResponse::new(FAILURE, message, 0),
        };
        let vm_name = crate::names::vm_name(&desired.name);
        let vm = match self.parent.vm(&vm_name).await {
            Ok(vm) => vm,
            Err(e) => return parent_failed(e),
        };
        match answer::update_step(&desired, vm.as_ref()) {
            UpdateStep::Done => UpdateMachineResponse::new(
                SUCCESS,
                format!("VirtualMachine {vm_name} has the desired run and live-migration policies"),
                0,
            ),
            UpdateStep::Failed(message) => UpdateMachineResponse::new(FAILURE, message, 0),
            UpdateStep::PatchVm(patch) => match self.parent.patch_vm(&vm_name, &patch).await {
                Ok(()) => UpdateMachineResponse::new(
                    SUCCESS,
                    format!("VirtualMachine {vm_name} patched; checking it again"),
                    RETRY_AFTER_PATCH,
                ),
                Err(e) => parent_failed(e),
            },
        }
    }
}
