//! Webhook notifications as upstream sends them: a Go template (`--webhook-template` or
//! `--webhook-template-file`, upstream's variable names: `.EventID`, `.Kind`, `.Description`,
//! `.NodeName`, `.InstanceID`, `.StartTime`, `.Pods`, `.NodeLabels`, ...) rendered with the
//! event and the instance's metadata, POSTed with `--webhook-headers`, through
//! `--webhook-proxy` when set (absolute-form for http, CONNECT for https), 5 s timeout.

use std::collections::HashMap;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use gtmpl::{Func, FuncError, Value};
use http::{Request, Uri};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

use crate::imds::NodeMetadata;
use crate::interruption::{go_time_string, InterruptionEvent};

const TIMEOUT: Duration = Duration::from_secs(5);

/// Parses `--webhook-headers` (a JSON object of strings).
pub fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(text).map_err(|e| {
            format!(
                "not a JSON object of strings: {}",
                stratus_runtime::redact::json(&e)
            )
        })?;
    map.into_iter()
        .map(|(k, v)| match v {
            serde_json::Value::String(s) => Ok((k, s)),
            _ => Err(format!(
                "header {} has a value that is not a string",
                stratus_runtime::redact::bounded(&k, 64)
            )),
        })
        .collect()
}

/// Parses `--webhook-proxy` (`http://host:port`; `tcp://` accepted as upstream's docs show).
pub fn parse_proxy(text: &str) -> Result<Uri, String> {
    let uri: Uri = text
        .replacen("tcp://", "http://", 1)
        .parse()
        .map_err(|e| format!("not a URL: {e}"))?;
    if uri.authority().is_none() {
        return Err("the URL has no host".into());
    }
    Ok(uri)
}

/// A few of the sprig functions templates use.
fn sprig() -> Vec<(&'static str, Func)> {
    fn join(args: &[Value]) -> Result<Value, FuncError> {
        let (sep, list) = match args {
            [Value::String(sep), Value::Array(list)] => (sep, list),
            _ => return Err(FuncError::Generic("join SEP LIST".into())),
        };
        Ok(Value::String(
            list.iter()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(sep),
        ))
    }
    fn upper(args: &[Value]) -> Result<Value, FuncError> {
        Ok(Value::String(
            args.first()
                .map(|v| v.to_string())
                .unwrap_or_default()
                .to_uppercase(),
        ))
    }
    fn lower(args: &[Value]) -> Result<Value, FuncError> {
        Ok(Value::String(
            args.first()
                .map(|v| v.to_string())
                .unwrap_or_default()
                .to_lowercase(),
        ))
    }
    fn trim(args: &[Value]) -> Result<Value, FuncError> {
        Ok(Value::String(
            args.first()
                .map(|v| v.to_string())
                .unwrap_or_default()
                .trim()
                .to_owned(),
        ))
    }
    fn quote(args: &[Value]) -> Result<Value, FuncError> {
        Ok(Value::String(format!(
            "{:?}",
            args.first().map(|v| v.to_string()).unwrap_or_default()
        )))
    }
    vec![
        ("join", join as Func),
        ("upper", upper as Func),
        ("lower", lower as Func),
        ("trim", trim as Func),
        ("quote", quote as Func),
    ]
}

/// Every `{{` needs a later `}}` (the template engine does not terminate on an unclosed
/// action, so this is checked first).
fn actions_closed(template: &str) -> Result<(), String> {
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        match after.find("}}") {
            Some(close) => rest = &after[close + 2..],
            None => {
                return Err(format!(
                    "template: unclosed action at {:?}",
                    &rest[open..rest.len().min(open + 30)]
                ))
            }
        }
    }
    Ok(())
}

fn render(template: &str, data: Value) -> Result<String, String> {
    actions_closed(template)?;
    let mut t = gtmpl::Template::default();
    t.add_funcs(&sprig());
    t.parse(template).map_err(|e| format!("template: {e}"))?;
    t.render(&gtmpl::Context::from(data))
        .map_err(|e| format!("template: {e}"))
}

/// Checks that a template parses and renders with empty data, as upstream validates at start.
pub fn check_template(template: &str) -> Result<(), String> {
    render(template, template_data(&NodeMetadata::default(), None)).map(drop)
}

