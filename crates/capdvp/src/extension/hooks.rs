//! The Cluster API Runtime SDK wire types capdvp serves (`hooks.runtime.cluster.x-k8s.io/v1alpha1`
//! as Cluster API v1.14 defines them): the discovery answer, the in-place update hooks' requests
//! and responses, and which path names which handler. Objects inside requests stay JSON values:
//! the decisions read only the fields they know and keep the rest intact.

use base64::Engine;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The hooks' API group and version.
pub const API_VERSION: &str = "hooks.runtime.cluster.x-k8s.io/v1alpha1";
/// Every hook path starts with it (`/<group>/<version>`).
pub const BASE_PATH: &str = "/hooks.runtime.cluster.x-k8s.io/v1alpha1";
/// Where Cluster API asks an extension for its handlers.
pub const DISCOVERY_PATH: &str = "/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery";

/// A hook capdvp answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hook {
    /// Which handlers the extension has.
    Discovery,
    /// Which Machine and DeckhouseMachine changes can be made in place.
    CanUpdateMachine,
    /// Which MachineSet and DeckhouseMachineTemplate changes can be made in place.
    CanUpdateMachineSet,
    /// Make the in-place change on one machine.
    UpdateMachine,
}

impl Hook {
    /// The hook's name as Cluster API spells it.
    pub fn name(self) -> &'static str {
        match self {
            Hook::Discovery => "Discovery",
            Hook::CanUpdateMachine => "CanUpdateMachine",
            Hook::CanUpdateMachineSet => "CanUpdateMachineSet",
            Hook::UpdateMachine => "UpdateMachine",
        }
    }
}

/// One handler of the extension: its hook, its name (the names Deckhouse's capdvp registers, so
/// an ExtensionConfig's status reads the same after an image swap) and its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandlerSpec {
    /// The hook.
    pub hook: Hook,
    /// The handler's name (a DNS-1123 label).
    pub name: &'static str,
    /// How long Cluster API waits for an answer.
    pub timeout_seconds: i32,
}

/// The handlers, in the order discovery lists them.
pub const HANDLERS: [HandlerSpec; 3] = [
    HandlerSpec {
        hook: Hook::CanUpdateMachineSet,
        name: "dvp-can-update-machineset",
        timeout_seconds: 10,
    },
    HandlerSpec {
        hook: Hook::CanUpdateMachine,
        name: "dvp-can-update-machine",
        timeout_seconds: 10,
    },
    HandlerSpec {
        hook: Hook::UpdateMachine,
        name: "dvp-update-machine",
        timeout_seconds: 30,
    },
];

impl HandlerSpec {
    /// The path Cluster API posts to: `/<group>/<version>/<hook, lower case>/<name>`.
    pub fn path(&self) -> String {
        format!(
            "{BASE_PATH}/{}/{}",
            self.hook.name().to_lowercase(),
            self.name
        )
    }
}

/// The hook a request path names, if any.
pub fn route(path: &str) -> Option<Hook> {
    if path == DISCOVERY_PATH {
        return Some(Hook::Discovery);
    }
    HANDLERS.iter().find(|h| h.path() == path).map(|h| h.hook)
}

/// `status` of every answer.
pub const SUCCESS: &str = "Success";
/// `status` of an answer that reports a failure.
pub const FAILURE: &str = "Failure";

/// A hook's `apiVersion`/`kind` header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    /// Always [`API_VERSION`].
    pub api_version: String,
    /// The response's kind.
    pub kind: String,
}

impl TypeMeta {
    fn of(kind: &str) -> TypeMeta {
        TypeMeta {
            api_version: API_VERSION.into(),
            kind: kind.into(),
        }
    }
}

/// `GroupVersionHook`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupVersionHook {
    /// The hook's group and version.
    pub api_version: String,
    /// The hook's name.
    pub hook: String,
}

/// `ExtensionHandler` of a discovery answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionHandler {
    /// The handler's name.
    pub name: String,
    /// The hook it serves.
    pub request_hook: GroupVersionHook,
    /// Seconds Cluster API waits.
    pub timeout_seconds: i32,
    /// `Fail`: an unanswered call is an error, never silently skipped.
    pub failure_policy: String,
}

