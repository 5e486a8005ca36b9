//! The writes of one user read back from a [`KubeCluster`]'s audit log (which records the
//! metadata of every write request, and of reads of the DVP parent's VirtualMachines): verb, API group, resource (`name/subresource`), namespace
//! and the answer's status code, for least-privilege tests of what a component really did.

use std::collections::BTreeSet;

use anyhow::{Context, Result};

use crate::KubeCluster;

/// One write request as the audit log recorded it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Write {
    /// `create`, `update`, `patch`, `delete`, `deletecollection`.
    pub verb: String,
    /// API group (`""`: core).
    pub group: String,
    /// Resource, with `/subresource` when there is one.
    pub resource: String,
    /// Namespace (None: cluster-scoped).
    pub namespace: Option<String>,
    /// HTTP status code of the answer.
    pub code: u16,
}

#[derive(serde::Deserialize, Default)]
struct Event {
    #[serde(default)]
    stage: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    user: User,
    #[serde(default, rename = "objectRef")]
    object_ref: Option<ObjectRef>,
    #[serde(default, rename = "responseStatus")]
    response_status: Option<Status>,
}

#[derive(serde::Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
}

#[derive(serde::Deserialize, Default)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
    #[serde(default)]
    namespace: String,
    #[serde(default, rename = "apiGroup")]
    api_group: String,
}

#[derive(serde::Deserialize, Default)]
struct Status {
    #[serde(default)]
    code: u16,
}

/// The verbs that write.
pub(crate) const WRITE_VERBS: &[&str] =
    &["create", "update", "patch", "delete", "deletecollection"];

/// The completed requests of the audit log at `path` (none when it does not exist yet); a line
/// being written concurrently may be incomplete and is skipped.
fn completed(path: &std::path::Path) -> Result<Vec<Event>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Event>(line).ok())
        .filter(|e| e.stage == "ResponseComplete")
        .collect())
}

/// How many `get` and `list` requests of `resource` `username` completed, from the audit log at
/// `path` (the policy records reads of the DVP parent's VirtualMachines only).
pub fn reads_by(path: &std::path::Path, username: &str, resource: &str) -> Result<u64> {
    Ok(completed(path)?
        .iter()
        .filter(|e| e.user.username == username && (e.verb == "get" || e.verb == "list"))
        .filter(|e| {
            e.object_ref
                .as_ref()
                .is_some_and(|o| o.resource == resource)
        })
        .count() as u64)
}

/// The distinct writes `username` made to `cluster` so far.
pub fn writes_by(cluster: &KubeCluster, username: &str) -> Result<BTreeSet<Write>> {
    let path = cluster.dir().join("audit.log");
    Ok(completed(&path)?
        .into_iter()
        .filter(|e| e.user.username == username && WRITE_VERBS.contains(&e.verb.as_str()))
        .filter_map(|e| {
            let o = e.object_ref?;
            Some(Write {
                verb: e.verb,
                group: o.api_group,
                resource: if o.subresource.is_empty() {
                    o.resource
                } else {
                    format!("{}/{}", o.resource, o.subresource)
                },
                namespace: (!o.namespace.is_empty()).then_some(o.namespace),
                code: e.response_status.map(|s| s.code).unwrap_or(0),
            })
        })
        .collect())
}
