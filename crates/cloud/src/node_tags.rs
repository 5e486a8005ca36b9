//! Tags on the cloud resources behind nodes: the capability upstream cloud-provider-aws's
//! `tagging` controller needs, in provider-neutral terms.

use std::collections::BTreeMap;

use async_trait::async_trait;

use crate::{CloudError, NodeInfo};

/// Tag key → value.
pub type TagSet = BTreeMap<String, String>;

/// One change of tags, the same for every node it is applied to.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TagChange {
    /// Tags to add, or to overwrite when the key exists.
    pub set: TagSet,
    /// Tags to delete: each only while it still has this value (a value someone else wrote since
    /// is left alone).
    pub remove: TagSet,
}

impl TagChange {
    /// Whether the change does nothing.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty()
    }
}

/// What became of one node's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagOutcome {
    /// The change is applied.
    Applied,
    /// The node's resources do not exist (any more): there is nothing to tag or untag.
    Gone,
}

/// Tags on the resources behind nodes.
///
/// Contract: [`NodeTags::change_tags`] answers once per node, in the order given; it makes as
/// few cloud calls as the cloud allows (many resources per call, never one lookup per node in
/// steady state) and never fails the whole batch for one node's sake: a node whose resources are
/// gone answers [`TagOutcome::Gone`], a node the provider cannot map answers
/// [`CloudError::InvalidInput`].
#[async_trait]
pub trait NodeTags: Send + Sync {
    /// The resource kinds `--resources` may name (e.g. `instance`).
    fn resource_kinds(&self) -> &'static [&'static str];

    /// The node label recording the checksum of the tag set applied (upstream's name, so nodes
    /// tagged by the upstream controller are recognised).
    fn record_label(&self) -> &'static str;

    /// Problems of a tag set this cloud would refuse (reserved prefixes, lengths, counts), each
    /// naming the tag; empty when usable.
    fn check_tags(&self, tags: &TagSet) -> Vec<String>;

    /// Applies `change` to the `resources` kinds behind every node of `nodes`.
    async fn change_tags(
        &self,
        resources: &[String],
        nodes: &[NodeInfo],
        change: &TagChange,
    ) -> Vec<Result<TagOutcome, CloudError>>;
}
