//! TargetGroupBinding validation (upstream's `vtargetgroupbinding.elbv2.k8s.aws`): on create and
//! update `spec.targetGroupARN` or `spec.targetGroupName` is required and `spec.targetType`, when
//! set, is `instance` or `ip`; an update may not change `spec.targetGroupARN`,
//! `spec.targetGroupName` or `spec.targetType` (setting or unsetting it counts). The messages are upstream's, naming every offending field. An update
//! is not refused for a problem the stored binding already has (made before the webhook ran), so
//! the controller can still remove its finalizer from such a binding. Pure.

use crate::crd::TargetGroupBinding;
use crate::tgb::targets::TargetType;

/// Why a binding is refused: every problem, upstream's wording.
pub fn problems(new: &TargetGroupBinding, old: Option<&TargetGroupBinding>) -> Vec<String> {
    let inherited = old.map(field_problems).unwrap_or_default();
    let mut out: Vec<String> = field_problems(new)
        .into_iter()
        .filter(|p| !inherited.contains(p))
        .collect();
    if let Some(old) = old {
        let mut changed = Vec::new();
        if new.spec.target_group_arn != old.spec.target_group_arn {
            changed.push("spec.targetGroupARN");
        }
        if new.spec.target_group_name != old.spec.target_group_name {
            changed.push("spec.targetGroupName");
        }
        if new.spec.target_type != old.spec.target_type {
            changed.push("spec.targetType");
        }
        if !changed.is_empty() {
            out.push(format!(
                "TargetGroupBinding update may not change these fields: {}",
                changed.join(",")
            ));
        }
    }
    out
}

/// The required field and the allowed values, of one binding alone.
fn field_problems(tgb: &TargetGroupBinding) -> Vec<String> {
    let mut out = Vec::new();
    let named = tgb
        .spec
        .target_group_name
        .as_deref()
        .is_some_and(|n| !n.trim().is_empty());
    if tgb.spec.target_group_arn.trim().is_empty() && !named {
        out.push(
            "TargetGroupBinding must specify one of these fields: spec.targetGroupARN, spec.targetGroupName"
                .to_string(),
        );
    }
    if let Some(t) = tgb.spec.target_type.as_deref() {
        if TargetType::parse(t).is_err() {
            out.push(format!(
                "spec.targetType: Unsupported value: {t:?}: supported values: \"instance\", \"ip\""
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::TargetGroupBindingSpec;

    fn tgb(arn: &str, target_type: Option<&str>) -> TargetGroupBinding {
        TargetGroupBinding::new(
            "web",
            TargetGroupBindingSpec {
                target_group_arn: arn.into(),
                target_type: target_type.map(str::to_string),
                ..TargetGroupBindingSpec::default()
            },
        )
    }

    #[test]
    fn create_needs_an_arn_and_a_known_target_type() {
        assert!(problems(&tgb("arn:a", Some("ip")), None).is_empty());
        assert!(problems(&tgb("arn:a", Some("instance")), None).is_empty());
        assert!(problems(&tgb("arn:a", None), None).is_empty());
        let mut named = tgb("", Some("ip"));
        named.spec.target_group_name = Some("web-tg".into());
        assert!(problems(&named, None).is_empty());
        let mut renamed = named.clone();
        renamed.spec.target_group_name = Some("other".into());
        assert!(problems(&renamed, Some(&named))[0].contains("spec.targetGroupName"));
        assert_eq!(
            problems(&tgb(" ", Some("lambda")), None),
            vec![
                "TargetGroupBinding must specify one of these fields: spec.targetGroupARN, spec.targetGroupName".to_string(),
                "spec.targetType: Unsupported value: \"lambda\": supported values: \"instance\", \"ip\""
                    .to_string(),
            ]
        );
    }

    #[test]
    fn update_keeps_the_arn_and_the_target_type() {
        let old = tgb("arn:a", Some("ip"));
        let mut relabelled = old.clone();
        relabelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("team".into(), "x".into());
        assert!(problems(&relabelled, Some(&old)).is_empty());
        assert_eq!(
            problems(&tgb("arn:b", Some("ip")), Some(&old)),
            vec!["TargetGroupBinding update may not change these fields: spec.targetGroupARN"]
        );
        assert_eq!(
            problems(&tgb("arn:b", Some("instance")), Some(&old)),
            vec![
                "TargetGroupBinding update may not change these fields: spec.targetGroupARN,spec.targetType"
            ]
        );
        assert_eq!(
            problems(&tgb("arn:a", None), Some(&old)),
            vec!["TargetGroupBinding update may not change these fields: spec.targetType"]
        );
        assert_eq!(
            problems(&tgb("", Some("ip")), Some(&old)).len(),
            2,
            "missing and changed"
        );
    }

    #[test]
    fn an_update_is_not_refused_for_what_the_stored_binding_already_had() {
        let old = tgb("", Some("ip"));
        let mut finalized = old.clone();
        finalized.metadata.finalizers = Some(vec![]);
        assert!(problems(&finalized, Some(&old)).is_empty());
    }
}
