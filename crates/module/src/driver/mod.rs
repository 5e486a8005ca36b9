//! The thin driver: reads the inputs, runs the pure plans and makes only the writes they call
//! for — StorageClasses, the VolumeSnapshotClass where snapshots are served, the registration
//! Secrets, the spot-termination marks on AWS nodes. A part whose inputs are bad changes nothing
//! (the last good objects stay), is counted, logged, reported once in an Event naming the key and
//! kept as a `False` condition in the module's status ConfigMap until it works again.

mod objects;

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::ObjectReference;
use stratus_kube_kit::events::EventPublisher;
use tokio::sync::Mutex;

use crate::inputs::{self, Inputs};
use crate::metrics::Metrics;
use crate::settings;
use crate::status::{self, Condition};
use crate::storage_classes::{self, dvp::ParentClass};
use crate::{online_resize, registration, Cloud, PlanError};

/// What a part's failure was about (the metric's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The settings or the provider configuration are wrong.
    Settings,
    /// The inputs could not be read.
    Inputs,
    /// A write or read failed.
    Kubernetes,
    /// The cloud could not be asked (OpenStack's online-resize probe).
    Cloud,
}

impl Reason {
    /// The reason as the metric and the conditions say it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Settings => "settings",
            Reason::Inputs => "inputs",
            Reason::Kubernetes => "kubernetes",
            Reason::Cloud => "cloud",
        }
    }
}

/// A part's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which part.
    pub part: &'static str,
    /// Why, as the metric says it.
    pub reason: Reason,
    /// The message (names keys, never values).
    pub message: String,
}

/// The module controller's work for one cloud.
pub struct Driver {
    client: kube::Client,
    cloud: Cloud,
    values: Option<PathBuf>,
    metrics: Metrics,
    events: EventPublisher,
    reported: Mutex<BTreeMap<&'static str, String>>,
    /// OpenStack: Cinder's answer to the online-resize probe, once it gave one.
    online_resize: Mutex<Option<bool>>,
    /// The conditions as last written (read from the ConfigMap on the first pass).
    conditions: Mutex<Option<Vec<Condition>>>,
}

impl Driver {
    /// A driver for `cloud`'s module; `values` is the chart's values file.
    pub fn new(
        client: kube::Client,
        cloud: Cloud,
        values: Option<PathBuf>,
        metrics: Metrics,
    ) -> Driver {
        Driver {
            events: EventPublisher::new(client.clone(), "module-controller"),
            client,
            cloud,
            values,
            metrics,
            reported: Mutex::new(BTreeMap::new()),
            online_resize: Mutex::new(None),
            conditions: Mutex::new(None),
        }
    }

