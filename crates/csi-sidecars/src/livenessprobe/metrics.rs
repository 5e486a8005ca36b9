//! The livenessprobe's metrics as csi-lib-utils names them:
//! `csi_sidecar_operations_seconds{driver_name, method_name, grpc_status_code}`, one observation
//! per gRPC call the probe makes to the driver (labels bounded: one driver, two methods, the
//! fixed set of codes).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// csi-lib-utils' buckets, in seconds.
const BUCKETS: [f64; 13] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 25.0, 50.0, 120.0, 300.0, 600.0,
];

/// The full gRPC method names, as the labels carry them.
pub const PROBE: &str = "/csi.v1.Identity/Probe";
/// See [`PROBE`].
pub const GET_PLUGIN_INFO: &str = "/csi.v1.Identity/GetPluginInfo";

/// Labels of one call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    driver_name: String,
    method_name: String,
    grpc_status_code: String,
}

fn histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The registry and the one family in it.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    operations: Family<OperationLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let operations: Family<OperationLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(histogram);
        let mut registry = Registry::default();
        registry.register(
            "csi_sidecar_operations_seconds",
            "Container Storage Interface operation duration with gRPC error code status total",
            operations.clone(),
        );
        Self {
            registry,
            operations,
        }
    }
}

impl Metrics {
    /// Records one call.
    pub fn observe(&self, driver: &str, method: &str, code: tonic::Code, seconds: f64) {
        self.operations
            .get_or_create(&OperationLabels {
                driver_name: driver.to_string(),
                method_name: method.to_string(),
                grpc_status_code: go_code_name(code).to_string(),
            })
            .observe(seconds);
    }

    /// The Prometheus text of the registry.
    pub fn render(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// A gRPC code as Go's `codes.Code.String()` spells it (`OK`, `Canceled`, `DeadlineExceeded`).
pub fn go_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "Canceled",
        Unknown => "Unknown",
        InvalidArgument => "InvalidArgument",
        DeadlineExceeded => "DeadlineExceeded",
        NotFound => "NotFound",
        AlreadyExists => "AlreadyExists",
        PermissionDenied => "PermissionDenied",
        ResourceExhausted => "ResourceExhausted",
        FailedPrecondition => "FailedPrecondition",
        Aborted => "Aborted",
        OutOfRange => "OutOfRange",
        Unimplemented => "Unimplemented",
        Internal => "Internal",
        Unavailable => "Unavailable",
        DataLoss => "DataLoss",
        Unauthenticated => "Unauthenticated",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_rendered_with_go_code_names() {
        let m = Metrics::default();
        m.observe("ebs.csi.aws.com", PROBE, tonic::Code::Ok, 0.01);
        m.observe("ebs.csi.aws.com", PROBE, tonic::Code::Cancelled, 0.2);
        let text = m.render().unwrap();
        assert!(text.contains(r#"csi_sidecar_operations_seconds_count{driver_name="ebs.csi.aws.com",method_name="/csi.v1.Identity/Probe",grpc_status_code="OK"} 1"#), "{text}");
        assert!(text.contains(r#"grpc_status_code="Canceled""#), "{text}");
    }
}
