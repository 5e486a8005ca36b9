//! Webhook metrics with bounded labels: admissions by webhook and outcome (`allowed`,
//! `patched`, `denied`, `error`), and their duration by webhook.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

/// Labels of one admission.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// The webhook's upstream name (`mpod.elbv2.k8s.aws`, ...).
    pub webhook: &'static str,
    /// `allowed`, `patched`, `denied` or `error`.
    pub outcome: &'static str,
}

/// Labels of a duration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct WebhookLabels {
    /// The webhook's upstream name.
    pub webhook: &'static str,
}

/// Admission webhook metrics.
#[derive(Clone)]
pub struct WebhookMetrics {
    admissions: Family<AdmissionLabels, Counter>,
    duration: Family<WebhookLabels, Histogram>,
}

impl WebhookMetrics {
    /// Registers the metrics under `albc_webhook_`.
    pub fn register(registry: &mut Registry) -> WebhookMetrics {
        let m = WebhookMetrics {
            admissions: Family::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.0005, 2.0, 14))
            }),
        };
        let sub = registry.sub_registry_with_prefix("albc_webhook");
        sub.register(
            "admissions",
            "Admission requests by webhook and outcome",
            m.admissions.clone(),
        );
        sub.register(
            "admission_duration_seconds",
            "Time to answer one admission request",
            m.duration.clone(),
        );
        m
    }

    /// Records one admission.
    pub fn record(&self, webhook: &'static str, outcome: &'static str, took: Duration) {
        self.admissions
            .get_or_create(&AdmissionLabels { webhook, outcome })
            .inc();
        self.duration
            .get_or_create(&WebhookLabels { webhook })
            .observe(took.as_secs_f64());
    }
}