    /// One pass over every part; returns the failures (empty when all is in place).
    pub async fn reconcile(&self) -> Vec<Failure> {
        let inputs = match inputs::read(&self.client, self.cloud, self.values.as_deref()).await {
            Ok(i) => i,
            Err(e) => {
                let reason = match e {
                    inputs::InputError::Kube { .. } => Reason::Kubernetes,
                    inputs::InputError::Parse(_) => Reason::Inputs,
                };
                let failure = Failure {
                    part: "inputs",
                    reason,
                    message: e.to_string(),
                };
                self.report(&Inputs::default(), &failure).await;
                let outcome: Vec<(&str, status::Outcome<'_>)> = status::TYPES
                    .iter()
                    .map(|(part, _)| {
                        (
                            *part,
                            Some((failure.reason.as_str(), failure.message.as_str())),
                        )
                    })
                    .collect();
                self.publish_conditions(&outcome).await;
                return vec![failure];
            }
        };
        let mut failures = Vec::new();
        for (part, result) in [
            ("storage_classes", self.storage_classes(&inputs).await),
            ("registration", self.registration(&inputs).await),
            ("spot_marks", self.spot_marks().await),
        ] {
            match result {
                Ok(()) => {
                    self.metrics.reconciled(part);
                    self.reported.lock().await.remove(part);
                }
                Err((reason, message)) => {
                    let failure = Failure {
                        part,
                        reason,
                        message,
                    };
                    self.report(&inputs, &failure).await;
                    failures.push(failure);
                }
            }
        }
        let outcome: Vec<(&str, status::Outcome<'_>)> = status::TYPES
            .iter()
            .map(|(part, _)| {
                let failed = failures.iter().find(|f| f.part == *part);
                (
                    *part,
                    failed.map(|f| (f.reason.as_str(), f.message.as_str())),
                )
            })
            .collect();
        self.publish_conditions(&outcome).await;
        failures
    }

    /// Writes the conditions of `outcome` to the module's status ConfigMap when they differ
    /// from what it holds; a failure to read or write is logged and retried on the next pass.
    async fn publish_conditions(&self, outcome: &[(&str, status::Outcome<'_>)]) {
        let name = status::config_map_name(self.cloud.module());
        let mut known = self.conditions.lock().await;
        if known.is_none() {
            match objects::read_conditions(&self.client, &name).await {
                Ok(stored) => *known = Some(stored),
                Err(e) => {
                    tracing::warn!("reading the status ConfigMap {name}: {e}");
                    return;
                }
            }
        }
        let previous = known.clone().unwrap_or_default();
        let now = jiff::Timestamp::now()
            .round(jiff::Unit::Second)
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .to_string();
        let next = status::plan(&previous, outcome, &now);
        if next == previous {
            return;
        }
        match objects::write_conditions(&self.client, &self.metrics, &name, &next).await {
            Ok(()) => *known = Some(next),
            Err(e) => tracing::warn!("writing the status ConfigMap {name}: {e}"),
        }
    }

    async fn report(&self, inputs: &Inputs, failure: &Failure) {
        self.metrics.failed(failure.part, failure.reason.as_str());
        tracing::warn!(
            part = failure.part,
            reason = failure.reason.as_str(),
            "{}",
            failure.message
        );
        let mut reported = self.reported.lock().await;
        if reported.get(failure.part) == Some(&failure.message) {
            return;
        }
        reported.insert(failure.part, failure.message.clone());
        let reference = self.regarding(inputs, failure.part);
        self.events
            .publish_ref(
                &reference,
                true,
                "ModuleReconcileFailed",
                failure.part,
                failure.message.clone(),
            )
            .await;
    }

    /// What an Event is about: the ModuleConfig on Deckhouse for settings, the provider
    /// configuration Secret for the registration, else this controller's Pod.
    fn regarding(&self, inputs: &Inputs, part: &str) -> ObjectReference {
        if part == "registration" {
            let (namespace, name) = inputs::CLUSTER_CONFIGURATION;
            return ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Secret".into()),
                namespace: Some(namespace.into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            };
        }
        if inputs.settings_source.starts_with("moduleconfig") {
            return ObjectReference {
                api_version: Some("deckhouse.io/v1alpha1".into()),
                kind: Some("ModuleConfig".into()),
                name: Some(self.cloud.module().into()),
                ..ObjectReference::default()
            };
        }
        ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            namespace: Some(
                stratus_election::pod_namespace().unwrap_or_else(|| "kube-system".into()),
            ),
            name: Some(std::env::var("POD_NAME").unwrap_or_else(|_| "module-controller".into())),
            ..ObjectReference::default()
        }
    }

    async fn storage_classes(&self, inputs: &Inputs) -> Result<(), (Reason, String)> {
        let settings_error =
            |e: PlanError| (Reason::Settings, format!("{}: {e}", inputs.settings_source));
        let mut settings = settings::parse(inputs.settings.clone()).map_err(settings_error)?;
        let actual = objects::storage_classes(&self.client)
            .await
            .map_err(kube_error)?;
        let (wanted, module_default) = match self.cloud {
            Cloud::Aws => (
                storage_classes::plan_aws(&settings.storage_class).map_err(settings_error)?,
                None,
            ),
            Cloud::OpenStack => {
                if inputs.discovered && settings.supports_online_disk_resize.is_none() {
                    settings.supports_online_disk_resize = Some(self.online_resize(inputs).await?);
                }
                let types: Option<Vec<String>> = inputs.discovered.then(|| {
                    inputs.discovery["volumeTypes"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| t["name"].as_str().map(str::to_owned))
                        .collect()
                });
                let wanted = storage_classes::plan_openstack(&settings, types.as_deref(), &actual)
                    .map_err(settings_error)?;
                (wanted, None)
            }
            Cloud::Dvp => {
                let list = inputs
                    .discovery
                    .get("storageClasses")
                    .or_else(|| inputs.discovery.get("storageClassList"))
                    .cloned();
                let parents: Option<Vec<ParentClass>> = match list {
                    Some(v) if inputs.discovered => {
                        Some(serde_json::from_value(v).map_err(|e| {
                            (
                                Reason::Inputs,
                                format!(
                                    "discovery data storageClasses: {}",
                                    stratus_runtime::redact::json(&e)
                                ),
                            )
                        })?)
                    }
                    _ => None,
                };
                storage_classes::plan_dvp(&settings, parents.as_deref(), &actual)
                    .map_err(settings_error)?
            }
        };
        let module_default = module_default.or(settings.storage_class.default.clone());
        let rendered = storage_classes::render(
            self.cloud,
            wanted,
            inputs.global_default.as_deref(),
            module_default.as_deref(),
        );
        let changes = storage_classes::plan_changes(self.cloud, &rendered, &actual);
        objects::apply_storage_class_changes(&self.client, &self.metrics, &changes)
            .await
            .map_err(kube_error)?;
        objects::ensure_snapshot_class(&self.client, &self.metrics, self.cloud)
            .await
            .map_err(kube_error)
    }

    /// Whether Cinder extends attached volumes: probed once (with the registration's
    /// connection), then remembered; a failed probe fails the part and is tried again next pass.
    async fn online_resize(&self, inputs: &Inputs) -> Result<bool, (Reason, String)> {
        let mut known = self.online_resize.lock().await;
        if let Some(answer) = *known {
            return Ok(answer);
        }
        let connection =
            registration::openstack_connection(&inputs.cluster_configuration, &inputs.settings)
                .map_err(|e| (Reason::Settings, e.to_string()))?;
        let answer = online_resize::probe(&connection).await.map_err(|e| {
            (
                Reason::Cloud,
                format!("probing Cinder for online resize: {e}"),
            )
        })?;
        tracing::info!(
            supports_online_resize = answer,
            "Cinder probed: allowVolumeExpansion follows"
        );
        *known = Some(answer);
        Ok(answer)
    }

    async fn registration(&self, inputs: &Inputs) -> Result<(), (Reason, String)> {
        let sources = registration::Sources {
            cluster_configuration: &inputs.cluster_configuration,
            discovery: &inputs.discovery,
            settings: &inputs.settings,
        };
        if self.cloud != Cloud::Dvp && inputs.cluster_configuration.is_null() {
            let (ns, name) = inputs::CLUSTER_CONFIGURATION;
            return Err((
                Reason::Inputs,
                format!(
                    "secret {ns}/{name} key {}: missing; the registration needs it",
                    inputs::CLUSTER_CONFIGURATION_KEY
                ),
            ));
        }
        let data = registration::plan(self.cloud, &sources)
            .map_err(|e| (Reason::Settings, e.to_string()))?;
        for name in registration::secret_names(self.cloud) {
            objects::ensure_secret(
                &self.client,
                &self.metrics,
                &name,
                registration::labels(self.cloud),
                &data,
            )
            .await
            .map_err(kube_error)?;
        }
        Ok(())
    }

    async fn spot_marks(&self) -> Result<(), (Reason, String)> {
        if self.cloud != Cloud::Aws {
            return Ok(());
        }
        objects::mark_spot_nodes(&self.client, &self.metrics)
            .await
            .map_err(kube_error)
    }
}

fn kube_error(e: kube::Error) -> (Reason, String) {
    (Reason::Kubernetes, e.to_string())
}
