//! The Lease I/O of an election: acquire (blocking until leading), renew in the background,
//! report loss, release on shutdown.

use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use kube::Client;
use tokio::sync::{watch, Mutex};

use crate::decision::{decide, Decision, LeaseView, Observation};
use crate::metrics::LeaderStatus;

/// Settings of one election (the upstream `--leader-elect-*` flags).
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// Lease name (`--leader-elect-resource-name`).
    pub lease_name: String,
    /// Lease namespace (`--leader-elect-resource-namespace`).
    pub namespace: String,
    /// This candidate's identity (host name plus a random suffix).
    pub identity: String,
    /// `--leader-elect-lease-duration`: how long a silent holder keeps the lease.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long a leader keeps trying to renew before it quits.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`: how often candidates try and leaders renew.
    pub retry_period: Duration,
}

/// Why an election could not run.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    /// The timings or names break client-go's rules.
    #[error("invalid leader election settings: {0}")]
    Invalid(String),
}

impl ElectionConfig {
    /// Checks the timing rules client-go enforces.
    pub fn validate(&self) -> Result<(), ElectionError> {
        if self.lease_duration <= self.renew_deadline {
            return Err(ElectionError::Invalid(
                "--leader-elect-lease-duration must be greater than --leader-elect-renew-deadline"
                    .into(),
            ));
        }
        if self.renew_deadline.as_secs_f64() <= 1.2 * self.retry_period.as_secs_f64() {
            return Err(ElectionError::Invalid(
                "--leader-elect-renew-deadline must be greater than 1.2 × --leader-elect-retry-period"
                    .into(),
            ));
        }
        if self.identity.is_empty() || self.lease_name.is_empty() || self.namespace.is_empty() {
            return Err(ElectionError::Invalid(
                "lease name, namespace and identity must not be empty".into(),
            ));
        }
        Ok(())
    }
}

