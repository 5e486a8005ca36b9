//! The tagging controller's decisions, pure: which nodes need which tag change, grouped so that
//! nodes with the same change share cloud calls, within the rate budget.

use std::collections::BTreeMap;

use md5::{Digest, Md5};
use stratus_cloud::{NodeInfo, TagChange, TagSet};

/// Stratus's annotation with the tags applied (JSON object), so that keys dropped from `--tags`
/// can be removed (upstream's checksum label cannot say which keys it covered).
pub const APPLIED_ANNOTATION: &str = "tagging.stratus.io/applied-tags";

/// Upstream's checksum of a tag set: MD5 (hex) of the sorted `key=value` pairs joined by `,`.
pub fn checksum(tags: &TagSet) -> String {
    let joined: Vec<String> = tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let digest = Md5::digest(joined.join(",").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the controller needs of one Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTagView {
    /// The node as a provider sees it.
    pub info: NodeInfo,
    /// The checksum label's value.
    pub record: Option<String>,
    /// The applied-tags annotation, when present and readable.
    pub applied: Option<TagSet>,
}

impl NodeTagView {
    /// The tags known to be on the node's resources: the annotation's, else the desired set when
    /// the checksum says it was applied (a node tagged by upstream's controller).
    pub fn known_applied(&self, desired: &TagSet, desired_sum: &str) -> Option<TagSet> {
        self.applied
            .clone()
            .or_else(|| (self.record.as_deref() == Some(desired_sum)).then(|| desired.clone()))
    }
}

/// Tag or untag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Work {
    /// The node is gone: remove what was applied.
    Untag,
    /// The node is new or the tag set changed: apply it.
    Tag,
}

/// One change for several nodes: one cloud call (or a few, by the cloud's per-call limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// Tag or untag.
    pub work: Work,
    /// The change.
    pub change: TagChange,
    /// The nodes, by name.
    pub nodes: Vec<String>,
}

/// A pass's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TagPlan {
    /// Changes to make, untagging first.
    pub batches: Vec<Batch>,
    /// Nodes that need work but wait for the rate budget.
    pub deferred: usize,
}

