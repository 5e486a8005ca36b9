//! The writes of one user read back from a [`KubeCluster`]'s audit log (which records the
//! metadata of every write request): verb, API group, resource (`name/subresource`), namespace
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

/// The distinct writes `username` made to `cluster` so far.
pub fn writes_by(cluster: &KubeCluster, username: &str) -> Result<BTreeSet<Write>> {
    let path = cluster.dir().join("audit.log");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    // A line being written concurrently may be incomplete and is skipped.
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Event>(line).ok())
        .filter(|e| e.stage == "ResponseComplete" && e.user.username == username)
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
