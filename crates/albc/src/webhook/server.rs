//! The webhook HTTPS server (`--webhook-bind-port`, certificate `tls.crt`/`tls.key` in
//! `--webhook-cert-dir`, the shared `stratus-serving` listener): routes `POST` bodies to the
//! three webhooks and writes their AdmissionReview answers (the binding defaults look the target
//! group up in AWS, one or two DescribeTargetGroups, only when something is left out). Our own failures (a body that is not an
//! AdmissionReview, caches not filled in time) are HTTP errors, so the API server applies the
//! webhook's `failurePolicy`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use kube::core::admission::AdmissionResponse;
use kube::core::DynamicObject;
use stratus_serving::handler::{text, Body};
use stratus_serving::{HttpsListener, ReadyFlag, Respond, TlsSource};
use tokio::time::Instant;

use crate::crd::IngressClassParams;
use crate::crd::TargetGroupBinding;
use crate::ingress::class::{params_ref, ParamsRef};
use crate::webhook::caches::Caches;
use crate::webhook::defaults::{needs_defaults, TargetGroupFacts};
use crate::webhook::ingress::{class_refusal, class_to_check};
use crate::webhook::metrics::WebhookMetrics;
use crate::webhook::review::{
    decode, default_binding, mutate_pod, validate_binding, validate_ingress, Outcome,
};
use crate::webhook::{MUTATE_POD, MUTATE_TGB, VALIDATE_INGRESS, VALIDATE_TGB};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::core::admission::Operation;
use kube::{Api, ResourceExt};
use std::collections::BTreeMap;
use stratus_aws_api::elbv2::ElbV2Api;

/// Largest AdmissionReview read (an object and its old version, each at most etcd's 1.5 MiB).
const MAX_BODY: usize = 4 << 20;
/// How long an admission waits for the caches' first listing (the API server's default webhook
/// timeout is 10 s).
const CACHE_WAIT: Duration = Duration::from_secs(5);

/// What the server needs.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Where to listen.
    pub address: SocketAddr,
    /// `--webhook-cert-dir`.
    pub cert_dir: PathBuf,
    /// `--watch-namespace` (all when `None`).
    pub namespace: Option<String>,
    /// `--enable-pod-readiness-gate-inject`: off, pods are admitted unchanged.
    pub inject: bool,
}

/// A running webhook server.
pub struct WebhookServer {
    listener: HttpsListener,
}

impl WebhookServer {
    /// Loads the certificate, starts the caches (`filled` set once they are in) and listens.
    pub async fn start(
        client: &kube::Client,
        elbv2: ElbV2Api,
        settings: WebhookSettings,
        metrics: WebhookMetrics,
        filled: ReadyFlag,
    ) -> anyhow::Result<WebhookServer> {
        let tls = TlsSource::PairDir {
            dir: settings.cert_dir.clone(),
            flag: "--webhook-cert-dir",
        };
        let webhooks = Arc::new(Webhooks {
            caches: Caches::start(client, &settings.namespace, filled),
            inject: settings.inject,
            metrics,
            elbv2,
            client: client.clone(),
        });
        let listener = HttpsListener::start(
            settings.address,
            &stratus_serving::listener::ListenOptions::default(),
            &tls,
            &stratus_serving::TlsPolicy::default(),
            "--webhook-bind-port",
            webhooks,
        )
        .await
        .context("the admission webhooks (--webhook-bind-port=0 turns them off)")?;
        tracing::info!(address = %listener.local_addr(), paths = ?[MUTATE_POD.path, MUTATE_TGB.path, VALIDATE_TGB.path, VALIDATE_INGRESS.path], "serving the admission webhooks");
        Ok(WebhookServer { listener })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Stops accepting connections, waits up to `grace` for in-flight admissions.
    pub async fn shutdown(self, grace: Duration) {
        self.listener.shutdown(grace).await;
    }
}

struct Webhooks {
    caches: Caches,
    inject: bool,
    metrics: WebhookMetrics,
    elbv2: ElbV2Api,
    client: kube::Client,
}

impl Respond for Webhooks {
    async fn respond(&self, request: Request<Incoming>) -> Response<Body> {
        let path = request.uri().path();
        let webhook = [MUTATE_POD, MUTATE_TGB, VALIDATE_TGB, VALIDATE_INGRESS]
            .into_iter()
            .find(|w| w.path == path);
        let Some(webhook) = webhook else {
            return text(StatusCode::NOT_FOUND, "404 page not found\n");
        };
        if request.method() != Method::POST {
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            r.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("POST"));
            return r;
        }
        let started = Instant::now();
        let answer = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => self.answer(webhook.name, &body.to_bytes()).await,
            Err(e) => Err((
                StatusCode::BAD_REQUEST,
                format!("cannot read the body (at most {MAX_BODY} bytes): {e}"),
            )),
        };
        let (response, outcome) = match answer {
            Ok((answer, outcome)) => (json(answer), outcome.as_str()),
            Err((code, message)) => {
                tracing::warn!(webhook = webhook.name, %code, message, "admission request failed");
                (text(code, format!("{message}\n")), "error")
            }
        };
        self.metrics
            .record(webhook.name, outcome, started.elapsed());
        response
    }
}

