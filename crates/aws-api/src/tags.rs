//! Tags that mark what Stratus made for a Service, so it can be found again and reaped.

use std::collections::BTreeMap;

use stratus_cloud::ServiceRef;

pub use stratus_cloud::tags::{cluster_tag_key, CLUSTER_TAG_PREFIX, SERVICE_NAME_TAG};

/// Value of the cluster tag on resources the cluster owns (and may delete).
pub const OWNED: &str = "owned";

/// Ownership tags plus the user's additional tags (ours win on a clash).
pub fn ownership_tags(
    cluster_id: &str,
    service: &ServiceRef,
    additional: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    let mut tags = additional.clone();
    tags.insert(cluster_tag_key(cluster_id), OWNED.into());
    tags.insert(
        SERVICE_NAME_TAG.into(),
        format!("{}/{}", service.namespace, service.name),
    );
    tags
}

/// Whether tags mark a resource owned by this cluster and made for a Service.
pub fn owned_service_resource(tags: &BTreeMap<String, String>, cluster_id: &str) -> bool {
    tags.get(&cluster_tag_key(cluster_id)).map(String::as_str) == Some(OWNED)
        && tags.contains_key(SERVICE_NAME_TAG)
}

/// Tags in `desired` that `current` lacks or has with another value.
pub fn missing_tags(
    current: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    desired
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ownership_wins_over_user_tags() {
        let svc = ServiceRef {
            namespace: "a".into(),
            name: "b".into(),
            uid: "u".into(),
        };
        let user = BTreeMap::from([
            (SERVICE_NAME_TAG.to_string(), "evil".to_string()),
            ("team".to_string(), "x".to_string()),
        ]);
        let t = ownership_tags("c", &svc, &user);
        assert_eq!(t[SERVICE_NAME_TAG], "a/b");
        assert_eq!(t["team"], "x");
        assert!(owned_service_resource(&t, "c"));
        assert!(!owned_service_resource(&t, "other"));
    }

    #[test]
    fn missing_tags_are_new_or_changed() {
        let cur = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let want = BTreeMap::from([
            ("a".to_string(), "2".to_string()),
            ("b".to_string(), "3".to_string()),
        ]);
        assert_eq!(missing_tags(&cur, &want).len(), 2);
        assert!(missing_tags(&want, &want).is_empty());
    }
}
