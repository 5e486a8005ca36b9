//! The AdmissionReview (`admission.k8s.io/v1`) exchange of both webhooks, as pure functions of
//! the request and what the caches say: decoding, the pod mutation's answer (allowed, with a
//! JSON patch when gates are added) and the binding validation's (allowed, or denied with every
//! problem). Our own failures are not answers: they become HTTP errors, so the API server
//! applies the webhook's `failurePolicy`.

use std::collections::BTreeMap;

use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::DynamicObject;
use kube::Resource;
use serde::de::DeserializeOwned;

use crate::crd::TargetGroupBinding;
use crate::webhook::defaults::{default_patch, TargetGroupFacts};
use crate::webhook::gates::{gate_patch, gates_to_add, PodView};
use crate::webhook::validate::problems;

/// How a request was answered (a metrics label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Allowed unchanged.
    Allowed,
    /// Allowed with a patch.
    Patched,
    /// Refused.
    Denied,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allowed => "allowed",
            Outcome::Patched => "patched",
            Outcome::Denied => "denied",
        }
    }
}

/// The request of an AdmissionReview body; the error says what is wrong with it.
pub fn decode<T>(body: &[u8]) -> Result<AdmissionRequest<T>, String>
where
    T: Resource + DeserializeOwned,
{
    let review: AdmissionReview<T> = serde_json::from_slice(body).map_err(|e| {
        format!(
            "not an AdmissionReview: {}",
            stratus_runtime::redact::json(&e)
        )
    })?;
    review
        .try_into()
        .map_err(|_| "an AdmissionReview without a request".to_string())
}

/// The answer to a pod admission: on CREATE (and with `inject`), the gates of the namespace's
/// `bindings` whose Service (`selector_of`) selects the pod; otherwise allowed unchanged.
pub fn mutate_pod<'a>(
    request: &AdmissionRequest<DynamicObject>,
    inject: bool,
    bindings: impl IntoIterator<Item = &'a TargetGroupBinding>,
    selector_of: impl Fn(&str) -> Option<BTreeMap<String, String>>,
) -> Result<(AdmissionResponse, Outcome), String> {
    let allowed = AdmissionResponse::from(request);
    let pod = match &request.object {
        Some(pod) if inject && request.operation == Operation::Create => pod,
        _ => return Ok((allowed, Outcome::Allowed)),
    };
    let json = serde_json::to_value(pod).map_err(|e| format!("the pod: {e}"))?;
    let view = PodView::of(&json, request.namespace.as_deref().unwrap_or_default());
    let gates = gates_to_add(&view, bindings, selector_of);
    if gates.is_empty() {
        return Ok((allowed, Outcome::Allowed));
    }
    let patched = allowed
        .with_patch(gate_patch(view.gates.as_deref(), &gates))
        .map_err(|e| format!("the patch: {e}"))?;
    Ok((patched, Outcome::Patched))
}

/// The answer to a TargetGroupBinding's defaulting: on CREATE, the patch of
/// [`default_patch`] from the target group's `facts` (looked up by the caller when
/// [`crate::webhook::defaults::needs_defaults`]; None: nothing to add); a target group that
/// does not exist or cannot be bound is a denial.
pub fn default_binding(
    request: &AdmissionRequest<TargetGroupBinding>,
    facts: Option<Result<TargetGroupFacts, String>>,
) -> Result<(AdmissionResponse, Outcome), String> {
    let allowed = AdmissionResponse::from(request);
    let Some(facts) = facts.filter(|_| request.operation == Operation::Create) else {
        return Ok((allowed, Outcome::Allowed));
    };
    let new = request.object.as_ref().ok_or("a request without object")?;
    match facts.and_then(|f| default_patch(&new.spec, &f)) {
        Ok(None) => Ok((allowed, Outcome::Allowed)),
        Ok(Some(patch)) => Ok((
            allowed
                .with_patch(patch)
                .map_err(|e| format!("the patch: {e}"))?,
            Outcome::Patched,
        )),
        Err(problem) => Ok((forbidden(allowed, problem), Outcome::Denied)),
    }
}

/// The answer to an Ingress admission: denied with `refusal` when there is one.
pub fn validate_ingress<T: Resource>(
    request: &AdmissionRequest<T>,
    refusal: Option<String>,
) -> (AdmissionResponse, Outcome) {
    let allowed = AdmissionResponse::from(request);
    match refusal {
        None => (allowed, Outcome::Allowed),
        Some(why) => (forbidden(allowed, why), Outcome::Denied),
    }
}

/// `response` denied with `why`, 403 Forbidden.
fn forbidden(response: AdmissionResponse, why: String) -> AdmissionResponse {
    let mut denied = response.deny(why);
    denied.result.code = 403;
    denied.result.reason = "Forbidden".into();
    denied
}