/// `DiscoveryResponse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveryResponse {
    /// Header.
    #[serde(flatten)]
    pub type_meta: TypeMeta,
    /// `Success`.
    pub status: String,
    /// The handlers.
    pub handlers: Vec<ExtensionHandler>,
}

/// The discovery answer: every handler of [`HANDLERS`].
pub fn discovery() -> DiscoveryResponse {
    DiscoveryResponse {
        type_meta: TypeMeta::of("DiscoveryResponse"),
        status: SUCCESS.into(),
        handlers: HANDLERS
            .iter()
            .map(|h| ExtensionHandler {
                name: h.name.into(),
                request_hook: GroupVersionHook {
                    api_version: API_VERSION.into(),
                    hook: h.hook.name().into(),
                },
                timeout_seconds: h.timeout_seconds,
                failure_policy: "Fail".into(),
            })
            .collect(),
    }
}

/// A JSON merge patch as the hooks carry it (`patch` is Go `[]byte`: base64 in JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Patch {
    /// `JSONMergePatch`.
    pub patch_type: String,
    /// The patch, base64.
    pub patch: String,
}

impl Patch {
    /// A JSON merge patch of `value`.
    pub fn merge(value: &Value) -> Patch {
        Patch {
            patch_type: "JSONMergePatch".into(),
            patch: base64::engine::general_purpose::STANDARD.encode(value.to_string()),
        }
    }

    /// The patch document.
    pub fn document(&self) -> Option<Value> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.patch)
            .ok()?;
        serde_json::from_slice(&bytes).ok()
    }
}

/// The objects of one side of a CanUpdateMachine or UpdateMachine request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineObjects {
    /// The Cluster API Machine.
    #[serde(default)]
    pub machine: Value,
    /// The DeckhouseMachine.
    #[serde(default)]
    pub infrastructure_machine: Value,
    /// The bootstrap config, when the Machine has one.
    #[serde(default)]
    pub bootstrap_config: Value,
}

/// `CanUpdateMachineRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanUpdateMachineRequest {
    /// The machine as it is.
    #[serde(default)]
    pub current: MachineObjects,
    /// The machine as it should become.
    #[serde(default)]
    pub desired: MachineObjects,
}

/// `CanUpdateMachineResponse`: patches over the current objects covering what capdvp changes in
/// place (Cluster API applies them and rolls the machine out if current still differs from
/// desired).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanUpdateMachineResponse {
    /// Header.
    #[serde(flatten)]
    pub type_meta: TypeMeta,
    /// `Success`.
    pub status: String,
    /// What is and is not covered, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Over the DeckhouseMachine (never the Machine or its bootstrap config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_machine_patch: Option<Patch>,
}

impl CanUpdateMachineResponse {
    /// A success with `message` and `patch` (none: nothing is covered).
    pub fn new(message: String, patch: Option<Patch>) -> Self {
        CanUpdateMachineResponse {
            type_meta: TypeMeta::of("CanUpdateMachineResponse"),
            status: SUCCESS.into(),
            message,
            infrastructure_machine_patch: patch,
        }
    }
}

/// The objects of one side of a CanUpdateMachineSet request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetObjects {
    /// The MachineSet.
    #[serde(default)]
    pub machine_set: Value,
    /// The DeckhouseMachineTemplate.
    #[serde(default)]
    pub infrastructure_machine_template: Value,
    /// The bootstrap config template, when there is one.
    #[serde(default)]
    pub bootstrap_config_template: Value,
}

/// `CanUpdateMachineSetRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanUpdateMachineSetRequest {
    /// The MachineSet as it is.
    #[serde(default)]
    pub current: MachineSetObjects,
    /// The MachineSet as it should become.
    #[serde(default)]
    pub desired: MachineSetObjects,
}

