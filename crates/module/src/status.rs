//! The module's conditions, in the shape of Kubernetes conditions, from one reconcile's outcome
//! per part: a part that failed is `False` with the failure's reason and its message (which names
//! the key at fault), one that worked is `True`. The transition time moves only when a condition's
//! status does, so an unchanged outcome gives an equal list and nothing is written. The driver
//! keeps them in the ConfigMap `kube-system/<module>-status` (key [`KEY`]), where a cluster
//! without the module's own resource kinds can read them, as cluster-autoscaler reports its
//! status.

use serde::{Deserialize, Serialize};

/// The ConfigMap's key holding the conditions (a JSON list).
pub const KEY: &str = "conditions.json";

/// The condition type of each reconciled part.
pub const TYPES: [(&str, &str); 3] = [
    ("storage_classes", "StorageClassesReady"),
    ("registration", "RegistrationReady"),
    ("spot_marks", "SpotMarksReady"),
];

/// One condition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `StorageClassesReady`, `RegistrationReady` or `SpotMarksReady`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    /// `Reconciled`, or why not: `Settings`, `Inputs`, `Kubernetes`, `Cloud`.
    pub reason: String,
    /// Empty when reconciled; else the failure, naming the key.
    pub message: String,
    /// When `status` last changed (RFC 3339).
    pub last_transition_time: String,
}

/// How one part ended: `None` when it worked, else the failure's reason (as the metric says it:
/// `settings`, `inputs`, `kubernetes`, `cloud`) and message.
pub type Outcome<'a> = Option<(&'a str, &'a str)>;

/// The conditions after a reconcile whose parts ended as `outcome` says (a part it leaves out
/// keeps its condition), given the `previous` ones, at `now`.
pub fn plan(previous: &[Condition], outcome: &[(&str, Outcome<'_>)], now: &str) -> Vec<Condition> {
    TYPES
        .iter()
        .filter_map(|(part, type_)| {
            let before = previous.iter().find(|c| c.type_ == *type_);
            let Some((_, result)) = outcome.iter().find(|(p, _)| p == part) else {
                return before.cloned();
            };
            let (status, reason, message) = match result {
                None => ("True", "Reconciled".to_string(), String::new()),
                Some((reason, message)) => ("False", capitalised(reason), message.to_string()),
            };
            let last_transition_time = match before {
                Some(c) if c.status == status => c.last_transition_time.clone(),
                _ => now.to_string(),
            };
            Some(Condition {
                type_: type_.to_string(),
                status: status.into(),
                reason,
                message,
                last_transition_time,
            })
        })
        .collect()
}

/// The ConfigMap's name for `module` (e.g. `cloud-provider-aws-status`).
pub fn config_map_name(module: &str) -> String {
    format!("{module}-status")
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2026-11-29T08:00:00Z";
    const T1: &str = "2026-11-29T08:05:00Z";

    fn all_ok() -> Vec<(&'static str, Outcome<'static>)> {
        TYPES.iter().map(|(part, _)| (*part, None)).collect()
    }

    #[test]
    fn a_first_clean_pass_is_all_true() {
        let c = plan(&[], &all_ok(), T0);
        assert_eq!(c.len(), 3);
        assert!(c.iter().all(|c| c.status == "True"
            && c.reason == "Reconciled"
            && c.message.is_empty()
            && c.last_transition_time == T0));
    }

    #[test]
    fn a_failure_names_its_key_and_moves_only_its_transition_time() {
        let before = plan(&[], &all_ok(), T0);
        let outcome = [
            (
                "storage_classes",
                Some((
                    "settings",
                    "values file: storageClass.provision[0].iopsPerGB: required for io1",
                )),
            ),
            ("registration", None),
            ("spot_marks", None),
        ];
        let after = plan(&before, &outcome, T1);
        assert_eq!(after[0].type_, "StorageClassesReady");
        assert_eq!(after[0].status, "False");
        assert_eq!(after[0].reason, "Settings");
        assert!(after[0].message.contains("iopsPerGB"));
        assert_eq!(after[0].last_transition_time, T1);
        assert_eq!(after[1], before[1], "an unchanged part is unchanged");
        // The same failure again: an equal list (nothing to write).
        assert_eq!(plan(&after, &outcome, "2026-11-29T09:00:00Z"), after);
        // Another message while still failing: the text changes, the transition time does not.
        let other = [(
            "storage_classes",
            Some(("settings", "exclude[0]: not a regex")),
        )];
        let changed = plan(&after, &other, "2026-11-29T09:00:00Z");
        assert_eq!(changed[0].message, "exclude[0]: not a regex");
        assert_eq!(changed[0].last_transition_time, T1);
        assert_eq!(
            changed[1..],
            after[1..],
            "parts not in the outcome keep theirs"
        );
    }

    #[test]
    fn recovery_is_a_transition() {
        let failing = plan(
            &[],
            &[("registration", Some(("inputs", "zones: required")))],
            T0,
        );
        assert_eq!(failing.len(), 1);
        let healed = plan(&failing, &all_ok(), T1);
        let registration = healed
            .iter()
            .find(|c| c.type_ == "RegistrationReady")
            .unwrap();
        assert_eq!(
            (
                registration.status.as_str(),
                registration.last_transition_time.as_str()
            ),
            ("True", T1)
        );
    }

    #[test]
    fn the_config_map_is_named_after_the_module() {
        assert_eq!(
            config_map_name("cloud-provider-aws"),
            "cloud-provider-aws-status"
        );
    }
}