fn view(lease: &Lease) -> LeaseView {
    let spec = lease.spec.clone().unwrap_or_default();
    LeaseView {
        holder: spec.holder_identity,
        duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        transitions: spec.lease_transitions.unwrap_or(0),
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

struct Candidate {
    api: Api<Lease>,
    config: ElectionConfig,
    observed: Mutex<Option<Observation>>,
}

impl Candidate {
    /// One attempt to take or renew the lease; `Ok(true)` when we hold it afterwards.
    async fn try_acquire_or_renew(&self) -> Result<bool, kube::Error> {
        let cfg = &self.config;
        let current = self.api.get_opt(&cfg.lease_name).await?;
        let mut observed = self.observed.lock().await;
        let Some(mut lease) = current else {
            let mut lease = Lease::default();
            lease.metadata.name = Some(cfg.lease_name.clone());
            lease.metadata.namespace = Some(cfg.namespace.clone());
            lease.spec = Some(self.held_spec(0, true, None));
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    *observed = Some(Observation::update(None, view(&created), Instant::now()));
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let o = Observation::update(observed.as_ref(), view(&lease), Instant::now());
        let decision = decide(&cfg.identity, Some(&o), Instant::now());
        *observed = Some(o.clone());
        let taking = match decision {
            Decision::Wait => return Ok(false),
            Decision::Renew => false,
            Decision::Take | Decision::Create => true,
        };
        let transitions = o.lease.transitions + i32::from(taking);
        let acquired = lease.spec.as_ref().and_then(|s| s.acquire_time.clone());
        lease.spec = Some(self.held_spec(transitions, taking, acquired));
        match self
            .api
            .replace(&cfg.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                *observed = Some(Observation::update(None, view(&updated), Instant::now()));
                Ok(true)
            }
            // Someone else wrote first; look again next period.
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn held_spec(&self, transitions: i32, taking: bool, acquired: Option<MicroTime>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_duration.as_secs().max(1) as i32),
            acquire_time: if taking { Some(now()) } else { acquired },
            renew_time: Some(now()),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    /// Gives the lease up if we still hold it: empty holder, one-second duration.
    async fn release(&self) -> Result<(), kube::Error> {
        let cfg = &self.config;
        let Some(mut lease) = self.api.get_opt(&cfg.lease_name).await? else {
            return Ok(());
        };
        if view(&lease).holder.as_deref() != Some(cfg.identity.as_str()) {
            return Ok(());
        }
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(String::new());
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        spec.acquire_time = Some(now());
        self.api
            .replace(&cfg.lease_name, &PostParams::default(), &lease)
            .await?;
        tracing::info!(lease = %cfg.lease_name, "released the lease");
        Ok(())
    }
}

/// Held leadership: renewed in the background until lost or released.
pub struct Leadership {
    candidate: Arc<Candidate>,
    lost: watch::Receiver<bool>,
    renewer: tokio::task::JoinHandle<()>,
    status: LeaderStatus,
}

impl Leadership {
    /// Blocks until this candidate holds the lease, then keeps renewing it; `status` follows
    /// whether it leads.
    pub async fn acquire(
        client: Client,
        config: ElectionConfig,
        status: LeaderStatus,
    ) -> Result<Leadership, ElectionError> {
        config.validate()?;
        status.set_leading(false);
        let candidate = Arc::new(Candidate {
            api: Api::namespaced(client, &config.namespace),
            config: config.clone(),
            observed: Mutex::new(None),
        });
        tracing::info!(lease = %config.lease_name, identity = %config.identity, "waiting for the lease");
        loop {
            match candidate.try_acquire_or_renew().await {
                Ok(true) => {
                    tracing::info!(lease = %config.lease_name, identity = %config.identity, "acquired the lease");
                    break;
                }
                Ok(false) => {
                    tracing::debug!(lease = %config.lease_name, "lease held by another candidate")
                }
                Err(e) => {
                    tracing::warn!(lease = %config.lease_name, error = %e, "lease read or write failed")
                }
            }
            tokio::time::sleep(jittered(config.retry_period)).await;
        }
        status.set_leading(true);
        let (lost_tx, lost) = watch::channel(false);
        let renewer = tokio::spawn(renew(candidate.clone(), lost_tx, status.clone()));
        Ok(Leadership {
            candidate,
            lost,
            renewer,
            status,
        })
    }

    /// Resolves when the lease is lost (renewals failed for the renew deadline, or another
    /// candidate holds it now).
    pub async fn lost(&mut self) {
        let _ = self.lost.wait_for(|l| *l).await;
    }

    /// A signal that turns true when the lease is lost (for waiting without borrowing `self`).
    pub fn lost_signal(&self) -> watch::Receiver<bool> {
        self.lost.clone()
    }

    /// Stops renewing and gives the lease up, so a standby takes over at once.
    pub async fn release(self) {
        self.renewer.abort();
        self.status.set_leading(false);
        if let Err(e) = self.candidate.release().await {
            tracing::warn!(error = %e, "could not release the lease; it expires on its own");
        }
    }
}

/// client-go waits a retry period plus up to 20 % more between tries.
fn jittered(period: Duration) -> Duration {
    let extra = rand::random_range(0.0..0.2);
    period.mul_f64(1.0 + extra)
}

async fn renew(candidate: Arc<Candidate>, lost: watch::Sender<bool>, status: LeaderStatus) {
    let cfg = candidate.config.clone();
    let mut last_renewal = Instant::now();
    loop {
        tokio::time::sleep(cfg.retry_period).await;
        let attempt =
            tokio::time::timeout(cfg.renew_deadline, candidate.try_acquire_or_renew()).await;
        match attempt {
            Ok(Ok(true)) => last_renewal = Instant::now(),
            Ok(Ok(false)) => {
                let held = candidate
                    .observed
                    .lock()
                    .await
                    .as_ref()
                    .and_then(|o| o.lease.holder.clone());
                if held.as_deref() != Some(cfg.identity.as_str()) {
                    tracing::error!(lease = %cfg.lease_name, holder = ?held, "lost the lease to another candidate");
                    status.set_leading(false);
                    let _ = lost.send(true);
                    return;
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(lease = %cfg.lease_name, error = %e, "lease renewal failed")
            }
            Err(_) => tracing::warn!(lease = %cfg.lease_name, "lease renewal timed out"),
        }
        if last_renewal.elapsed() >= cfg.renew_deadline {
            tracing::error!(lease = %cfg.lease_name, "could not renew the lease within the renew deadline");
            status.set_leading(false);
            let _ = lost.send(true);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(lease: u64, renew: u64, retry: u64) -> ElectionConfig {
        ElectionConfig {
            lease_name: "l".into(),
            namespace: "kube-system".into(),
            identity: "me".into(),
            lease_duration: Duration::from_secs(lease),
            renew_deadline: Duration::from_secs(renew),
            retry_period: Duration::from_secs(retry),
        }
    }

    #[test]
    fn timing_rules_as_client_go() {
        assert!(cfg(15, 10, 2).validate().is_ok());
        assert!(cfg(10, 10, 2).validate().is_err());
        assert!(cfg(15, 2, 2).validate().is_err());
        let mut c = cfg(15, 10, 2);
        c.identity.clear();
        assert!(c.validate().is_err());
    }

    #[test]
    fn jitter_stays_within_twenty_percent() {
        for _ in 0..100 {
            let d = jittered(Duration::from_secs(10));
            assert!(d >= Duration::from_secs(10) && d <= Duration::from_secs(12));
        }
    }
}
