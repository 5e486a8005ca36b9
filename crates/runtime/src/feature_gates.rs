//! `--feature-gates` as Kubernetes components take it: `Name=true|false,…` over the gates a
//! component registers, with upstream's defaults, `AllAlpha`/`AllBeta`, locked gates refused when
//! set against their lock, unknown names refused (as upstream: "unrecognized feature gate").

use std::collections::BTreeMap;

/// A gate's maturity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Alpha: off by default, set by `AllAlpha`.
    Alpha,
    /// Beta: set by `AllBeta`.
    Beta,
    /// Generally available.
    Ga,
    /// Deprecated (a warning when set).
    Deprecated,
}

/// One registered gate: name, default, stage, locked to its default.
pub type Gate = (&'static str, bool, Stage, bool);

/// The gates a Kubernetes v1.34 controller manager built on `k8s.io/apiserver`,
/// `k8s.io/component-base`, `k8s.io/controller-manager` and `k8s.io/client-go` registers (what
/// the cloud-controller-manager accepts), with their v1.34 defaults.
pub const CONTROLLER_MANAGER_GATES: &[Gate] = &[
    ("APIResponseCompression", true, Stage::Beta, false),
    ("APIServerIdentity", true, Stage::Beta, false),
    ("APIServerTracing", true, Stage::Ga, true),
    ("APIServingWithRoutine", false, Stage::Alpha, false),
    (
        "AggregatedDiscoveryRemoveBetaType",
        true,
        Stage::Deprecated,
        false,
    ),
    ("AllowParsingUserUIDFromCertAuth", true, Stage::Beta, false),
    (
        "AllowUnsafeMalformedObjectDeletion",
        false,
        Stage::Alpha,
        false,
    ),
    ("AnonymousAuthConfigurableEndpoints", true, Stage::Ga, true),
    ("AuthorizeWithSelectors", true, Stage::Ga, true),
    ("BtreeWatchCache", true, Stage::Ga, true),
    ("CBORServingAndStorage", false, Stage::Alpha, false),
    ("ClientsAllowCBOR", false, Stage::Alpha, false),
    ("ClientsPreferCBOR", false, Stage::Alpha, false),
    ("CloudControllerManagerWebhook", false, Stage::Alpha, false),
    ("ComponentFlagz", false, Stage::Alpha, false),
    ("ComponentSLIs", true, Stage::Ga, true),
    ("ComponentStatusz", false, Stage::Alpha, false),
    ("ConcurrentWatchObjectDecode", false, Stage::Beta, false),
    ("ConsistentListFromCache", true, Stage::Ga, true),
    ("ContextualLogging", true, Stage::Beta, false),
    ("CoordinatedLeaderElection", false, Stage::Beta, false),
    ("DetectCacheInconsistency", true, Stage::Beta, false),
    ("InOrderInformers", true, Stage::Beta, false),
    ("InformerResourceVersion", false, Stage::Alpha, false),
    ("KMSv1", false, Stage::Deprecated, false),
    ("ListFromCacheSnapshot", true, Stage::Beta, false),
    ("LoggingAlphaOptions", false, Stage::Alpha, false),
    ("LoggingBetaOptions", true, Stage::Beta, false),
    ("MutatingAdmissionPolicy", false, Stage::Beta, false),
    ("OpenAPIEnums", true, Stage::Beta, false),
    ("RemoteRequestHeaderUID", true, Stage::Beta, false),
    ("ResilientWatchCacheInitialization", true, Stage::Ga, true),
    ("RetryGenerateName", true, Stage::Ga, true),
    ("SeparateCacheWatchRPC", false, Stage::Deprecated, false),
    ("SizeBasedListCostEstimate", true, Stage::Beta, false),
    ("StorageVersionAPI", false, Stage::Alpha, false),
    ("StorageVersionHash", true, Stage::Beta, false),
    ("StreamingCollectionEncodingToJSON", true, Stage::Ga, true),
    (
        "StreamingCollectionEncodingToProtobuf",
        true,
        Stage::Ga,
        true,
    ),
    ("StrictCostEnforcementForVAP", true, Stage::Ga, true),
    ("StrictCostEnforcementForWebhooks", true, Stage::Ga, true),
    (
        "StructuredAuthenticationConfiguration",
        true,
        Stage::Ga,
        true,
    ),
    (
        "StructuredAuthenticationConfigurationEgressSelector",
        true,
        Stage::Beta,
        false,
    ),
    (
        "StructuredAuthorizationConfiguration",
        true,
        Stage::Ga,
        true,
    ),
    (
        "TokenRequestServiceAccountUIDValidation",
        true,
        Stage::Beta,
        false,
    ),
    (
        "UnauthenticatedHTTP2DOSMitigation",
        true,
        Stage::Beta,
        false,
    ),
    (
        "WatchCacheInitializationPostStartHook",
        false,
        Stage::Beta,
        false,
    ),
    (
        "WatchFromStorageWithoutResourceVersion",
        false,
        Stage::Deprecated,
        true,
    ),
    ("WatchList", true, Stage::Beta, false),
    ("WatchListClient", false, Stage::Beta, false),
];

/// The gates in force: every registered gate's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
    /// The gates the flag set explicitly.
    pub set: BTreeMap<String, bool>,
}

