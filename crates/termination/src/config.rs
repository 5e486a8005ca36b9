//! Command-line flags and environment variables, named and defaulted exactly as upstream
//! aws-node-termination-handler's (`pkg/config/config.go`), plus their validation.
//!
//! Compatibility rules kept from the Go `flag` package and upstream's `getEnv`: a flag wins over
//! its environment variable; an empty environment variable counts as unset; booleans accept
//! `1 t T TRUE true True 0 f F FALSE false False`, and a bare `--flag` means true; `-flag` with one
//! dash works like `--flag`. Every problem is reported at once ([`Options::validate`]).

use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser};

/// Upstream's default webhook template.
pub const DEFAULT_WEBHOOK_TEMPLATE: &str = r#"{"text":"[NTH][Instance Interruption] EventID: {{ .EventID }} - Kind: {{ .Kind }} - Instance: {{ .InstanceID }} - Node: {{ .NodeName }} - Description: {{ .Description }} - Start Time: {{ .StartTime }}"}"#;
/// Upstream's default webhook headers.
pub const DEFAULT_WEBHOOK_HEADERS: &str = r#"{"Content-type":"application/json"}"#;
/// The managed tag both `--managed-tag` and the deprecated `--managed-asg-tag` default to.
pub const DEFAULT_MANAGED_TAG: &str = "aws-node-termination-handler/managed";

/// Parses a boolean as Go's `strconv.ParseBool` does.
pub fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!("{other:?} is not a boolean (true or false)")),
    }
}