/// The template's data: upstream's merged struct of the instance metadata and the event
/// (the event's instance id and type win when set).
pub fn template_data(meta: &NodeMetadata, event: Option<&InterruptionEvent>) -> Value {
    let mut map: HashMap<String, Value> = HashMap::new();
    let s = |v: &str| Value::String(v.to_owned());
    map.insert("AccountId".into(), s(&meta.account_id));
    map.insert("InstanceLifeCycle".into(), s(&meta.instance_life_cycle));
    map.insert("PublicHostname".into(), s(&meta.public_hostname));
    map.insert("PublicIP".into(), s(&meta.public_ip));
    map.insert("LocalHostname".into(), s(&meta.local_hostname));
    map.insert("LocalIP".into(), s(&meta.local_ip));
    map.insert("AvailabilityZone".into(), s(&meta.availability_zone));
    map.insert("Region".into(), s(&meta.region));
    let zero = "0001-01-01 00:00:00 +0000 UTC";
    let (instance_id, instance_type) = match event {
        Some(e) if !e.instance_id.is_empty() || !e.instance_type.is_empty() => (
            if e.instance_id.is_empty() {
                meta.instance_id.clone()
            } else {
                e.instance_id.clone()
            },
            if e.instance_type.is_empty() {
                meta.instance_type.clone()
            } else {
                e.instance_type.clone()
            },
        ),
        _ => (meta.instance_id.clone(), meta.instance_type.clone()),
    };
    map.insert("InstanceID".into(), Value::String(instance_id));
    map.insert("InstanceType".into(), Value::String(instance_type));
    let e = event;
    let text = |f: fn(&InterruptionEvent) -> &str| s(e.map(f).unwrap_or(""));
    map.insert("EventID".into(), text(|e| &e.event_id));
    map.insert("Kind".into(), s(e.map(|e| e.kind.as_str()).unwrap_or("")));
    map.insert("Monitor".into(), s(e.map(|e| e.monitor).unwrap_or("")));
    map.insert("Description".into(), text(|e| &e.description));
    map.insert("State".into(), text(|e| &e.state));
    map.insert(
        "AutoScalingGroupName".into(),
        text(|e| &e.auto_scaling_group_name),
    );
    map.insert("NodeName".into(), text(|e| &e.node_name));
    map.insert("ProviderID".into(), text(|e| &e.provider_id));
    map.insert(
        "IsManaged".into(),
        Value::Bool(e.is_some_and(|e| e.is_managed)),
    );
    map.insert(
        "StartTime".into(),
        s(&e.map(|e| go_time_string(e.start_time))
            .unwrap_or_else(|| zero.into())),
    );
    map.insert(
        "EndTime".into(),
        s(&e.and_then(|e| e.end_time)
            .map(go_time_string)
            .unwrap_or_else(|| zero.into())),
    );
    map.insert(
        "NodeLabels".into(),
        Value::Map(
            e.map(|e| {
                e.node_labels
                    .iter()
                    .map(|(k, v)| (k.clone(), s(v)))
                    .collect()
            })
            .unwrap_or_default(),
        ),
    );
    map.insert(
        "Pods".into(),
        Value::Array(
            e.map(|e| e.pods.iter().map(|p| s(p)).collect())
                .unwrap_or_default(),
        ),
    );
    map.insert("NodeProcessed".into(), Value::Bool(false));
    map.insert("InProgress".into(), Value::Bool(e.is_some()));
    Value::Object(map)
}

/// A configured webhook.
#[derive(Clone)]
pub struct Webhook {
    url: Uri,
    headers: Vec<(String, String)>,
    template: String,
    proxy: Option<Uri>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL and headers may carry secrets.
        f.debug_struct("Webhook").finish_non_exhaustive()
    }
}

impl Webhook {
    /// From validated settings.
    pub fn new(url: &str, headers: &str, template: String, proxy: &str) -> Result<Webhook, String> {
        Ok(Webhook {
            url: url.parse().map_err(|e| format!("webhook url: {e}"))?,
            headers: parse_headers(headers)?,
            template,
            proxy: (!proxy.is_empty())
                .then(|| parse_proxy(proxy))
                .transpose()?,
        })
    }

    /// Renders and posts a notification; failures are logged (upstream does the same).
    pub async fn post(&self, meta: &NodeMetadata, event: &InterruptionEvent) {
        match self.send(meta, event).await {
            Ok(status) if (200..300).contains(&status) => {
                tracing::info!(event_id = %event.event_id, "webhook notification sent")
            }
            Ok(status) => {
                tracing::warn!(status, event_id = %event.event_id, "webhook answered a non-success status")
            }
            Err(e) => tracing::warn!(error = %e, event_id = %event.event_id, "webhook failed"),
        }
    }