impl FeatureGates {
    /// Every gate of `registered` at its default.
    pub fn defaults(registered: &[Gate]) -> FeatureGates {
        FeatureGates {
            values: registered.iter().map(|g| (g.0, g.1)).collect(),
            set: BTreeMap::new(),
        }
    }

    /// Applies `Name=bool,…` (what `--feature-gates` holds) over `registered`'s defaults;
    /// errors name the gate.
    pub fn parse(value: &str, registered: &[Gate]) -> Result<FeatureGates, String> {
        let mut gates = FeatureGates::defaults(registered);
        let mut pairs = Vec::new();
        for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, v) = item
                .split_once('=')
                .ok_or_else(|| format!("missing bool value for {item}"))?;
            let (name, v) = (name.trim(), v.trim());
            let v = match v.to_ascii_lowercase().as_str() {
                "true" | "1" | "t" => true,
                "false" | "0" | "f" => false,
                _ => return Err(format!("invalid value of {name}={v}, err: not a bool")),
            };
            pairs.push((name.to_string(), v));
        }
        // AllAlpha / AllBeta first, then the named gates override them (as upstream).
        for (name, v) in &pairs {
            let stage = match name.as_str() {
                "AllAlpha" => Stage::Alpha,
                "AllBeta" => Stage::Beta,
                _ => continue,
            };
            for g in registered.iter().filter(|g| g.2 == stage && !g.3) {
                gates.values.insert(g.0, *v);
            }
            gates.set.insert(name.clone(), *v);
        }
        for (name, v) in pairs {
            if name == "AllAlpha" || name == "AllBeta" {
                continue;
            }
            let gate = registered
                .iter()
                .find(|g| g.0 == name)
                .ok_or_else(|| format!("unrecognized feature gate: {name}"))?;
            if gate.3 && v != gate.1 {
                return Err(format!(
                    "cannot set feature gate {name} to {v}, feature is locked to {}",
                    gate.1
                ));
            }
            if gate.2 == Stage::Deprecated {
                tracing::warn!("--feature-gates: {name} is deprecated");
            }
            gates.values.insert(gate.0, v);
            gates.set.insert(name, v);
        }
        Ok(gates)
    }

    /// Whether `name` is on (an unregistered name is off).
    pub fn enabled(&self, name: &str) -> bool {
        self.values.get(name).copied().unwrap_or(false)
    }
}

/// clap's parser for `--feature-gates` of a controller manager.
pub fn parse_controller_manager_gates(value: &str) -> Result<FeatureGates, String> {
    FeatureGates::parse(value, CONTROLLER_MANAGER_GATES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates() {
        let g = parse_controller_manager_gates("").unwrap();
        assert!(g.enabled("RemoteRequestHeaderUID"));
        assert!(!g.enabled("LoggingAlphaOptions"));
        let g = parse_controller_manager_gates(
            "LoggingAlphaOptions=true, RemoteRequestHeaderUID=false",
        )
        .unwrap();
        assert!(g.enabled("LoggingAlphaOptions"));
        assert!(!g.enabled("RemoteRequestHeaderUID"));
        assert_eq!(g.set.len(), 2);
        let g = parse_controller_manager_gates("AllAlpha=true,CloudControllerManagerWebhook=false")
            .unwrap();
        assert!(g.enabled("LoggingAlphaOptions"));
        assert!(!g.enabled("CloudControllerManagerWebhook"));
        let g = parse_controller_manager_gates("AllBeta=false").unwrap();
        assert!(!g.enabled("ContextualLogging"));
        assert!(g.enabled("ComponentSLIs"), "GA gates stay");
        // Locked gates may be set to their lock only.
        assert!(parse_controller_manager_gates("ComponentSLIs=true").is_ok());
        let e = parse_controller_manager_gates("ComponentSLIs=false").unwrap_err();
        assert!(e.contains("locked to true"), "{e}");
        let e = parse_controller_manager_gates("NoSuchGate=true").unwrap_err();
        assert_eq!(e, "unrecognized feature gate: NoSuchGate");
        let e = parse_controller_manager_gates("WatchList").unwrap_err();
        assert!(e.contains("WatchList"), "{e}");
        let e = parse_controller_manager_gates("WatchList=maybe").unwrap_err();
        assert!(e.contains("WatchList=maybe"), "{e}");
    }
}
