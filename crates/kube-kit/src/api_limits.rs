//! `--kube-api-qps`, `--kube-api-burst` and `--kube-api-content-type`, as Kubernetes controller
//! managers take them: a token bucket in front of every request of a client (each client its
//! own bucket, as client-go), and the wire format.
//!
//! Unlike client-go, no limit applies unless `--kube-api-qps` is given: Stratus's controllers
//! write only what differs and the API server's priority and fairness protects it; a user who
//! wants upstream's throttle (20 QPS, burst 30 for the cloud-controller-manager) passes it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Args;
use futures::future::BoxFuture;
use tokio::time::Instant;

/// The Kubernetes client's request budget and wire format.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeApiArgs {
    /// Requests per second to the API server (a negative value: no limit; 0: client-go's
    /// default of 5) [default: no limit].
    #[arg(long = "kube-api-qps", allow_negative_numbers = true)]
    pub kube_api_qps: Option<f32>,
    /// Requests allowed in a burst above --kube-api-qps [default: 30 with --kube-api-qps].
    #[arg(long = "kube-api-burst")]
    pub kube_api_burst: Option<u32>,
    /// Content type of requests: application/json, or application/vnd.kubernetes.protobuf
    /// (accepted; Stratus's client speaks JSON, which every API server serves).
    #[arg(long = "kube-api-content-type", default_value = PROTOBUF, value_parser = parse_content_type)]
    pub kube_api_content_type: String,
}

/// client-go's protobuf content type, upstream's default for controller managers.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// JSON.
pub const JSON: &str = "application/json";

fn parse_content_type(value: &str) -> Result<String, String> {
    match value {
        JSON | PROTOBUF => Ok(value.to_string()),
        _ => Err(format!(
            "not a content type the API server takes for every resource ({JSON} or {PROTOBUF})"
        )),
    }
}

/// A token bucket: `qps` tokens a second, at most `burst` saved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Tokens a second.
    pub qps: f64,
    /// Most tokens held.
    pub burst: u32,
}

impl KubeApiArgs {
    /// The limit the flags ask for; `None`: no limit.
    pub fn rate_limit(&self) -> Option<RateLimit> {
        let qps = self.kube_api_qps?;
        if qps < 0.0 {
            return None;
        }
        let (qps, default_burst) = if qps == 0.0 { (5.0, 10) } else { (qps, 30) };
        Some(RateLimit {
            qps: f64::from(qps),
            burst: self.kube_api_burst.unwrap_or(default_burst).max(1),
        })
    }

    /// `client` with the flags' limit in front of it (itself when there is none).
    pub fn limit(&self, client: kube::Client) -> kube::Client {
        if self.kube_api_content_type == PROTOBUF {
            tracing::debug!("--kube-api-content-type={PROTOBUF}: requests are sent as JSON");
        }
        match self.rate_limit() {
            Some(limit) => limited(client, limit),
            None => client,
        }
    }
}

/// `client` behind a token bucket of its own.
pub fn limited(client: kube::Client, limit: RateLimit) -> kube::Client {
    let namespace = client.default_namespace().to_string();
    let bucket = Arc::new(TokenBucket::new(limit, Instant::now()));
    let service = tower::service_fn(
        move |request: http::Request<kube::client::Body>| -> BoxFuture<'static, _> {
            let client = client.clone();
            let bucket = bucket.clone();
            Box::pin(async move {
                bucket.acquire().await;
                client.send(request).await
            })
        },
    );
    kube::Client::new(service, namespace)
}

/// The bucket's state: tokens held at `at`.
#[derive(Debug)]
pub struct TokenBucket {
    limit: RateLimit,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limit: RateLimit, now: Instant) -> Self {
        TokenBucket {
            limit,
            state: Mutex::new((f64::from(limit.burst), now)),
        }
    }

    /// Takes a token at `now`: how long the caller must wait for it (zero when one was held).
    /// The token is taken either way, so waiting callers queue in arrival order.
    pub fn take(&self, now: Instant) -> Duration {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at) = *state;
        let elapsed = now.saturating_duration_since(at).as_secs_f64();
        let tokens = (tokens + elapsed * self.limit.qps).min(f64::from(self.limit.burst)) - 1.0;
        *state = (tokens, now);
        if tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-tokens / self.limit.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.take(Instant::now());
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        api: KubeApiArgs,
    }

    fn parse(args: &[&str]) -> Result<KubeApiArgs, clap::Error> {
        Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|f| f.api)
    }

    #[test]
    fn flags() {
        assert_eq!(parse(&[]).unwrap().rate_limit(), None);
        assert_eq!(
            parse(&["--kube-api-qps=20"]).unwrap().rate_limit(),
            Some(RateLimit {
                qps: 20.0,
                burst: 30
            })
        );
        assert_eq!(
            parse(&["--kube-api-qps=50", "--kube-api-burst=100"])
                .unwrap()
                .rate_limit(),
            Some(RateLimit {
                qps: 50.0,
                burst: 100
            })
        );
        assert_eq!(
            parse(&["--kube-api-qps=0"]).unwrap().rate_limit(),
            Some(RateLimit {
                qps: 5.0,
                burst: 10
            })
        );
        assert_eq!(parse(&["--kube-api-qps=-1"]).unwrap().rate_limit(), None);
        for ok in [JSON, PROTOBUF] {
            let a = parse(&[&format!("--kube-api-content-type={ok}")]).unwrap();
            assert_eq!(a.kube_api_content_type, ok);
        }
        let e = parse(&["--kube-api-content-type=text/plain"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--kube-api-content-type"), "{e}");
        assert!(parse(&["--kube-api-qps=fast"]).is_err());
    }

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(
            RateLimit {
                qps: 10.0,
                burst: 3,
            },
            t0,
        );
        for _ in 0..3 {
            assert_eq!(bucket.take(t0), Duration::ZERO);
        }
        // The fourth waits one token's time, the fifth two.
        assert_eq!(bucket.take(t0), Duration::from_millis(100));
        assert_eq!(bucket.take(t0), Duration::from_millis(200));
        // A second later the debt is paid and tokens have built up again (capped at the burst).
        let later = t0 + Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(bucket.take(later), Duration::ZERO);
        }
        assert!(bucket.take(later) > Duration::ZERO);
    }
}
