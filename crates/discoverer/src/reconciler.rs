//! The loop: the first run at once, then one every period. A run checks cloud conditions, then
//! writes instance types, discovery data and the orphaned-disk metrics (Deckhouse's order). Each
//! cloud step is retried with jittered backoff; when a step exhausts its retries `/healthz` turns
//! 503 until a later run succeeds.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stratus_runtime::backoff::Backoff;
use stratus_serving::{Readiness, ReadyFlag};

use crate::discoverer::{Discoverer, DiscoveryError};
use crate::metrics::{Metrics, Step};
use crate::outputs::{KubeError, Outputs};
use crate::plan::{catalog, orphaned_disks, WriteAction};

/// Whether the discoverer is healthy (`/healthz`): a liveness condition of the serving
/// readiness; clones share it.
#[derive(Debug, Clone)]
pub struct Health(ReadyFlag);

impl Default for Health {
    fn default() -> Self {
        Health::new(&Readiness::default())
    }
}

impl Health {
    /// The `cloud-discovery` liveness condition of `readiness`.
    pub fn new(readiness: &Readiness) -> Self {
        Health(readiness.add_liveness("cloud-discovery"))
    }

    /// Whether `/healthz` answers 200.
    pub fn is_ok(&self) -> bool {
        self.0.is_set()
    }

    /// Records a run's failed steps: healthy when none failed.
    pub fn record(&self, failed_steps: &[&'static str]) {
        if failed_steps.is_empty() {
            self.0.set();
        } else {
            self.0.unset(&format!(
                "cloud steps failed after their retries: {}",
                failed_steps.join(", ")
            ));
        }
    }
}

/// Retries of one cloud step (Deckhouse: 15 attempts, 3 s doubling to 30 s, jittered).
#[derive(Debug, Clone, Copy)]
pub struct RetrySettings {
    /// Attempts including the first.
    pub attempts: u32,
    /// Backoff between attempts.
    pub backoff: Backoff,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            attempts: 15,
            backoff: Backoff::new(Duration::from_secs(3), Duration::from_secs(30)),
        }
    }
}

/// What one run did, for logs and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Kubernetes writes made (creates and replaces).
    pub writes: u32,
    /// Steps that failed after their retries.
    pub failed_steps: Vec<&'static str>,
    /// Why each failed step failed (`step: error`), in the same order.
    pub errors: Vec<String>,
    /// Orphaned disks found.
    pub orphaned_disks: usize,
}

impl RunReport {
    fn fail(&mut self, step: &'static str, error: DiscoveryError) {
        self.failed_steps.push(step);
        self.errors.push(format!("{step}: {error}"));
    }
}

/// Runs the discoverer.
pub struct Reconciler {
    discoverer: Arc<dyn Discoverer>,
    outputs: Outputs,
    metrics: Arc<Metrics>,
    health: Health,
    retry: RetrySettings,
}

impl Reconciler {
    /// A reconciler of `discoverer` writing through `outputs`.
    pub fn new(
        discoverer: Arc<dyn Discoverer>,
        outputs: Outputs,
        metrics: Arc<Metrics>,
        health: Health,
        retry: RetrySettings,
    ) -> Reconciler {
        Reconciler {
            discoverer,
            outputs,
            metrics,
            health,
            retry,
        }
    }

    /// Runs at once, then every `period` — and at once when the backend reports a change —
    /// until `shutdown` completes.
    pub async fn run(&self, period: Duration, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = ticker.tick() => {}
                _ = self.discoverer.changed() => {
                    tracing::info!(cloud = self.discoverer.cloud(), "the cloud changed: running now");
                    ticker.reset();
                }
            }
            tokio::select! {
                _ = &mut shutdown => return,
                report = self.run_once() => {
                    tracing::info!(cloud = self.discoverer.cloud(), writes = report.writes,
                        failed = ?report.failed_steps, orphaned_disks = report.orphaned_disks,
                        "discovery run done");
                }
            }
        }
    }

    /// One run; health reflects it afterwards.
    pub async fn run_once(&self) -> RunReport {
        let mut report = RunReport::default();
        let mut kube_failed = false;
        let d = self.discoverer.clone();
        d.begin_run();

        match self
            .retried("cloud_conditions", || d.check_cloud_conditions())
            .await
        {
            Ok(conditions) => {
                self.metrics.conditions(&conditions);
                self.count(
                    self.outputs.conditions(&conditions).await,
                    &mut report,
                    &mut kube_failed,
                );
            }
            Err(e) => report.fail("cloud_conditions", e),
        }

        let types = self
            .retried(Step::InstanceTypes.label(), || d.instance_types())
            .await;
        self.metrics
            .cloud_request(Step::InstanceTypes, types.is_err());
        match types {
            Ok(Some(types)) => {
                let types = catalog(types);
                self.count(
                    self.outputs.catalog(&types).await,
                    &mut report,
                    &mut kube_failed,
                );
            }
            Ok(None) => {}
            Err(e) => report.fail(Step::InstanceTypes.label(), e),
        }

        match self.outputs.stored_discovery_data().await {
            Ok(stored) => {
                let data = self
                    .retried(Step::DiscoveryData.label(), || d.discovery_data(&stored))
                    .await;
                self.metrics
                    .cloud_request(Step::DiscoveryData, data.is_err());
                match data {
                    Ok(Some(data)) => self.count(
                        self.outputs.discovery_secret(data).await,
                        &mut report,
                        &mut kube_failed,
                    ),
                    Ok(None) => {}
                    Err(e) => report.fail(Step::DiscoveryData.label(), e),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the stored discovery data");
                kube_failed = true;
            }
        }

        let disks = self
            .retried(Step::DisksMeta.label(), || d.disks_meta())
            .await;
        self.metrics.cloud_request(Step::DisksMeta, disks.is_err());
        match disks {
            Ok(disks) => match self.outputs.pv_names().await {
                Ok(pvs) => {
                    let orphaned = orphaned_disks(&disks, &pvs);
                    report.orphaned_disks = orphaned.len();
                    self.metrics.orphaned_disks(&orphaned);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot list persistent volumes");
                    kube_failed = true;
                }
            },
            Err(e) => report.fail(Step::DisksMeta.label(), e),
        }

        self.metrics.update_resource(kube_failed);
        self.health.record(&report.failed_steps);
        self.metrics
            .run_done(kube_failed || !report.failed_steps.is_empty());
        report
    }

    fn count(
        &self,
        result: Result<WriteAction, KubeError>,
        report: &mut RunReport,
        kube_failed: &mut bool,
    ) {
        match result {
            Ok(WriteAction::Skip) => {}
            Ok(action) => {
                tracing::debug!(?action, "output written");
                report.writes += 1;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot update an output");
                *kube_failed = true;
            }
        }
    }

    /// Runs `step` until it succeeds, fails for good, or its attempts are spent; logs why.
    async fn retried<T, F, Fut>(&self, step: &'static str, mut call: F) -> Result<T, DiscoveryError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, DiscoveryError>>,
    {
        let mut attempt = 1;
        loop {
            match call().await {
                Ok(v) => return Ok(v),
                Err(e) if e.is_retryable() && attempt < self.retry.attempts => {
                    let delay = self.retry.backoff.jittered(attempt);
                    tracing::warn!(step, attempt, error = %e, ?delay, "cloud step failed, retrying");
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                }
                Err(e) => {
                    tracing::error!(step, attempt, error = %e, "cloud step failed");
                    return Err(e);
                }
            }
        }
    }
}
