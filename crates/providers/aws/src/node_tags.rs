//! The tagging controller's capability on AWS: the instances behind nodes, found in the shared
//! instance cache (no per-node describe), tagged with one CreateTags/DeleteTags per up to 1000
//! instances.

use std::sync::Arc;

use async_trait::async_trait;
use futures::future::join_all;
use stratus_aws_api::ec2::MAX_TAG_RESOURCES;
use stratus_aws_api::Ec2;
use stratus_cloud::{CloudError, NodeInfo, NodeTags, TagChange, TagOutcome, TagSet};

use crate::instance_cache::InstanceCache;

/// The only resource kind upstream's tagging controller supports.
pub const INSTANCE: &str = "instance";

/// Upstream's node label holding the checksum of the tags applied.
pub const RECORD_LABEL: &str = "k8s.io/cloud-provider-aws";

/// EC2's limits on one resource's tags.
const MAX_TAGS: usize = 50;
const MAX_KEY_LEN: usize = 128;
const MAX_VALUE_LEN: usize = 256;

/// Tags on the instances behind nodes.
pub struct AwsNodeTags {
    ec2: Ec2,
    cache: Arc<InstanceCache>,
}

impl AwsNodeTags {
    /// Tags through `ec2`, finding instances in `cache`.
    pub fn new(ec2: Ec2, cache: Arc<InstanceCache>) -> Self {
        Self { ec2, cache }
    }

    /// The instance ID behind a node, from the cache; `Ok(None)` when the instance is gone.
    async fn instance_of(&self, node: &NodeInfo) -> Result<Option<String>, CloudError> {
        Ok(self
            .cache
            .find(node)
            .await?
            .filter(|i| !i.state.is_gone())
            .map(|i| i.id.as_str().to_string()))
    }

    /// One change on `ids`, split in halves when EC2 names an unknown ID (one gone instance
    /// must not fail the others); an ID that alone is unknown is gone.
    async fn apply(
        &self,
        ids: &[String],
        change: &TagChange,
    ) -> Vec<Result<TagOutcome, CloudError>> {
        let mut out = vec![Ok(TagOutcome::Applied); ids.len()];
        let mut pending: Vec<std::ops::Range<usize>> = (0..ids.len())
            .step_by(MAX_TAG_RESOURCES)
            .map(|s| s..(s + MAX_TAG_RESOURCES).min(ids.len()))
            .collect();
        while let Some(range) = pending.pop() {
            let chunk = &ids[range.clone()];
            let mut result = self.ec2.create_tags(chunk, &change.set).await;
            if result.is_ok() {
                result = self.ec2.delete_tags(chunk, &change.remove).await;
            }
            match result {
                Ok(()) => {}
                Err(e) if names_unknown_id(&e) && chunk.len() > 1 => {
                    let mid = range.start + chunk.len() / 2;
                    pending.push(range.start..mid);
                    pending.push(mid..range.end);
                }
                Err(e) if names_unknown_id(&e) => out[range.start] = Ok(TagOutcome::Gone),
                Err(e) => range.for_each(|i| out[i] = Err(e.clone())),
            }
        }
        out
    }
}

/// Whether EC2 refused a call because one of its resource IDs does not exist.
fn names_unknown_id(e: &CloudError) -> bool {
    matches!(e, CloudError::Rejected { code, .. } if code.ends_with(".NotFound") || code.ends_with(".Malformed"))
}

#[async_trait]
impl NodeTags for AwsNodeTags {
    fn resource_kinds(&self) -> &'static [&'static str] {
        &[INSTANCE]
    }

    fn record_label(&self) -> &'static str {
        RECORD_LABEL
    }

    fn check_tags(&self, tags: &TagSet) -> Vec<String> {
        check_tags(tags)
    }

    async fn change_tags(
        &self,
        resources: &[String],
        nodes: &[NodeInfo],
        change: &TagChange,
    ) -> Vec<Result<TagOutcome, CloudError>> {
        if let Some(other) = resources.iter().find(|r| r.as_str() != INSTANCE) {
            let e = CloudError::InvalidInput(format!("resource kind {other:?} cannot be tagged"));
            return vec![Err(e); nodes.len()];
        }
        // Concurrent finds: the cache answers from its view, or batches the unknown ones.
        let found = join_all(nodes.iter().map(|n| self.instance_of(n))).await;
        let ids: Vec<String> = found
            .iter()
            .filter_map(|f| f.as_ref().ok().cloned().flatten())
            .collect();
        let mut applied = self.apply(&ids, change).await.into_iter();
        found
            .into_iter()
            .map(|f| match f {
                Ok(Some(_)) => applied.next().expect("one answer per ID"),
                Ok(None) => Ok(TagOutcome::Gone),
                Err(e) => Err(e),
            })
            .collect()
    }
}

/// EC2's rules for user tags, every problem named.
pub fn check_tags(tags: &TagSet) -> Vec<String> {
    let mut problems = Vec::new();
    if tags.len() > MAX_TAGS {
        problems.push(format!(
            "{} tags given, an EC2 resource holds at most {MAX_TAGS}",
            tags.len()
        ));
    }
    for (k, v) in tags {
        if k.is_empty() || k.chars().count() > MAX_KEY_LEN {
            problems.push(format!(
                "tag key {k:?} must have 1 to {MAX_KEY_LEN} characters"
            ));
        }
        if k.to_ascii_lowercase().starts_with("aws:") {
            problems.push(format!("tag key {k:?}: the aws: prefix is reserved by AWS"));
        }
        if v.chars().count() > MAX_VALUE_LEN {
            problems.push(format!(
                "tag {k:?}: the value has more than {MAX_VALUE_LEN} characters"
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_rules_name_each_problem() {
        let ok = TagSet::from([("team".into(), "a".into()), ("empty".into(), String::new())]);
        assert!(check_tags(&ok).is_empty());
        let bad = TagSet::from([
            ("aws:owner".into(), "x".into()),
            ("k".repeat(129), "x".into()),
            ("v".into(), "x".repeat(257)),
        ]);
        let p = check_tags(&bad);
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p.iter().any(|m| m.contains("aws: prefix")));
        let many: TagSet = (0..51).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(check_tags(&many)[0].contains("at most 50"));
    }

    #[test]
    fn unknown_ids_are_told_apart_from_other_refusals() {
        let rejected = |code: &str| CloudError::Rejected {
            operation: "CreateTags".into(),
            code: code.into(),
            message: String::new(),
        };
        assert!(names_unknown_id(&rejected("InvalidInstanceID.NotFound")));
        assert!(!names_unknown_id(&rejected("TagLimitExceeded")));
    }
}
