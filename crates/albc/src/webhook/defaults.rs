//! The defaults `mtargetgroupbinding.elbv2.k8s.aws` gives a new TargetGroupBinding from its
//! target group, as upstream: `targetGroupARN` (when only `targetGroupName` is set),
//! `targetType`, `ipAddressType` and `vpcID` where the binding leaves them out, as one JSON
//! patch (pure; the lookup is the server's).

use serde_json::{json, Value};

use crate::crd::TargetGroupBindingSpec;

/// What AWS says of the binding's target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroupFacts {
    /// Its ARN.
    pub arn: String,
    /// `instance`, `ip`, `lambda`, `alb`.
    pub target_type: String,
    /// `ipv4` or `ipv6`.
    pub ip_address_type: Option<String>,
    /// Its VPC.
    pub vpc_id: Option<String>,
}

/// Whether the binding names its target group and leaves out anything the target group would
/// fill in (so a lookup is worth its call; a binding naming none is the validation's to refuse).
pub fn needs_defaults(spec: &TargetGroupBindingSpec) -> bool {
    let arn = spec.target_group_arn.trim();
    let named = spec
        .target_group_name
        .as_deref()
        .is_some_and(|n| !n.is_empty());
    if arn.is_empty() && !named {
        return false;
    }
    arn.is_empty()
        || spec.target_type.is_none()
        || spec.ip_address_type.is_none()
        || spec.vpc_id.is_none()
}

/// The JSON patch adding what is missing; `Err` when the target group's type cannot be bound.
pub fn default_patch(
    spec: &TargetGroupBindingSpec,
    facts: &TargetGroupFacts,
) -> Result<Option<json_patch::Patch>, String> {
    let mut ops: Vec<Value> = Vec::new();
    let mut add = |path: &str, value: &str| {
        ops.push(json!({"op": "add", "path": path, "value": value}));
    };
    if spec.target_group_arn.trim().is_empty() {
        add("/spec/targetGroupARN", &facts.arn);
    }
    if spec.target_type.is_none() {
        if !matches!(facts.target_type.as_str(), "instance" | "ip") {
            return Err(format!(
                "target group {} has target type {}: a TargetGroupBinding binds instance or ip target groups",
                facts.arn, facts.target_type
            ));
        }
        add("/spec/targetType", &facts.target_type);
    }
    if let (None, Some(t)) = (&spec.ip_address_type, &facts.ip_address_type) {
        add("/spec/ipAddressType", t);
    }
    if let (None, Some(v)) = (&spec.vpc_id, &facts.vpc_id) {
        add("/spec/vpcID", v);
    }
    if ops.is_empty() {
        return Ok(None);
    }
    serde_json::from_value(Value::Array(ops))
        .map(Some)
        .map_err(|e| format!("the patch: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> TargetGroupBindingSpec {
        serde_json::from_value(v).unwrap()
    }

    fn facts(target_type: &str) -> TargetGroupFacts {
        TargetGroupFacts {
            arn: "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/web/1".into(),
            target_type: target_type.into(),
            ip_address_type: Some("ipv4".into()),
            vpc_id: Some("vpc-1".into()),
        }
    }

    #[test]
    fn a_named_binding_gets_every_default() {
        let s = spec(json!({"targetGroupName": "web",
                            "serviceRef": {"name": "web", "port": 80}}));
        assert!(needs_defaults(&s));
        let patch = default_patch(&s, &facts("ip")).unwrap().unwrap();
        let mut doc = json!({"spec": serde_json::to_value(&s).unwrap()});
        json_patch::patch(&mut doc, &patch).unwrap();
        let done: TargetGroupBindingSpec = serde_json::from_value(doc["spec"].clone()).unwrap();
        assert_eq!(done.target_group_arn, facts("ip").arn);
        assert_eq!(done.target_type.as_deref(), Some("ip"));
        assert_eq!(done.ip_address_type.as_deref(), Some("ipv4"));
        assert_eq!(done.vpc_id.as_deref(), Some("vpc-1"));
        assert!(!needs_defaults(&done));
    }

    #[test]
    fn given_values_stay_and_unbindable_types_are_refused() {
        let s = spec(json!({"targetGroupARN": "arn:x", "targetType": "instance",
                            "ipAddressType": "ipv4", "vpcID": "vpc-9",
                            "serviceRef": {"name": "web", "port": 80}}));
        assert!(!needs_defaults(&s));
        assert_eq!(default_patch(&s, &facts("ip")).unwrap(), None);
        let nameless = spec(json!({"serviceRef": {"name": "web", "port": 80}}));
        assert!(!needs_defaults(&nameless), "the validation refuses it");
        let untyped = spec(json!({"targetGroupARN": "arn:x",
                                  "serviceRef": {"name": "web", "port": 80}}));
        let e = default_patch(&untyped, &facts("lambda")).unwrap_err();
        assert!(e.contains("target type lambda"), "{e}");
    }
}
