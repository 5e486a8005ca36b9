//! ServiceWithHealthchecks (`network.deckhouse.io/v1alpha1`), which Deckhouse's DVP CCM creates
//! in place of a plain parent Service when the platform offers it: the object (pure: the parent
//! Service's metadata and spec plus a `healthcheck` — kube-proxy's `/healthz` on the health-check
//! node port under `externalTrafficPolicy: Local`, else a TCP probe of the first node port), and
//! whether the platform offers it — its CRD served **and** the ModuleConfig
//! `service-with-healthchecks` enabled, asked at most once a minute; a ModuleConfig the identity
//! may not read counts as disabled (said once in the log).

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use serde_json::{json, Value};
use stratus_cloud::LoadBalancerRequest;
use tokio::time::Instant;

/// API group.
pub const GROUP: &str = "network.deckhouse.io";
/// Version.
pub const VERSION: &str = "v1alpha1";
/// Kind.
pub const KIND: &str = "ServiceWithHealthchecks";
/// Plural.
pub const PLURAL: &str = "servicewithhealthchecks";
/// The ModuleConfig that turns the platform's controller on.
pub const MODULE: &str = "service-with-healthchecks";
/// How long a capability answer is kept (Deckhouse: one minute).
pub const CAPABILITY_TTL: Duration = Duration::from_secs(60);

/// The ServiceWithHealthchecks resource.
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

fn module_config_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("deckhouse.io", "v1alpha1", "ModuleConfig"),
        "moduleconfigs",
    )
}

/// The health check of a load balancer's endpoints (the VMs).
pub fn healthcheck(request: &LoadBalancerRequest) -> Value {
    let probe = match (request.local_traffic_only, request.health_check_node_port) {
        (true, Some(port)) => json!({"mode": "HTTP", "timeoutSeconds": 3, "failureThreshold": 3,
            "http": {"path": "/healthz", "targetPort": port, "scheme": "HTTP", "method": "GET"}}),
        _ => json!({"mode": "TCP", "timeoutSeconds": 3, "failureThreshold": 3,
            "tcp": {"targetPort": request.ports.first().map(|p| p.node_port).unwrap_or_default()}}),
    };
    json!({"initialDelaySeconds": 0, "periodSeconds": 10, "probes": [probe]})
}

/// The ServiceWithHealthchecks serving `request`, from the parent Service it stands in for.
pub fn object(service: &Service, request: &LoadBalancerRequest) -> DynamicObject {
    let mut spec = serde_json::to_value(service.spec.clone().unwrap_or_default())
        .unwrap_or_else(|_| json!({}));
    spec["healthcheck"] = healthcheck(request);
    let mut object = DynamicObject::new(
        service.metadata.name.as_deref().unwrap_or_default(),
        &resource(),
    );
    object.metadata = service.metadata.clone();
    object.data = json!({ "spec": spec });
    object
}

/// Whether the platform offers ServiceWithHealthchecks, remembered for [`CAPABILITY_TTL`].
pub struct Capability {
    client: kube::Client,
    cached: Mutex<Option<(Instant, bool)>>,
    warned: std::sync::atomic::AtomicBool,
}

impl Capability {
    /// A check through `client`.
    pub fn new(client: kube::Client) -> Capability {
        Capability {
            client,
            cached: Mutex::new(None),
            warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether to create ServiceWithHealthchecks objects now.
    pub async fn enabled(&self) -> bool {
        if let Some((at, answer)) = *self.lock() {
            if at.elapsed() < CAPABILITY_TTL {
                return answer;
            }
        }
        let answer = self.ask().await;
        *self.lock() = Some((Instant::now(), answer));
        answer
    }

    async fn ask(&self) -> bool {
        let served = match self
            .client
            .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
            .await
        {
            Ok(list) => list.resources.iter().any(|r| r.name == PLURAL),
            Err(_) => false,
        };
        if !served {
            return false;
        }
        let configs: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &module_config_resource());
        match configs.get_opt(MODULE).await {
            Ok(Some(config)) => config.data["spec"]["enabled"] == true,
            Ok(None) => false,
            Err(e) => {
                if !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    tracing::warn!(error = %e, "cannot read ModuleConfig {MODULE}: using plain parent Services (grant get on moduleconfigs/{MODULE} to use ServiceWithHealthchecks)");
                }
                false
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, bool)>> {
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_cloud::load_balancer::{Protocol, ServicePort};
    use stratus_cloud::ServiceRef;

    fn request(local: bool) -> LoadBalancerRequest {
        LoadBalancerRequest {
            cluster_name: "c".into(),
            service: ServiceRef {
                namespace: "web".into(),
                name: "front".into(),
                uid: "0a1b2c3d-4e5f-6789-abcd-ef0123456789".into(),
            },
            ports: vec![ServicePort {
                name: "http".into(),
                protocol: Protocol::Tcp,
                port: 80,
                node_port: 30080,
            }],
            annotations: Default::default(),
            source_ranges: vec![],
            local_traffic_only: local,
            health_check_node_port: local.then_some(32000),
            requested_ip: None,
            external_ips: vec![],
            load_balancer_class: None,
            nodes: vec![],
        }
    }

    #[test]
    fn the_object_is_the_parent_service_with_a_health_check() {
        let request = request(true);
        let service = super::super::spec::parent_service(&request, "proj");
        let swhc = object(&service, &request);
        assert_eq!(swhc.types.as_ref().unwrap().kind, KIND);
        assert_eq!(
            swhc.types.as_ref().unwrap().api_version,
            "network.deckhouse.io/v1alpha1"
        );
        assert_eq!(swhc.metadata.name, service.metadata.name);
        assert_eq!(swhc.metadata.labels, service.metadata.labels);
        assert_eq!(swhc.data["spec"]["type"], "LoadBalancer");
        assert_eq!(swhc.data["spec"]["ports"][0]["targetPort"], 30080);
        let probe = &swhc.data["spec"]["healthcheck"]["probes"][0];
        assert_eq!(probe["mode"], "HTTP");
        assert_eq!(probe["http"]["targetPort"], 32000);
        assert_eq!(probe["http"]["path"], "/healthz");
        let cluster = healthcheck(&self::tests::request(false));
        assert_eq!(cluster["probes"][0]["tcp"]["targetPort"], 30080);
    }
}