type Answer = Result<(AdmissionResponse, Outcome), (StatusCode, String)>;

impl Webhooks {
    async fn answer(&self, webhook: &str, body: &[u8]) -> Answer {
        let bad = |e: String| (StatusCode::BAD_REQUEST, e);
        if webhook == VALIDATE_TGB.name {
            let request = decode::<TargetGroupBinding>(body).map_err(bad)?;
            return validate_binding(&request).map_err(bad);
        }
        if webhook == VALIDATE_INGRESS.name {
            let request = decode::<Ingress>(body).map_err(bad)?;
            let checked = match (&request.operation, &request.object) {
                (Operation::Create | Operation::Update, Some(new)) => {
                    class_to_check(new, request.old_object.as_ref()).map(|c| (new, c))
                }
                _ => None,
            };
            let refusal = match checked {
                Some((new, class)) => self.class_refusal(new, &class).await.map_err(|e| {
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("looking the class up: {e}"),
                    )
                })?,
                None => None,
            };
            return Ok(validate_ingress(&request, refusal));
        }
        if webhook == MUTATE_TGB.name {
            let request = decode::<TargetGroupBinding>(body).map_err(bad)?;
            let facts = match &request.object {
                Some(tgb) if needs_defaults(&tgb.spec) => {
                    Some(self.target_group(tgb).await.map_err(|e| {
                        (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("looking the target group up: {e}"),
                        )
                    })?)
                }
                _ => None,
            };
            return default_binding(&request, facts).map_err(bad);
        }
        let request = decode::<DynamicObject>(body).map_err(bad)?;
        if self.inject && !self.caches.filled(CACHE_WAIT).await {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "the TargetGroupBinding and Service caches are not filled yet".into(),
            ));
        }
        let namespace = request.namespace.clone().unwrap_or_default();
        let bindings = self.caches.bindings();
        mutate_pod(
            &request,
            self.inject,
            bindings.iter().map(AsRef::as_ref),
            |service| self.caches.selector_of(&namespace, service),
        )
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e))
    }
}

impl Webhooks {
    /// Why `ing` may not use the IngressClass `class` (read from the API server: a class made
    /// just before its Ingresses is found), if it may not.
    async fn class_refusal(
        &self,
        ing: &Ingress,
        class: &str,
    ) -> Result<Option<String>, kube::Error> {
        let ns = ing.namespace().unwrap_or_default();
        let none = BTreeMap::new();
        let Some(found) = Api::<IngressClass>::all(self.client.clone())
            .get_opt(class)
            .await?
        else {
            return Ok(class_refusal(class, false, None, None, None, &ns, &none));
        };
        let (broken, named) = match params_ref(class, &found) {
            ParamsRef::NotOurs | ParamsRef::NoParams => return Ok(None),
            ParamsRef::Broken(why) => (Some(why), None),
            ParamsRef::Named(p) => (None, Some(p)),
        };
        let params = match &named {
            Some(p) => {
                Api::<IngressClassParams>::all(self.client.clone())
                    .get_opt(p)
                    .await?
            }
            None => None,
        };
        let selects = params
            .as_ref()
            .is_some_and(|p| p.spec.namespace_selector.is_some());
        let labels = if selects {
            Api::<Namespace>::all(self.client.clone())
                .get(&ns)
                .await?
                .metadata
                .labels
                .unwrap_or_default()
        } else {
            none
        };
        Ok(class_refusal(
            class,
            true,
            broken,
            named.as_deref(),
            params.as_ref(),
            &ns,
            &labels,
        ))
    }

    /// The binding's target group by ARN, else by name; `Err` inside when it does not exist.
    async fn target_group(
        &self,
        tgb: &TargetGroupBinding,
    ) -> Result<Result<TargetGroupFacts, String>, stratus_cloud::CloudError> {
        let spec = &tgb.spec;
        let mut arn = spec.target_group_arn.trim().to_string();
        if arn.is_empty() {
            let name = spec.target_group_name.clone().unwrap_or_default();
            match self.elbv2.target_group(&name).await? {
                Some(g) => arn = g.arn,
                None => return Ok(Err(format!("no target group is named {name:?}"))),
            }
        }
        Ok(match self.elbv2.target_group_info(&arn).await? {
            Some(info) => Ok(TargetGroupFacts {
                target_type: info.target_type_or_default().to_string(),
                arn: info.arn,
                ip_address_type: info.ip_address_type,
                vpc_id: info.vpc_id,
            }),
            None => Err(format!("target group {arn} not found")),
        })
    }
}

fn json(answer: AdmissionResponse) -> Response<Body> {
    let body = serde_json::to_vec(&answer.into_review()).unwrap_or_default();
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}