/// The change a present node needs, if any: the desired set when its checksum differs, plus the
/// removal of applied keys no longer desired.
pub fn change_for(view: &NodeTagView, desired: &TagSet, desired_sum: &str) -> Option<TagChange> {
    if view.record.as_deref() == Some(desired_sum) {
        return None;
    }
    let remove: TagSet = view
        .applied
        .iter()
        .flatten()
        .filter(|(k, _)| !desired.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(TagChange {
        set: desired.clone(),
        remove,
    })
}

/// Plans a pass over the present nodes (`nodes`) and the deleted ones with what they had applied
/// (`deleted`), processing at most `budget` nodes (all when `None`), deleted ones first, by name.
pub fn plan_tagging(
    desired: &TagSet,
    nodes: &[NodeTagView],
    deleted: &[(String, TagSet)],
    budget: Option<usize>,
) -> TagPlan {
    let sum = checksum(desired);
    let mut work: Vec<(Work, String, TagChange)> = deleted
        .iter()
        .filter(|(_, applied)| !applied.is_empty())
        .map(|(name, applied)| {
            let change = TagChange {
                set: TagSet::new(),
                remove: applied.clone(),
            };
            (Work::Untag, name.clone(), change)
        })
        .collect();
    work.extend(
        nodes.iter().filter_map(|v| {
            change_for(v, desired, &sum).map(|c| (Work::Tag, v.info.name.clone(), c))
        }),
    );
    work.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let take = budget.unwrap_or(usize::MAX).min(work.len());
    let deferred = work.len() - take;
    let mut groups: BTreeMap<(Work, TagChange), Vec<String>> = BTreeMap::new();
    for (w, name, change) in work.into_iter().take(take) {
        groups.entry((w, change)).or_default().push(name);
    }
    TagPlan {
        batches: groups
            .into_iter()
            .map(|((work, change), nodes)| Batch {
                work,
                change,
                nodes,
            })
            .collect(),
        deferred,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> TagSet {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn view(name: &str, record: Option<&str>, applied: Option<TagSet>) -> NodeTagView {
        NodeTagView {
            info: NodeInfo::named(name),
            record: record.map(str::to_string),
            applied,
        }
    }

    #[test]
    fn checksum_is_upstreams() {
        // md5("a=1,b=2"), the sorted pairs joined by commas.
        assert_eq!(
            checksum(&tags(&[("b", "2"), ("a", "1")])),
            "9dc867b7f2bf1e40160f90e46628512e"
        );
        assert_eq!(checksum(&TagSet::new()), "d41d8cd98f00b204e9800998ecf8427e");
        assert_ne!(
            checksum(&tags(&[("a", "1")])),
            checksum(&tags(&[("a", "2")]))
        );
    }

    #[test]
    fn table() {
        let want = tags(&[("team", "x"), ("env", "prod")]);
        let sum = checksum(&want);
        let old = tags(&[("team", "y"), ("gone", "1")]);
        struct Case {
            name: &'static str,
            nodes: Vec<NodeTagView>,
            deleted: Vec<(String, TagSet)>,
            budget: Option<usize>,
            batches: Vec<(Work, TagSet, TagSet, Vec<&'static str>)>,
            deferred: usize,
        }
        let cases = vec![
            Case {
                name: "joined nodes share one call",
                nodes: vec![view("b", None, None), view("a", None, None)],
                deleted: vec![],
                budget: None,
                batches: vec![(Work::Tag, want.clone(), TagSet::new(), vec!["a", "b"])],
                deferred: 0,
            },
            Case {
                name: "idle: every checksum matches",
                nodes: vec![
                    view("a", Some(&sum), None),
                    view("b", Some(&sum), Some(want.clone())),
                ],
                deleted: vec![],
                budget: None,
                batches: vec![],
                deferred: 0,
            },
            Case {
                name: "tag set changed: dropped keys removed with their old values",
                nodes: vec![
                    view("a", Some("old"), Some(old.clone())),
                    view("b", Some("old"), Some(old.clone())),
                    view("c", Some("old"), None),
                ],
                deleted: vec![],
                budget: None,
                batches: vec![
                    (Work::Tag, want.clone(), TagSet::new(), vec!["c"]),
                    (
                        Work::Tag,
                        want.clone(),
                        tags(&[("gone", "1")]),
                        vec!["a", "b"],
                    ),
                ],
                deferred: 0,
            },
            Case {
                name: "deleted nodes untagged first; nothing applied, nothing to do",
                nodes: vec![view("a", None, None)],
                deleted: vec![("z".into(), want.clone()), ("y".into(), TagSet::new())],
                budget: None,
                batches: vec![
                    (Work::Untag, TagSet::new(), want.clone(), vec!["z"]),
                    (Work::Tag, want.clone(), TagSet::new(), vec!["a"]),
                ],
                deferred: 0,
            },
            Case {
                name: "budget: the rest waits",
                nodes: vec![
                    view("a", None, None),
                    view("b", None, None),
                    view("c", None, None),
                ],
                deleted: vec![],
                budget: Some(2),
                batches: vec![(Work::Tag, want.clone(), TagSet::new(), vec!["a", "b"])],
                deferred: 1,
            },
        ];
        for c in cases {
            let plan = plan_tagging(&want, &c.nodes, &c.deleted, c.budget);
            let got: Vec<(Work, TagSet, TagSet, Vec<&str>)> = plan
                .batches
                .iter()
                .map(|b| {
                    (
                        b.work,
                        b.change.set.clone(),
                        b.change.remove.clone(),
                        b.nodes.iter().map(String::as_str).collect(),
                    )
                })
                .collect();
            assert_eq!(got, c.batches, "{}", c.name);
            assert_eq!(plan.deferred, c.deferred, "{}", c.name);
        }
    }

    #[test]
    fn known_applied_falls_back_to_the_checksum() {
        let want = tags(&[("a", "1")]);
        let sum = checksum(&want);
        assert_eq!(
            view("n", Some(&sum), None).known_applied(&want, &sum),
            Some(want.clone())
        );
        assert_eq!(view("n", Some("x"), None).known_applied(&want, &sum), None);
        let old = tags(&[("b", "2")]);
        assert_eq!(
            view("n", Some("x"), Some(old.clone())).known_applied(&want, &sum),
            Some(old)
        );
    }
}
