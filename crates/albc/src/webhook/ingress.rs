//! `vingress.elbv2.k8s.aws`, as upstream: an Ingress whose `spec.ingressClassName` is new or
//! changed must name an IngressClass that exists; when the class is this controller's, the
//! IngressClassParams it names must exist and select the Ingress's namespace. Other changes,
//! and Ingresses of other controllers' classes, are allowed. Pure: the server looks the class,
//! the params and the namespace up.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;

use crate::crd::IngressClassParams;
use crate::ingress::class::{namespace_refused, params_missing};
use crate::ingress::class_params::namespace_allowed;

/// The class name to check: set on the new Ingress and not the same on the old one.
pub fn class_to_check(new: &Ingress, old: Option<&Ingress>) -> Option<String> {
    let class = |i: &Ingress| i.spec.as_ref().and_then(|s| s.ingress_class_name.clone());
    let name = class(new)?;
    (old.and_then(class).as_deref() != Some(name.as_str())).then_some(name)
}

/// Why the Ingress may not use its class, from what the server found: the class is missing, its
/// params are broken (`broken`), missing (`params` None where `named`), or do not select the
/// namespace (`labels`). None: allowed.
pub fn class_refusal(
    class: &str,
    found: bool,
    broken: Option<String>,
    named: Option<&str>,
    params: Option<&IngressClassParams>,
    namespace: &str,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    if !found {
        return Some(format!(
            "invalid ingress class: ingressclasses.networking.k8s.io \"{class}\" not found"
        ));
    }
    if broken.is_some() {
        return broken;
    }
    let name = named?;
    let Some(params) = params else {
        return Some(params_missing(class, name));
    };
    match namespace_allowed(params.spec.namespace_selector.as_ref(), labels) {
        Ok(true) => None,
        Ok(false) => Some(namespace_refused(namespace, name)),
        Err(e) => Some(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ing(class: Option<&str>) -> Ingress {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ingressClassName": class}}))
        .unwrap()
    }

    fn params(selector: serde_json::Value) -> IngressClassParams {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "IngressClassParams",
            "metadata": {"name": "strict"}, "spec": {"namespaceSelector": selector}}))
        .unwrap()
    }

    #[test]
    fn only_a_new_or_changed_class_is_checked() {
        assert_eq!(class_to_check(&ing(Some("alb")), None), Some("alb".into()));
        assert_eq!(
            class_to_check(&ing(Some("alb")), Some(&ing(Some("alb")))),
            None
        );
        assert_eq!(
            class_to_check(&ing(Some("alb")), Some(&ing(Some("nginx")))),
            Some("alb".into())
        );
        assert_eq!(class_to_check(&ing(None), None), None);
    }

    #[test]
    fn missing_classes_and_params_and_unselected_namespaces_are_refused() {
        let none = BTreeMap::new();
        let e = class_refusal("nope", false, None, None, None, "shop", &none).unwrap();
        assert!(e.contains("\"nope\" not found"), "{e}");
        let e = class_refusal("alb", true, None, Some("strict"), None, "shop", &none).unwrap();
        assert!(e.contains("IngressClassParams strict not found"), "{e}");
        let p = params(serde_json::json!({"matchLabels": {"team": "edge"}}));
        let e = class_refusal("alb", true, None, Some("strict"), Some(&p), "shop", &none).unwrap();
        assert!(e.contains("namespace shop is not selected"), "{e}");
        let edge = BTreeMap::from([("team".to_string(), "edge".to_string())]);
        assert_eq!(
            class_refusal("alb", true, None, Some("strict"), Some(&p), "shop", &edge),
            None
        );
        // Another controller's class, or ours without params: allowed.
        assert_eq!(
            class_refusal("nginx", true, None, None, None, "shop", &none),
            None
        );
        let broken = Some("parameters are not IngressClassParams".to_string());
        assert_eq!(
            class_refusal("alb", true, broken.clone(), None, None, "shop", &none),
            broken
        );
    }
}