    async fn send(&self, meta: &NodeMetadata, event: &InterruptionEvent) -> Result<u16, String> {
        let body = render(&self.template, template_data(meta, Some(event)))?;
        let mut builder = Request::post(self.url.clone());
        for (k, v) in &self.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let https = self.url.scheme_str() == Some("https");
        let response = match (&self.proxy, https) {
            (None, _) => {
                let connector = tls_connector(HttpConnector::new())?;
                let client = Client::builder(TokioExecutor::new()).build(connector);
                tokio::time::timeout(TIMEOUT, client.request(request)).await
            }
            (Some(proxy), true) => {
                let tunnel = hyper_util::client::legacy::connect::proxy::Tunnel::new(
                    proxy.clone(),
                    HttpConnector::new(),
                );
                let client = Client::builder(TokioExecutor::new()).build(tls_connector(tunnel)?);
                tokio::time::timeout(TIMEOUT, client.request(request)).await
            }
            (Some(proxy), false) => {
                let client =
                    Client::builder(TokioExecutor::new()).build(ForwardProxy(proxy.clone()));
                tokio::time::timeout(TIMEOUT, client.request(request)).await
            }
        }
        .map_err(|_| format!("no answer within {TIMEOUT:?}"))?
        .map_err(|e| {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            text
        })?;
        Ok(response.status().as_u16())
    }
}

fn tls_connector<C>(inner: C) -> Result<hyper_rustls::HttpsConnector<C>, String> {
    let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(provider)
        .map_err(|e| format!("TLS roots: {e}"))?;
    Ok(builder.https_or_http().enable_http1().wrap_connector(inner))
}

/// Connects every request to the proxy and marks the connection proxied, so that hyper sends
/// the absolute-form request line (`POST http://host/path HTTP/1.1`).
#[derive(Clone)]
struct ForwardProxy(Uri);

impl tower_service::Service<Uri> for ForwardProxy {
    type Response = Proxied;
    type Error = std::io::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Proxied, std::io::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let proxy = self.0.clone();
        Box::pin(async move {
            let host = proxy.host().unwrap_or("localhost").to_owned();
            let port = proxy.port_u16().unwrap_or(80);
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            Ok(Proxied(TokioIo::new(stream)))
        })
    }
}

/// A connection to a forward proxy.
struct Proxied(TokioIo<tokio::net::TcpStream>);

impl Connection for Proxied {
    fn connected(&self) -> Connected {
        Connected::new().proxy(true)
    }
}

impl hyper::rt::Read for Proxied {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Proxied {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interruption::Kind;

    #[test]
    fn default_template_renders_upstream_fields() {
        let meta = NodeMetadata {
            instance_id: "i-meta".into(),
            instance_type: "m5.large".into(),
            ..NodeMetadata::default()
        };
        let mut e = InterruptionEvent::new(
            "spot-itn-abc".into(),
            Kind::SpotItn,
            "SPOT_ITN_MONITOR",
            "2026-01-02T03:04:05Z".parse().unwrap(),
            "Spot ITN received.".into(),
        );
        e.node_name = "ip-10-0-0-1".into();
        e.pods = vec!["a".into(), "b".into()];
        let out = render(
            crate::config::DEFAULT_WEBHOOK_TEMPLATE,
            template_data(&meta, Some(&e)),
        )
        .unwrap();
        assert_eq!(
            out,
            r#"{"text":"[NTH][Instance Interruption] EventID: spot-itn-abc - Kind: SPOT_ITN - Instance: i-meta - Node: ip-10-0-0-1 - Description: Spot ITN received. - Start Time: 2026-01-02 03:04:05 +0000 UTC"}"#
        );
        let out = render(
            r#"{{ .InstanceType }} {{ join "," .Pods }} {{ range .Pods }}[{{ . }}]{{ end }}"#,
            template_data(&meta, Some(&e)),
        )
        .unwrap();
        assert_eq!(out, "m5.large a,b [a][b]");
    }

    #[test]
    fn validation() {
        assert!(check_template("{{ .EventID }}").is_ok());
        assert!(check_template("{{ .EventID ").is_err());
        assert!(parse_headers(r#"{"Content-type":"application/json"}"#).is_ok());
        assert!(parse_headers(r#"{"a":1}"#).is_err());
        assert!(parse_headers("nope").is_err());
        assert_eq!(
            parse_proxy("tcp://proxy:3128").unwrap().port_u16(),
            Some(3128)
        );
        assert!(parse_proxy("/nohost").is_err());
    }
}