/// The answer to a TargetGroupBinding admission: CREATE and UPDATE are checked, the rest
/// allowed.
pub fn validate_binding(
    request: &AdmissionRequest<TargetGroupBinding>,
) -> Result<(AdmissionResponse, Outcome), String> {
    let allowed = AdmissionResponse::from(request);
    let old = match request.operation {
        Operation::Create => None,
        Operation::Update => Some(
            request
                .old_object
                .as_ref()
                .ok_or("an UPDATE without oldObject")?,
        ),
        _ => return Ok((allowed, Outcome::Allowed)),
    };
    let new = request.object.as_ref().ok_or("a request without object")?;
    let found = problems(new, old);
    if found.is_empty() {
        return Ok((allowed, Outcome::Allowed));
    }
    Ok((forbidden(allowed, found.join("; ")), Outcome::Denied))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(
        kind: &str,
        operation: &str,
        object: serde_json::Value,
        old: serde_json::Value,
    ) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": kind},
                "resource": {"group": "", "version": "v1", "resource": "x"},
                "namespace": "shop", "operation": operation, "userInfo": {},
                "object": object, "oldObject": old}}))
        .unwrap()
    }

    fn binding() -> TargetGroupBinding {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "shop"},
            "spec": {"targetGroupARN": "arn:a", "targetType": "ip",
                     "serviceRef": {"name": "web", "port": 80}}}))
        .unwrap()
    }

    fn web(name: &str) -> Option<BTreeMap<String, String>> {
        (name == "web").then(|| BTreeMap::from([("app".to_string(), "web".to_string())]))
    }

    #[test]
    fn a_matching_new_pod_gets_a_json_patch_with_the_request_uid() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "web-", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let request = decode::<DynamicObject>(&review("Pod", "CREATE", pod, json!(null))).unwrap();
        let bindings = [binding()];
        let (response, outcome) = mutate_pod(&request, true, &bindings, web).unwrap();
        assert_eq!(outcome, Outcome::Patched);
        let patch: serde_json::Value =
            serde_json::from_slice(response.patch.as_deref().unwrap()).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/spec/readinessGates",
                    "value": [{"conditionType": "target-health.elbv2.k8s.aws/web"}]}])
        );
        let answer = serde_json::to_value(response.into_review()).unwrap();
        assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], "u-1");
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
    }

    #[test]
    fn nothing_to_add_or_not_a_create_or_injection_off_is_allowed_unchanged() {
        let bindings = [binding()];
        let other = json!({"metadata": {"labels": {"app": "db"}}, "spec": {"containers": []}});
        let req = decode::<DynamicObject>(&review("Pod", "CREATE", other, json!(null))).unwrap();
        let (r, o) = mutate_pod(&req, true, &bindings, web).unwrap();
        assert_eq!((o, r.patch), (Outcome::Allowed, None));
        let pod = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}});
        let req =
            decode::<DynamicObject>(&review("Pod", "UPDATE", pod.clone(), pod.clone())).unwrap();
        assert_eq!(
            mutate_pod(&req, true, &bindings, web).unwrap().1,
            Outcome::Allowed
        );
        let req = decode::<DynamicObject>(&review("Pod", "CREATE", pod, json!(null))).unwrap();
        assert_eq!(
            mutate_pod(&req, false, &bindings, web).unwrap().1,
            Outcome::Allowed
        );
    }

    #[test]
    fn a_changed_arn_is_denied_naming_the_field() {
        let old = serde_json::to_value(binding()).unwrap();
        let mut new = old.clone();
        new["spec"]["targetGroupARN"] = "arn:b".into();
        let req = decode::<TargetGroupBinding>(&review("TargetGroupBinding", "UPDATE", new, old))
            .unwrap();
        let (r, o) = validate_binding(&req).unwrap();
        assert_eq!(o, Outcome::Denied);
        assert!(!r.allowed);
        assert_eq!(r.result.code, 403);
        assert!(
            r.result.message.contains("spec.targetGroupARN"),
            "{:?}",
            r.result
        );
        let same = serde_json::to_value(binding()).unwrap();
        let req = decode::<TargetGroupBinding>(&review(
            "TargetGroupBinding",
            "UPDATE",
            same.clone(),
            same,
        ))
        .unwrap();
        assert_eq!(validate_binding(&req).unwrap().1, Outcome::Allowed);
    }

    #[test]
    fn bad_bodies_are_errors_not_answers() {
        assert!(decode::<DynamicObject>(b"{")
            .unwrap_err()
            .contains("not an AdmissionReview"));
        let e = decode::<DynamicObject>(
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        )
        .unwrap_err();
        assert!(e.contains("without a request"), "{e}");
        let req = decode::<TargetGroupBinding>(&review(
            "TargetGroupBinding",
            "UPDATE",
            serde_json::to_value(binding()).unwrap(),
            json!(null),
        ))
        .unwrap();
        assert!(validate_binding(&req).unwrap_err().contains("oldObject"));
    }
}
