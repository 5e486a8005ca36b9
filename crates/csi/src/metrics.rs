//! Per-operation gRPC metrics of the CSI services: calls by method and gRPC code, and latency by
//! method (labels bounded: method names are constants, codes a fixed enum).

use std::future::Future;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::time::Instant;
use tonic::{Response, Status};

/// Labels of one finished call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// The CSI method (`CreateVolume`…).
    pub method: String,
    /// The gRPC code (`Ok`, `Aborted`…).
    pub code: String,
}

/// Labels naming a method.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    /// The CSI method.
    pub method: String,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

/// The CSI operation metrics.
#[derive(Debug)]
pub struct CsiMetrics {
    /// Finished calls.
    pub calls: Family<CallLabels, Counter>,
    /// Call latency.
    pub duration: Family<MethodLabels, Histogram, fn() -> Histogram>,
}

impl Default for CsiMetrics {
    fn default() -> Self {
        Self {
            calls: Family::default(),
            duration: Family::new_with_constructor(latency),
        }
    }
}

impl CsiMetrics {
    /// Creates the metrics and registers them.
    pub fn register(registry: &mut Registry) -> CsiMetrics {
        let m = CsiMetrics::default();
        registry.register(
            "csi_operations",
            "CSI gRPC calls by method and gRPC code",
            m.calls.clone(),
        );
        registry.register(
            "csi_operation_duration_seconds",
            "CSI gRPC call latency by method",
            m.duration.clone(),
        );
        m
    }

    /// Runs one call, recording its code and latency and logging failures.
    pub async fn observe<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<Response<T>, Status> {
        let start = Instant::now();
        let result = call.await;
        let code = match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        };
        if let Err(status) = &result {
            tracing::info!(method, code = ?status.code(), message = status.message(), "csi call failed");
        } else {
            tracing::debug!(method, "csi call succeeded");
        }
        self.calls
            .get_or_create(&CallLabels {
                method: method.to_string(),
                code: format!("{code:?}"),
            })
            .inc();
        self.duration
            .get_or_create(&MethodLabels {
                method: method.to_string(),
            })
            .observe(start.elapsed().as_secs_f64());
        result
    }
}