/// All settings of the handler. Field docs are the upstream flag descriptions.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "node-termination-handler",
    version = stratus_runtime::build_info::version(),
    about = "Cordons and drains Kubernetes nodes before EC2 interrupts, retires or terminates them (drop-in for aws-node-termination-handler)"
)]
pub struct Options {
    /// If true, only log if a node would be drained.
    #[arg(long, env = "DRY_RUN", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub dry_run: bool,
    /// The kubernetes node name.
    #[arg(long, env = "NODE_NAME", default_value = "")]
    pub node_name: String,
    /// The kubernetes pod name.
    #[arg(long, env = "POD_NAME", default_value = "")]
    pub pod_name: String,
    /// The kubernetes pod namespace.
    #[arg(long, env = "NAMESPACE", default_value = "")]
    pub pod_namespace: String,
    /// The URL of EC2 instance metadata. This shouldn't need to be changed unless you are testing.
    #[arg(
        long,
        env = "INSTANCE_METADATA_URL",
        default_value = "http://169.254.169.254"
    )]
    pub metadata_url: String,
    /// If true, ignore daemon sets and drain other pods when a spot interrupt is received.
    #[arg(long, env = "IGNORE_DAEMON_SETS", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub ignore_daemon_sets: bool,
    /// If true, drain pods that use local node storage in emptyDir (their data is lost).
    #[arg(long, env = "DELETE_LOCAL_DATA", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub delete_local_data: bool,
    /// [ADVANCED] The k8s service host to send api calls to.
    #[arg(long, env = "KUBERNETES_SERVICE_HOST", default_value = "")]
    pub kubernetes_service_host: String,
    /// [ADVANCED] The k8s service port to send api calls to.
    #[arg(long, env = "KUBERNETES_SERVICE_PORT", default_value = "")]
    pub kubernetes_service_port: String,
    /// [DEPRECATED] Use pod-termination-grace-period instead.
    #[arg(
        long,
        env = "GRACE_PERIOD",
        default_value = "-1",
        allow_negative_numbers = true
    )]
    pub grace_period: i64,
    /// Seconds given to each pod to terminate gracefully; negative: the pod's own.
    #[arg(
        long,
        env = "POD_TERMINATION_GRACE_PERIOD",
        default_value = "-1",
        allow_negative_numbers = true
    )]
    pub pod_termination_grace_period: i64,
    /// Seconds given to each node to terminate gracefully: drains start this long before an
    /// event, and a drain without a known deadline gets this long.
    #[arg(
        long,
        env = "NODE_TERMINATION_GRACE_PERIOD",
        default_value = "120",
        allow_negative_numbers = true
    )]
    pub node_termination_grace_period: i64,
    /// Kubernetes API requests per second.
    #[arg(long, env = "KUBE_API_QPS", default_value = "5")]
    pub kube_api_qps: f64,
    /// Kubernetes API request burst.
    #[arg(long, env = "KUBE_API_BURST", default_value = "10")]
    pub kube_api_burst: u32,
    /// If specified, posts event data to URL upon instance interruption action.
    #[arg(long, env = "WEBHOOK_URL", default_value = "")]
    pub webhook_url: String,
    /// If specified, uses the HTTP(S) proxy to send webhooks.
    #[arg(long, env = "WEBHOOK_PROXY", default_value = "")]
    pub webhook_proxy: String,
    /// If specified, replaces the default webhook headers (a JSON object).
    #[arg(long, env = "WEBHOOK_HEADERS", default_value = DEFAULT_WEBHOOK_HEADERS)]
    pub webhook_headers: String,
    /// If specified, replaces the default webhook message template (Go template syntax).
    #[arg(long, env = "WEBHOOK_TEMPLATE", default_value = DEFAULT_WEBHOOK_TEMPLATE)]
    pub webhook_template: String,
    /// If specified, replaces the default webhook message template with the file's content.
    #[arg(long, env = "WEBHOOK_TEMPLATE_FILE", default_value = "")]
    pub webhook_template_file: String,
    /// If true, drain nodes before the maintenance window starts for an EC2 scheduled event.
    #[arg(long, env = "ENABLE_SCHEDULED_EVENT_DRAINING", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_scheduled_event_draining: bool,
    /// If true, drain nodes when the spot interruption termination notice is received.
    #[arg(long, env = "ENABLE_SPOT_INTERRUPTION_DRAINING", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_spot_interruption_draining: bool,
    /// If true, drain nodes when the ASG target lifecycle state Terminated is received.
    #[arg(long, env = "ENABLE_ASG_LIFECYCLE_DRAINING", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_asg_lifecycle_draining: bool,
    /// If true, drain nodes when an SQS termination event is received (queue mode).
    #[arg(long, env = "ENABLE_SQS_TERMINATION_DRAINING", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_sqs_termination_draining: bool,
    /// If true, cordon nodes when the rebalance recommendation notice is received.
    #[arg(long, env = "ENABLE_REBALANCE_MONITORING", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_rebalance_monitoring: bool,
    /// If true, drain nodes when the rebalance recommendation notice is received.
    #[arg(long, env = "ENABLE_REBALANCE_DRAINING", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_rebalance_draining: bool,
    /// [DEPRECATED] Use check-tag-before-draining instead.
    #[arg(long = "check-asg-tag-before-draining", env = "CHECK_ASG_TAG_BEFORE_DRAINING", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub check_asg_tag_before_draining: bool,
    /// If true, check that the instance carries the managed tag before draining the node.
    #[arg(long, env = "CHECK_TAG_BEFORE_DRAINING", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub check_tag_before_draining: bool,
    /// [DEPRECATED] Use managed-tag instead.
    #[arg(long = "managed-asg-tag", env = "MANAGED_ASG_TAG", default_value = DEFAULT_MANAGED_TAG)]
    pub managed_asg_tag: String,
    /// The tag to check instances for before taking action.
    #[arg(long, env = "MANAGED_TAG", default_value = DEFAULT_MANAGED_TAG)]
    pub managed_tag: String,
    /// If true, find the node by spec.providerID instead of the instance's PrivateDnsName.
    #[arg(long, env = "USE_PROVIDER_ID", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub use_provider_id: bool,
    /// The number of times to try requesting metadata.
    #[arg(
        long,
        env = "METADATA_TRIES",
        default_value = "3",
        allow_negative_numbers = true
    )]
    pub metadata_tries: i64,
    /// If true, nodes will be cordoned but not drained when an interruption event occurs.
    #[arg(long, env = "CORDON_ONLY", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub cordon_only: bool,
    /// If true, nodes will be tainted when an interruption event occurs.
    #[arg(long, env = "TAINT_NODE", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub taint_node: bool,
    /// The effect of the taints (NoSchedule, PreferNoSchedule, NoExecute).
    #[arg(long, env = "TAINT_EFFECT", default_value = "NoSchedule")]
    pub taint_effect: String,
    /// If true, nodes get the out-of-service taint after they are drained.
    #[arg(long, env = "ENABLE_OUT_OF_SERVICE_TAINT", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_out_of_service_taint: bool,
    /// If true, nodes are labelled for exclusion from load balancers when an event occurs.
    #[arg(long, env = "EXCLUDE_FROM_LOAD_BALANCERS", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub exclude_from_load_balancers: bool,
    /// If true, use JSON-formatted logs instead of human readable logs.
    #[arg(long, env = "JSON_LOGGING", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub json_logging: bool,
    /// Sets the log level (INFO, DEBUG, or ERROR).
    #[arg(long, env = "LOG_LEVEL", default_value = "INFO")]
    pub log_level: String,
    /// Sets the log format version (1 or 2; version 2 gives queue events specific Event reasons).
    #[arg(
        long,
        env = "LOG_FORMAT_VERSION",
        default_value = "1",
        allow_negative_numbers = true
    )]
    pub log_format_version: i64,
    /// If specified, read system uptime from the file path (useful for testing).
    #[arg(long, env = "UPTIME_FROM_FILE", default_value = "")]
    pub uptime_from_file: String,
    /// If true, serve Prometheus metrics at /metrics.
    #[arg(long, env = "ENABLE_PROMETHEUS_SERVER", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_prometheus_server: bool,
    /// The port of the Prometheus metrics server.
    #[arg(long, env = "PROMETHEUS_SERVER_PORT", default_value = "9092")]
    pub prometheus_server_port: u16,
    /// If true, serve the liveness probe.
    #[arg(long, env = "ENABLE_PROBES_SERVER", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub enable_probes_server: bool,
    /// The port of the probes server.
    #[arg(long, env = "PROBES_SERVER_PORT", default_value = "8080")]
    pub probes_server_port: u16,
    /// The liveness probe path.
    #[arg(long, env = "PROBES_SERVER_ENDPOINT", default_value = "/healthz")]
    pub probes_server_endpoint: String,
    /// If true, Kubernetes Events are emitted for interruptions and node actions.
    #[arg(long, env = "EMIT_KUBERNETES_EVENTS", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub emit_kubernetes_events: bool,
    /// Comma-separated key=value annotations added to every emitted Event.
    #[arg(long, env = "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS", default_value = "")]
    pub kubernetes_events_extra_annotations: String,
    /// The AWS region for AWS API calls (queue mode; else from IMDS or the queue URL).
    #[arg(long, env = "AWS_REGION", default_value = "")]
    pub aws_region: String,
    /// [testing] The AWS endpoint for API calls.
    #[arg(long, env = "AWS_ENDPOINT", default_value = "")]
    pub aws_endpoint: String,
    /// The SQS queue URL to listen on (queue mode).
    #[arg(long, env = "QUEUE_URL", default_value = "")]
    pub queue_url: String,
    /// The number of events handled at once.
    #[arg(
        long,
        env = "WORKERS",
        default_value = "10",
        allow_negative_numbers = true
    )]
    pub workers: i64,
    /// Delay in seconds before completing the ASG lifecycle action after a drain (-1: none).
    #[arg(
        long,
        env = "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS",
        default_value = "-1",
        allow_negative_numbers = true
    )]
    pub complete_lifecycle_action_delay_seconds: i64,
    /// If true, delete SQS messages whose node is not found.
    #[arg(long, env = "DELETE_SQS_MSG_IF_NODE_NOT_FOUND", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub delete_sqs_msg_if_node_not_found: bool,
    /// If true, list pods from the apiserver's cache (resourceVersion=0) instead of a quorum read.
    #[arg(long, env = "USE_APISERVER_CACHE", default_value = "false", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub use_apiserver_cache: bool,
    /// Seconds between ASG lifecycle heartbeats (30-3600; -1: none).
    #[arg(
        long,
        env = "HEARTBEAT_INTERVAL",
        default_value = "-1",
        allow_negative_numbers = true
    )]
    pub heartbeat_interval: i64,
    /// Seconds over which heartbeats are sent (60-172800; default 172800 with an interval).
    #[arg(
        long,
        env = "HEARTBEAT_UNTIL",
        default_value = "-1",
        allow_negative_numbers = true
    )]
    pub heartbeat_until: i64,
    /// Visibility timeout of received SQS messages in seconds (1-119).
    #[arg(
        long,
        env = "SQS_MSG_VISIBILITY_TIMEOUT_SEC",
        default_value = "20",
        allow_negative_numbers = true
    )]
    pub sqs_msg_visibility_timeout_sec: i64,
    /// [Stratus] How often IMDS is polled (Go duration). The notice-to-cordon latency is at most
    /// this plus one API round trip.
    #[arg(long, env = "IMDS_POLL_INTERVAL", default_value = "500ms", value_parser = stratus_runtime::duration::parse_go_duration)]
    pub imds_poll_interval: Duration,
    /// [Stratus] Queue mode: elect a leader on a Lease so that only one replica works.
    #[arg(long, env = "LEADER_ELECT", default_value = "true", value_parser = go_bool, num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_elect: bool,
    /// [Stratus] Queue mode: name of the leader-election Lease (in the pod's namespace).
    #[arg(
        long,
        env = "LEADER_ELECT_LEASE_NAME",
        default_value = "aws-node-termination-handler"
    )]
    pub leader_elect_lease_name: String,
}

