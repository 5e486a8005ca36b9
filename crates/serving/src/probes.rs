//! The plain-HTTP probe endpoint of a controller-runtime manager (`--health-probe-bind-address`,
//! `:8081` by default in kubebuilder's layout, which Deckhouse's capdvp template probes):
//! `/healthz` and `/livez` from the liveness conditions, `/readyz` from the readiness ones, no
//! authentication (probes carry none) and nothing else served.

use std::net::SocketAddr;

use std::sync::Arc;

use http::{Response, StatusCode};

use crate::handler::{text, Body, Endpoint};
use crate::plain_http::{Answer, PlainHttpServer};
use crate::readiness::Readiness;

/// The answer to `path`.
pub fn answer(readiness: &Readiness, path: &str) -> Response<Body> {
    let report = match Endpoint::of(path) {
        Endpoint::Alive => readiness.liveness(),
        Endpoint::Ready => readiness.report(false),
        Endpoint::Metrics | Endpoint::NotFound => {
            return text(StatusCode::NOT_FOUND, "not found\n");
        }
    };
    let code = if report.ready {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    text(code, report.body)
}

/// A running probe endpoint; dropping it stops it.
pub struct ProbeServer(PlainHttpServer);

impl ProbeServer {
    /// Binds `address` (errors name `flag`) and answers probes in the background.
    pub async fn start(
        address: SocketAddr,
        flag: &str,
        readiness: Readiness,
    ) -> anyhow::Result<ProbeServer> {
        let answer: Answer = Arc::new(move |path: &str| answer(&readiness, path));
        let server = PlainHttpServer::start(address, flag, answer).await?;
        tracing::info!(address = %server.local_addr(), "serving probes over HTTP: /healthz, /livez, /readyz");
        Ok(ProbeServer(server))
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.local_addr()
    }
}

/// A controller-runtime bind address flag's value: an address, or off (`0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

/// A controller-runtime bind address: `:8081` (every interface), `host:port`, or `0` (off).
pub fn parse_bind_address(value: &str) -> Result<BindAddress, String> {
    let value = value.trim();
    if value == "0" {
        return Ok(BindAddress(None));
    }
    let with_host = if let Some(port) = value.strip_prefix(':') {
        format!("0.0.0.0:{port}")
    } else {
        value.to_string()
    };
    with_host
        .parse::<SocketAddr>()
        .map(|a| BindAddress(Some(a)))
        .map_err(|_| "not an address (`:8081`, `127.0.0.1:8081`, or `0` to turn it off)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_as_controller_runtime() {
        assert_eq!(
            parse_bind_address(":8081").unwrap().0,
            Some("0.0.0.0:8081".parse().unwrap())
        );
        assert_eq!(
            parse_bind_address("127.0.0.1:9440").unwrap().0,
            Some("127.0.0.1:9440".parse().unwrap())
        );
        assert_eq!(parse_bind_address("0").unwrap().0, None);
        assert!(parse_bind_address("eight").is_err());
    }

    #[test]
    fn probes_follow_the_conditions() {
        let readiness = Readiness::default();
        let synced = readiness.add("informer-sync", "not listed yet");
        assert_eq!(answer(&readiness, "/healthz").status(), StatusCode::OK);
        assert_eq!(
            answer(&readiness, "/readyz").status(),
            StatusCode::INTERNAL_SERVER_ERROR
        );
        synced.set();
        assert_eq!(answer(&readiness, "/readyz").status(), StatusCode::OK);
        assert_eq!(
            answer(&readiness, "/metrics").status(),
            StatusCode::NOT_FOUND
        );
    }
}