/// `CanUpdateMachineSetResponse`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CanUpdateMachineSetResponse {
    /// Header.
    #[serde(flatten)]
    pub type_meta: TypeMeta,
    /// `Success`.
    pub status: String,
    /// What is and is not covered, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Over the DeckhouseMachineTemplate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_machine_template_patch: Option<Patch>,
}

impl CanUpdateMachineSetResponse {
    /// A success with `message` and `patch` (none: nothing is covered).
    pub fn new(message: String, patch: Option<Patch>) -> Self {
        CanUpdateMachineSetResponse {
            type_meta: TypeMeta::of("CanUpdateMachineSetResponse"),
            status: SUCCESS.into(),
            message,
            infrastructure_machine_template_patch: patch,
        }
    }
}

/// `UpdateMachineRequest`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMachineRequest {
    /// The machine as it should become.
    #[serde(default)]
    pub desired: MachineObjects,
}

/// `UpdateMachineResponse`: `Success` with `retryAfterSeconds` > 0 while in progress, 0 when
/// done; `Failure` when it cannot be done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateMachineResponse {
    /// Header.
    #[serde(flatten)]
    pub type_meta: TypeMeta,
    /// `Success` or `Failure`.
    pub status: String,
    /// What happened, in words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// When to call again (0: done).
    pub retry_after_seconds: i32,
}

impl UpdateMachineResponse {
    /// An answer with `status`, `message` and `retry_after_seconds`.
    pub fn new(status: &str, message: String, retry_after_seconds: i32) -> Self {
        UpdateMachineResponse {
            type_meta: TypeMeta::of("UpdateMachineResponse"),
            status: status.into(),
            message,
            retry_after_seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_are_cluster_apis() {
        assert_eq!(route(DISCOVERY_PATH), Some(Hook::Discovery));
        assert_eq!(
            route(
                "/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachine/dvp-can-update-machine"
            ),
            Some(Hook::CanUpdateMachine)
        );
        assert_eq!(
            route("/hooks.runtime.cluster.x-k8s.io/v1alpha1/canupdatemachineset/dvp-can-update-machineset"),
            Some(Hook::CanUpdateMachineSet)
        );
        assert_eq!(
            route("/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/dvp-update-machine"),
            Some(Hook::UpdateMachine)
        );
        assert_eq!(
            route("/hooks.runtime.cluster.x-k8s.io/v1alpha1/updatemachine/other"),
            None
        );
        assert_eq!(route("/healthz"), None);
    }

    #[test]
    fn discovery_lists_every_handler_as_cluster_api_reads_it() {
        let answer = serde_json::to_value(discovery()).unwrap();
        assert_eq!(answer["apiVersion"], API_VERSION);
        assert_eq!(answer["kind"], "DiscoveryResponse");
        assert_eq!(answer["status"], "Success");
        let handlers = answer["handlers"].as_array().unwrap();
        assert_eq!(handlers.len(), 3);
        assert_eq!(
            handlers[2],
            json!({
                "name": "dvp-update-machine",
                "requestHook": {"apiVersion": API_VERSION, "hook": "UpdateMachine"},
                "timeoutSeconds": 30,
                "failurePolicy": "Fail",
            })
        );
    }

    #[test]
    fn patches_are_base64_as_go_writes_bytes() {
        let p = Patch::merge(&json!({"spec": {"runPolicy": "AlwaysOn"}}));
        let wire = serde_json::to_value(&p).unwrap();
        assert_eq!(wire["patchType"], "JSONMergePatch");
        assert_eq!(
            wire["patch"],
            base64::engine::general_purpose::STANDARD
                .encode(r#"{"spec":{"runPolicy":"AlwaysOn"}}"#)
        );
        assert_eq!(
            p.document(),
            Some(json!({"spec": {"runPolicy": "AlwaysOn"}}))
        );
        // Requests decode with fields missing.
        let r: UpdateMachineRequest = serde_json::from_value(
            json!({"apiVersion": API_VERSION, "kind": "UpdateMachineRequest"}),
        )
        .unwrap();
        assert_eq!(r.desired.machine, Value::Null);
    }
}