/// Which of the two exclusive modes runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// DaemonSet: polls the node's instance metadata.
    Imds,
    /// Deployment: long-polls an SQS queue fed by EventBridge.
    Queue,
}

/// A bad setting, named after its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {message}")]
pub struct Problem {
    /// The flag's long name without the leading dashes, e.g. `"taint-effect"`.
    pub flag: &'static str,
    /// What is wrong with its value.
    pub message: String,
}

/// The settings could not be used; every problem is listed.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// clap's own output: a usage error, or the `--help`/`--version` text to print as is.
    #[error("{0}")]
    Parse(String),
    /// The arguments parsed but some values are invalid; every problem is listed.
    #[error("invalid settings:\n  {}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n  "))]
    Invalid(Vec<Problem>),
}

/// Go's `flag` package takes `-name` like `--name`; clap does not. Single-dash long flags are
/// rewritten (short forms do not exist upstream).
pub fn normalize_args(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen_terminator = false;
    args.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            if i == 0 || seen_terminator {
                return arg;
            }
            if arg == "--" {
                seen_terminator = true;
                return arg;
            }
            match arg.strip_prefix('-') {
                Some(rest) if !rest.starts_with('-') && rest.len() > 1 => format!("--{rest}"),
                _ => arg,
            }
        })
        .collect()
}

