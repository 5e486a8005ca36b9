//! Which Ingresses this controller serves, and under which IngressClassParams: an Ingress whose
//! `spec.ingressClassName` names an IngressClass with `spec.controller: ingress.k8s.aws/alb`
//! (its `spec.parameters`, when they name an `elbv2.k8s.aws` IngressClassParams, apply), or
//! one annotated `kubernetes.io/ingress.class: <--ingress-class>` (no params). Both kinds are
//! read from watch caches, never per reconcile.

use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;
use stratus_kube_kit::store::wait_for_store;

use crate::crd::{IngressClassParams, GROUP};

/// The IngressClass controller this driver serves.
pub const CONTROLLER: &str = "ingress.k8s.aws/alb";
/// The legacy class annotation.
pub const LEGACY_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// Whether and how an Ingress is served here.
#[derive(Debug, Clone)]
pub enum Served {
    /// Another controller's (or no class).
    No,
    /// Ours, with the params of its class if it has some.
    Yes(Option<Arc<IngressClassParams>>),
    /// Ours, but its class names params that cannot be used: why.
    Broken(String),
}

/// What an IngressClass says of its params.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamsRef {
    /// Another controller's class.
    NotOurs,
    /// Ours, without `spec.parameters`.
    NoParams,
    /// Ours, naming this IngressClassParams.
    Named(String),
    /// Ours, with parameters of another kind: why.
    Broken(String),
}

/// What the IngressClass `name` says of its params (pure).
pub fn params_ref(name: &str, class: &IngressClass) -> ParamsRef {
    let spec = class.spec.clone().unwrap_or_default();
    if spec.controller.as_deref() != Some(CONTROLLER) {
        return ParamsRef::NotOurs;
    }
    let Some(p) = spec.parameters else {
        return ParamsRef::NoParams;
    };
    if p.api_group.as_deref() != Some(GROUP) || p.kind != "IngressClassParams" {
        return ParamsRef::Broken(format!(
            "IngressClass {name}: parameters {}/{} are not {GROUP}/IngressClassParams",
            p.api_group.unwrap_or_default(),
            p.kind
        ));
    }
    ParamsRef::Named(p.name)
}

/// Why an Ingress of the class `class` cannot be served: its params `params` do not exist.
pub fn params_missing(class: &str, params: &str) -> String {
    format!("IngressClass {class}: IngressClassParams {params} not found")
}

/// Why an Ingress of `namespace` cannot use the IngressClassParams `params`.
pub fn namespace_refused(namespace: &str, params: &str) -> String {
    format!(
        "namespace {namespace} is not selected by the spec.namespaceSelector of IngressClassParams {params}"
    )
}

/// The watch caches of IngressClasses and IngressClassParams.
#[derive(Clone)]
pub struct Classes {
    /// IngressClasses.
    pub classes: Store<IngressClass>,
    /// IngressClassParams.
    pub params: Store<IngressClassParams>,
    /// `--ingress-class`.
    pub legacy: String,
}

impl Classes {
    /// Waits until both caches were listed once (the shared wait: kube wakes only one waiter
    /// of a store, and reconciles wait at once).
    pub async fn ready(&self) {
        wait_for_store(&self.classes).await;
        wait_for_store(&self.params).await;
    }

    /// How `ing` is served.
    pub fn served(&self, ing: &Ingress) -> Served {
        if let Some(c) = ing.annotations().get(LEGACY_ANNOTATION) {
            return if c == &self.legacy {
                Served::Yes(None)
            } else {
                Served::No
            };
        }
        let Some(name) = ing
            .spec
            .as_ref()
            .and_then(|s| s.ingress_class_name.as_ref())
        else {
            return Served::No;
        };
        let Some(class) = self.classes.get(&ObjectRef::new(name)) else {
            return Served::No;
        };
        match params_ref(name, &class) {
            ParamsRef::NotOurs => Served::No,
            ParamsRef::NoParams => Served::Yes(None),
            ParamsRef::Broken(why) => Served::Broken(why),
            ParamsRef::Named(p) => match self.params.get(&ObjectRef::new(&p)) {
                Some(params) => Served::Yes(Some(params)),
                None => Served::Broken(params_missing(name, &p)),
            },
        }
    }
}