impl Options {
    /// Parses `args` (with the program name first) and the environment, applies upstream's
    /// deprecated-flag rules, and validates.
    pub fn parse_from_env(args: impl IntoIterator<Item = String>) -> Result<Options, ConfigError> {
        let options = Options::parse_args(args)?;
        options.validate().map_err(ConfigError::Invalid)?;
        Ok(options)
    }

    /// Parses `args` and the environment and applies upstream's deprecated-flag rules, without
    /// [`Options::validate`] (the process validates at start, with its other checks).
    pub fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Options, ConfigError> {
        // Upstream treats an empty environment variable as unset; clap would take "" as a value.
        let empty: Vec<String> = Options::command()
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .filter(|name| std::env::var_os(name).is_some_and(|v| v.is_empty()))
            .collect();
        let mut command = Options::command();
        for name in &empty {
            // Re-declare the env binding under a name that is never set.
            let ids: Vec<String> = command
                .get_arguments()
                .filter(|a| a.get_env().is_some_and(|e| e.to_string_lossy() == *name))
                .map(|a| a.get_id().to_string())
                .collect();
            for id in ids {
                command = command.mut_arg(id, |a| a.env("STRATUS_NTH_UNSET_ENV_PLACEHOLDER"));
            }
        }
        let matches = command
            .try_get_matches_from(normalize_args(args))
            .map_err(|e| ConfigError::Parse(e.to_string()))?;
        let mut options =
            Options::from_arg_matches(&matches).map_err(|e| ConfigError::Parse(e.to_string()))?;
        options.apply_deprecations(&matches);
        Ok(options)
    }

    /// Upstream's precedence between deprecated flags and their replacements: the old one
    /// counts only when the new one was not given.
    fn apply_deprecations(&mut self, matches: &ArgMatches) {
        let given = |id: &str| {
            matches
                .value_source(id)
                .is_some_and(|s| s != ValueSource::DefaultValue)
        };
        if given("grace_period") && !given("pod_termination_grace_period") {
            tracing::warn!("deprecated --grace-period given; use --pod-termination-grace-period");
            self.pod_termination_grace_period = self.grace_period;
        }
        if given("managed_asg_tag") && !given("managed_tag") {
            tracing::warn!("deprecated --managed-asg-tag given; use --managed-tag");
            self.managed_tag = self.managed_asg_tag.clone();
        }
        if given("check_asg_tag_before_draining") && !given("check_tag_before_draining") {
            tracing::warn!(
                "deprecated --check-asg-tag-before-draining given; use --check-tag-before-draining"
            );
            self.check_tag_before_draining = self.check_asg_tag_before_draining;
        }
        // Upstream: an interval without an end heartbeats for the 48 h maximum.
        if self.heartbeat_interval != -1 && self.heartbeat_until == -1 {
            self.heartbeat_until = 172_800;
        }
    }

    /// The mode selected by `--enable-sqs-termination-draining`.
    pub fn mode(&self) -> Mode {
        if self.enable_sqs_termination_draining {
            Mode::Queue
        } else {
            Mode::Imds
        }
    }

    /// Every problem with the settings, or nothing.
    pub fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut problems = Vec::new();
        let mut bad = |flag: &'static str, message: String| {
            problems.push(Problem { flag, message });
        };
        if !["info", "debug", "error"].contains(&self.log_level.to_ascii_lowercase().as_str()) {
            bad(
                "log-level",
                format!("{:?} is not one of info, debug, error", self.log_level),
            );
        }
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&self.taint_effect.as_str()) {
            bad(
                "taint-effect",
                format!(
                    "{:?} is not one of NoSchedule, PreferNoSchedule, NoExecute",
                    self.taint_effect
                ),
            );
        }
        if self.workers < 1 {
            bad("workers", format!("{} must be at least 1", self.workers));
        }
        if self.metadata_tries < 1 {
            bad(
                "metadata-tries",
                format!("{} must be at least 1", self.metadata_tries),
            );
        }
        if self.node_termination_grace_period < 0 {
            bad(
                "node-termination-grace-period",
                format!(
                    "{} must not be negative",
                    self.node_termination_grace_period
                ),
            );
        }
        if !(self.kube_api_qps > 0.0 && self.kube_api_qps.is_finite()) {
            bad(
                "kube-api-qps",
                format!("{} must be a positive number", self.kube_api_qps),
            );
        }
        if self.kube_api_burst < 1 {
            bad("kube-api-burst", "must be at least 1".into());
        }
        if self.imds_poll_interval < Duration::from_millis(100) {
            bad(
                "imds-poll-interval",
                format!("{:?} is below the 100ms minimum", self.imds_poll_interval),
            );
        }
        if !(1..=119).contains(&self.sqs_msg_visibility_timeout_sec) {
            bad(
                "sqs-msg-visibility-timeout-sec",
                format!(
                    "{} is outside 1-119 seconds",
                    self.sqs_msg_visibility_timeout_sec
                ),
            );
        }
        match self.mode() {
            Mode::Imds => {
                if self.node_name.is_empty() {
                    bad(
                        "node-name",
                        "required in IMDS mode (set --node-name or NODE_NAME)".into(),
                    );
                }
                if self.heartbeat_interval != -1 || self.heartbeat_until != -1 {
                    bad(
                        "heartbeat-interval",
                        "heartbeats are only supported in queue mode (--enable-sqs-termination-draining)"
                            .into(),
                    );
                }
            }
            Mode::Queue => {
                if self.queue_url.is_empty() {
                    bad(
                        "queue-url",
                        "required in queue mode (set --queue-url or QUEUE_URL)".into(),
                    );
                }
                if self.aws_region.is_empty()
                    && !self.queue_url.is_empty()
                    && self.region_from_queue_url().is_none()
                {
                    bad(
                        "aws-region",
                        "required in queue mode when --queue-url names no region (set --aws-region or AWS_REGION)"
                            .into(),
                    );
                }
            }
        }
        if self.heartbeat_interval != -1 && !(30..=3600).contains(&self.heartbeat_interval) {
            bad(
                "heartbeat-interval",
                format!("{} is outside 30-3600 seconds", self.heartbeat_interval),
            );
        }
        if self.heartbeat_until != -1 && !(60..=172_800).contains(&self.heartbeat_until) {
            bad(
                "heartbeat-until",
                format!("{} is outside 60-172800 seconds", self.heartbeat_until),
            );
        }
        if self.heartbeat_interval == -1 && self.heartbeat_until != -1 {
            bad("heartbeat-until", "needs --heartbeat-interval".into());
        }
        if self.heartbeat_interval != -1
            && self.heartbeat_until != -1
            && self.heartbeat_interval > self.heartbeat_until
        {
            bad(
                "heartbeat-interval",
                "must not be greater than --heartbeat-until".into(),
            );
        }
        if let Err(e) =
            crate::events::parse_extra_annotations(&self.kubernetes_events_extra_annotations)
        {
            bad("kubernetes-events-extra-annotations", e);
        }
        if !self.webhook_url.is_empty() {
            if let Err(e) = crate::webhook::parse_headers(&self.webhook_headers) {
                bad("webhook-headers", e);
            }
            match self.webhook_template_text() {
                Ok(text) => {
                    if let Err(e) = crate::webhook::check_template(&text) {
                        // The template may carry a token: its text is never quoted.
                        bad("webhook-template", stratus_runtime::redact::scrub(&e));
                    }
                }
                Err(e) => bad("webhook-template-file", e),
            }
            if let Err(e) = self.webhook_url.parse::<http::Uri>() {
                // Never quoted: a webhook URL often carries its token.
                bad("webhook-url", format!("not a URL: {e}"));
            }
            if !self.webhook_proxy.is_empty() {
                if let Err(e) = crate::webhook::parse_proxy(&self.webhook_proxy) {
                    bad("webhook-proxy", e);
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The webhook template: the file's content when `--webhook-template-file` is set.
    pub fn webhook_template_text(&self) -> Result<String, String> {
        if self.webhook_template_file.is_empty() {
            return Ok(self.webhook_template.clone());
        }
        std::fs::read_to_string(&self.webhook_template_file)
            .map_err(|e| format!("reading {}: {e}", self.webhook_template_file))
    }

    /// `--pod-termination-grace-period` as an override (None: each pod's own).
    pub fn pod_grace_override(&self) -> Option<i64> {
        (self.pod_termination_grace_period >= 0).then_some(self.pod_termination_grace_period)
    }

    /// `--node-termination-grace-period`.
    pub fn node_grace(&self) -> Duration {
        Duration::from_secs(self.node_termination_grace_period.max(0) as u64)
    }

    /// The region: the flag, else the region named in the queue URL.
    pub fn region_from_queue_url(&self) -> Option<String> {
        // https://sqs.us-east-1.amazonaws.com/123456789012/queue
        let host = self.queue_url.split("://").nth(1)?.split('/').next()?;
        let mut parts = host.split('.');
        (parts.next() == Some("sqs"))
            .then(|| parts.next())
            .flatten()
            .filter(|r| r.contains('-'))
            .map(str::to_owned)
    }

    /// A summary for the start-up log, without the webhook URL, headers or template (they may
    /// carry secrets, as upstream notes).
    pub fn summary(&self) -> String {
        format!(
            "mode={:?} dry-run={} node-name={} metadata-url={} delete-local-data={} ignore-daemon-sets={} \
             pod-termination-grace-period={} node-termination-grace-period={} \
             enable-scheduled-event-draining={} enable-spot-interruption-draining={} \
             enable-asg-lifecycle-draining={} enable-rebalance-monitoring={} enable-rebalance-draining={} \
             cordon-only={} taint-node={} taint-effect={} enable-out-of-service-taint={} \
             exclude-from-load-balancers={} webhook-url={} queue-url={} workers={} use-provider-id={} \
             check-tag-before-draining={} managed-tag={} delete-sqs-msg-if-node-not-found={} \
             heartbeat-interval={} heartbeat-until={} imds-poll-interval={:?}",
            self.mode(),
            self.dry_run,
            self.node_name,
            self.metadata_url,
            self.delete_local_data,
            self.ignore_daemon_sets,
            self.pod_termination_grace_period,
            self.node_termination_grace_period,
            self.enable_scheduled_event_draining,
            self.enable_spot_interruption_draining,
            self.enable_asg_lifecycle_draining,
            self.enable_rebalance_monitoring,
            self.enable_rebalance_draining,
            self.cordon_only,
            self.taint_node,
            self.taint_effect,
            self.enable_out_of_service_taint,
            self.exclude_from_load_balancers,
            if self.webhook_url.is_empty() { "" } else { "<provided-not-displayed>" },
            self.queue_url,
            self.workers,
            self.use_provider_id,
            self.check_tag_before_draining,
            self.managed_tag,
            self.delete_sqs_msg_if_node_not_found,
            self.heartbeat_interval,
            self.heartbeat_until,
            self.imds_poll_interval,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, ConfigError> {
        let mut all = vec!["nth".to_string()];
        all.extend(args.iter().map(|s| s.to_string()));
        Options::parse_from_env(all)
    }

    #[test]
    fn defaults_match_upstream() {
        let o = parse(&["--node-name=n1"]).unwrap();
        assert!(!o.dry_run);
        assert!(o.ignore_daemon_sets && o.delete_local_data);
        assert_eq!(o.pod_termination_grace_period, -1);
        assert_eq!(o.node_termination_grace_period, 120);
        assert!(o.enable_scheduled_event_draining && o.enable_spot_interruption_draining);
        assert!(!o.enable_asg_lifecycle_draining && !o.enable_sqs_termination_draining);
        assert!(!o.enable_rebalance_monitoring && !o.enable_rebalance_draining);
        assert!(o.check_tag_before_draining);
        assert_eq!(o.managed_tag, DEFAULT_MANAGED_TAG);
        assert_eq!(o.taint_effect, "NoSchedule");
        assert_eq!(o.workers, 10);
        assert_eq!(o.prometheus_server_port, 9092);
        assert_eq!(o.probes_server_port, 8080);
        assert_eq!(o.probes_server_endpoint, "/healthz");
        assert_eq!(o.sqs_msg_visibility_timeout_sec, 20);
        assert_eq!(o.metadata_tries, 3);
        assert_eq!(o.kube_api_qps, 5.0);
        assert_eq!(o.kube_api_burst, 10);
        assert_eq!(o.metadata_url, "http://169.254.169.254");
        assert_eq!(o.webhook_headers, DEFAULT_WEBHOOK_HEADERS);
        assert_eq!(o.mode(), Mode::Imds);
    }

    #[test]
    fn go_style_booleans_and_single_dash() {
        let o = parse(&[
            "-node-name",
            "n1",
            "--dry-run",
            "-cordon-only=T",
            "--taint-node=0",
        ])
        .unwrap();
        assert!(o.dry_run && o.cordon_only && !o.taint_node);
        assert_eq!(o.node_name, "n1");
        assert!(parse(&["--node-name=n", "--dry-run=maybe"]).is_err());
    }

    #[test]
    fn deprecated_flags_apply_only_alone() {
        let o = parse(&["--node-name=n", "--grace-period=30"]).unwrap();
        assert_eq!(o.pod_termination_grace_period, 30);
        let o = parse(&[
            "--node-name=n",
            "--grace-period=30",
            "--pod-termination-grace-period=5",
        ])
        .unwrap();
        assert_eq!(o.pod_termination_grace_period, 5);
        let o = parse(&["--node-name=n", "--managed-asg-tag=old"]).unwrap();
        assert_eq!(o.managed_tag, "old");
    }

    #[test]
    fn every_problem_is_listed() {
        let err = parse(&[
            "--log-level=loud",
            "--taint-effect=Never",
            "--workers=0",
            "--heartbeat-interval=10",
        ])
        .unwrap_err()
        .to_string();
        for flag in [
            "--log-level",
            "--taint-effect",
            "--workers",
            "--node-name",
            "--heartbeat-interval",
        ] {
            assert!(err.contains(flag), "{flag} missing in {err}");
        }
    }

    #[test]
    fn queue_mode_rules() {
        let err = parse(&["--enable-sqs-termination-draining"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--queue-url"), "{err}");
        let o = parse(&[
            "--enable-sqs-termination-draining=true",
            "--queue-url=https://sqs.eu-west-1.amazonaws.com/1/q",
            "--heartbeat-interval=30",
        ])
        .unwrap();
        assert_eq!(o.mode(), Mode::Queue);
        assert_eq!(o.heartbeat_until, 172_800);
        assert_eq!(o.region_from_queue_url().as_deref(), Some("eu-west-1"));
        let err = parse(&[
            "--enable-sqs-termination-draining",
            "--queue-url=q",
            "--heartbeat-interval=100",
            "--heartbeat-until=60",
            "--sqs-msg-visibility-timeout-sec=120",
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("must not be greater"), "{err}");
        assert!(err.contains("--sqs-msg-visibility-timeout-sec"), "{err}");
        // The region: the flag (an empty one is unset, whatever AWS_REGION says), else the queue
        // URL's; neither is a problem named before anything starts.
        let err = parse(&[
            "--enable-sqs-termination-draining",
            "--queue-url=https://queue.example/1/q",
            "--aws-region=",
        ])
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("--aws-region: required in queue mode"),
            "{err}"
        );
        parse(&[
            "--enable-sqs-termination-draining",
            "--queue-url=https://queue.example/1/q",
            "--aws-region=eu-west-1",
        ])
        .unwrap();
    }

    /// Every upstream environment variable and flag (v1.25 `config.go` plus the 2026 additions)
    /// exists under the same name.
    #[test]
    fn upstream_names_exist() {
        const ENV: &[&str] = &[
            "INSTANCE_METADATA_URL",
            "DRY_RUN",
            "NODE_NAME",
            "POD_NAME",
            "NAMESPACE",
            "KUBERNETES_SERVICE_HOST",
            "KUBERNETES_SERVICE_PORT",
            "DELETE_LOCAL_DATA",
            "IGNORE_DAEMON_SETS",
            "GRACE_PERIOD",
            "POD_TERMINATION_GRACE_PERIOD",
            "NODE_TERMINATION_GRACE_PERIOD",
            "KUBE_API_QPS",
            "KUBE_API_BURST",
            "WEBHOOK_URL",
            "WEBHOOK_PROXY",
            "WEBHOOK_HEADERS",
            "WEBHOOK_TEMPLATE",
            "WEBHOOK_TEMPLATE_FILE",
            "ENABLE_SCHEDULED_EVENT_DRAINING",
            "ENABLE_SPOT_INTERRUPTION_DRAINING",
            "ENABLE_ASG_LIFECYCLE_DRAINING",
            "ENABLE_SQS_TERMINATION_DRAINING",
            "ENABLE_REBALANCE_MONITORING",
            "ENABLE_REBALANCE_DRAINING",
            "CHECK_ASG_TAG_BEFORE_DRAINING",
            "CHECK_TAG_BEFORE_DRAINING",
            "MANAGED_ASG_TAG",
            "MANAGED_TAG",
            "USE_PROVIDER_ID",
            "METADATA_TRIES",
            "ENABLE_OUT_OF_SERVICE_TAINT",
            "JSON_LOGGING",
            "LOG_LEVEL",
            "LOG_FORMAT_VERSION",
            "UPTIME_FROM_FILE",
            "WORKERS",
            "ENABLE_PROMETHEUS_SERVER",
            "PROMETHEUS_SERVER_PORT",
            "ENABLE_PROBES_SERVER",
            "PROBES_SERVER_PORT",
            "PROBES_SERVER_ENDPOINT",
            "EMIT_KUBERNETES_EVENTS",
            "KUBERNETES_EVENTS_EXTRA_ANNOTATIONS",
            "AWS_REGION",
            "AWS_ENDPOINT",
            "QUEUE_URL",
            "COMPLETE_LIFECYCLE_ACTION_DELAY_SECONDS",
            "DELETE_SQS_MSG_IF_NODE_NOT_FOUND",
            "HEARTBEAT_INTERVAL",
            "HEARTBEAT_UNTIL",
            "SQS_MSG_VISIBILITY_TIMEOUT_SEC",
            "CORDON_ONLY",
            "TAINT_NODE",
            "TAINT_EFFECT",
            "EXCLUDE_FROM_LOAD_BALANCERS",
            "USE_APISERVER_CACHE",
        ];
        const FLAGS: &[&str] = &[
            "dry-run",
            "node-name",
            "pod-name",
            "pod-namespace",
            "metadata-url",
            "ignore-daemon-sets",
            "delete-local-data",
            "kubernetes-service-host",
            "kubernetes-service-port",
            "grace-period",
            "pod-termination-grace-period",
            "node-termination-grace-period",
            "kube-api-qps",
            "kube-api-burst",
            "webhook-url",
            "webhook-proxy",
            "webhook-headers",
            "webhook-template",
            "webhook-template-file",
            "enable-scheduled-event-draining",
            "enable-spot-interruption-draining",
            "enable-asg-lifecycle-draining",
            "enable-sqs-termination-draining",
            "enable-rebalance-monitoring",
            "enable-rebalance-draining",
            "check-asg-tag-before-draining",
            "check-tag-before-draining",
            "managed-asg-tag",
            "managed-tag",
            "metadata-tries",
            "cordon-only",
            "taint-node",
            "taint-effect",
            "enable-out-of-service-taint",
            "exclude-from-load-balancers",
            "json-logging",
            "log-level",
            "log-format-version",
            "uptime-from-file",
            "enable-prometheus-server",
            "prometheus-server-port",
            "enable-probes-server",
            "probes-server-port",
            "probes-server-endpoint",
            "emit-kubernetes-events",
            "kubernetes-events-extra-annotations",
            "aws-region",
            "aws-endpoint",
            "queue-url",
            "workers",
            "use-provider-id",
            "complete-lifecycle-action-delay-seconds",
            "delete-sqs-msg-if-node-not-found",
            "use-apiserver-cache",
            "heartbeat-interval",
            "heartbeat-until",
            "sqs-msg-visibility-timeout-sec",
        ];
        let cmd = Options::command();
        let envs: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect();
        let flags: Vec<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
        for e in ENV {
            assert!(envs.iter().any(|x| x == e), "missing env {e}");
        }
        for f in FLAGS {
            assert!(flags.contains(f), "missing flag --{f}");
        }
    }

    #[test]
    fn go_bool_table() {
        for t in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(go_bool(t), Ok(true));
        }
        for f in ["0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(go_bool(f), Ok(false));
        }
        assert!(go_bool("yes").is_err());
        assert!(go_bool("").is_err());
    }
}
