//! The load-balancer controller part of the AWS suite: the aws-load-balancer-controller chart from
//! its image (on the pod network, AWS through a relay, its admission webhook served with the
//! certificate the chart generates). In a namespace labelled for injection, the real apiserver
//! calls the webhook for a Deployment's pods, which get the binding's readiness gate; the
//! controller registers each pod's IP in the target group and, once moto reports the target
//! healthy, sets the gate's condition — only then is the pod Ready. A rollout of the Deployment
//! (no pod unavailable, one surge) keeps the old pod until the new one's target is healthy.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use stratus_e2e::aws::{env_values, pod_network_access, CLUSTER_ID};
use stratus_e2e::{chart, pods};
use stratus_scenarios::wait::wait_for;
use stratus_testenv::node::RealCluster;
use stratus_testenv::AwsEnv;

/// The images of Stratus's binaries this part runs.
pub const STRATUS_IMAGES: &[&str] = &["aws-load-balancer-controller"];

const CONTROLLER: &str = "app.kubernetes.io/name=aws-load-balancer-controller";
const NAMESPACE: &str = "gated";
const BINDING: &str = "web";
const DEADLINE: Duration = Duration::from_secs(120);

/// The readiness gate's condition type for the binding.
fn gate() -> String {
    format!("target-health.elbv2.k8s.aws/{BINDING}")
}

/// Readiness gates hold the Deployment's pods, and its rollout, until their targets are healthy.
pub async fn readiness_gates_hold_a_rollout_until_targets_are_healthy(
    cluster: &RealCluster,
    aws: &AwsEnv,
    ec2: &aws_sdk_ec2::Client,
    instance: &str,
) {
    let client = cluster.client().await.unwrap();
    let (_relay, aws_pod_env) = pod_network_access(aws).await.unwrap();
    let described = ec2
        .describe_instances()
        .instance_ids(instance)
        .send()
        .await
        .unwrap();
    let vpc = described.reservations()[0].instances()[0]
        .vpc_id()
        .unwrap()
        .to_owned();
    chart::install_with(
        cluster,
        "aws-load-balancer-controller",
        "albc",
        "kube-system",
        &json!({
            "image": {"pullPolicy": "Never"},
            "clusterName": CLUSTER_ID,
            "vpcId": vpc,
            "replicaCount": 1,
            "env": env_values(&aws_pod_env),
        }),
    )
    .expect("helm install the load-balancer controller chart");
    pods::wait_ready(&client, "kube-system", CONTROLLER, 1, DEADLINE)
        .await
        .expect("the controller runs");

    let lb = stratus_scenarios::lb_fixture::LbClients::new(aws.moto_endpoint()).await;
    let arn = lb
        .elbv2
        .create_target_group()
        .name("gated-web")
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Http)
        .port(8080)
        .vpc_id(&vpc)
        .target_type(aws_sdk_elasticloadbalancingv2::types::TargetTypeEnum::Ip)
        .send()
        .await
        .unwrap()
        .target_groups()[0]
        .target_group_arn()
        .unwrap()
        .to_owned();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE, "labels": {
                "elbv2.k8s.aws/pod-readiness-gate-inject": "enabled"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    Api::<Service>::namespaced(client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "web"}, "spec": {
                "selector": {"app": "web"},
                "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let bindings = Api::<kube::api::DynamicObject>::namespaced_with(
        client.clone(),
        NAMESPACE,
        &kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("elbv2.k8s.aws", "v1beta1", "TargetGroupBinding"),
            "targetgroupbindings",
        ),
    );
    let binding: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "elbv2.k8s.aws/v1beta1", "kind": "TargetGroupBinding",
        "metadata": {"name": BINDING},
        "spec": {"serviceRef": {"name": "web", "port": 80}, "targetGroupARN": arn,
                 "targetType": "ip"}}))
    .unwrap();
    // The apiserver calls the webhooks through their Service: until kube-proxy has the ready
    // pod's endpoint, the call is refused (and the create fails with 500), so it is retried.
    wait_for("the webhook to admit the binding", DEADLINE, || {
        let (bindings, binding) = (bindings.clone(), binding.clone());
        async move {
            match bindings.create(&PostParams::default(), &binding).await {
                Ok(created) => Ok(Some(created)),
                Err(kube::Error::Api(e)) if e.code == 500 && e.message.contains("webhook") => {
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            }
        }
    })
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    deployments
        .create(&PostParams::default(), &web_deployment())
        .await
        .unwrap();
    let first = gated_pod_ready(&client, cluster).await;
    let want = vec![format!("{}:8080", pod_ip(&first))];
    // The gate was set because moto reported the target healthy, so it is listed now. (make
    // test once read an empty list here: the controller dropped a gated pod's target between
    // its gate being met and its endpoint turning ready — fixed, and read at once to keep it so.)
    let listed = registered(&lb.elbv2, &arn).await;
    if listed != want {
        panic!(
            "the pod's IP is the only target: {listed:?}, want {want:?}\n{}",
            pods::logs(&client, "kube-system", CONTROLLER).await
        );
    }

    // A rollout: the old pod stays until the new pod's gate is met.
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {
                "stratus.test/rollout": "2"}}}}})),
        )
        .await
        .unwrap();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let first_name = first.metadata.name.clone().unwrap();
    // Sampled while it runs: the old pod is never gone or terminating while the new one waits.
    let early = std::sync::Arc::new(std::sync::Mutex::new(None::<String>));
    let rolled = wait_for("the rollout to finish", DEADLINE, || {
        let pods_api = pods_api.clone();
        let first_name = first_name.clone();
        let early = early.clone();
        async move {
            let list = pods_api
                .list(&ListParams::default().labels("app=web"))
                .await?;
            let old = list
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(&first_name));
            let new = list
                .iter()
                .find(|p| p.metadata.name.as_deref() != Some(&first_name));
            let old_leaving = old.is_none_or(|p| p.metadata.deletion_timestamp.is_some());
            if let Some(new) = new.filter(|p| !pods::is_ready(p)) {
                if old_leaving {
                    *early.lock().unwrap() = new.metadata.name.clone();
                }
            }
            Ok(if old.is_none() {
                new.filter(|p| pods::is_ready(p)).cloned()
            } else {
                None
            })
        }
    })
    .await;
    let second = match rolled {
        Ok(pod) => pod,
        Err(e) => panic!(
            "{e:#}\n{}",
            pods::logs(&client, "kube-system", CONTROLLER).await
        ),
    };
    assert_eq!(
        *early.lock().unwrap(),
        None,
        "the old pod left while the new one's gate was unmet"
    );
    let met = condition_time(&second, &gate()).expect("the new pod's gate was met");
    let ready = condition_time(&second, "Ready").expect("the new pod is Ready");
    assert!(
        met <= ready,
        "the new pod was Ready ({ready}) before its gate was met ({met})"
    );
    assert_eq!(
        registered(&lb.elbv2, &arn).await,
        [format!("{}:8080", pod_ip(&second))],
        "the old pod's target is deregistered, the new one's registered"
    );
    let events = pods::recent_events(&client, NAMESPACE).await;
    let scaled_down = events.contains("Scaled down replica set");
    assert!(scaled_down, "the old ReplicaSet was scaled down: {events}");

    namespaces
        .delete(NAMESPACE, &Default::default())
        .await
        .unwrap();
}

/// One pause container that is ready at once: only the readiness gate can hold it back.
fn web_deployment() -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10.1",
                                    "imagePullPolicy": "Never",
                                    "ports": [{"containerPort": 8080}]}],
                },
            },
        },
    }))
    .unwrap()
}

/// The Deployment's first pod once Ready; it must carry the gate the webhook injects.
async fn gated_pod_ready(client: &kube::Client, cluster: &RealCluster) -> Pod {
    let pod = match pods::wait_ready(client, NAMESPACE, "app=web", 1, DEADLINE).await {
        Ok(mut list) => list.remove(0),
        Err(e) => panic!(
            "{e:#}\n--- controller\n{}\n--- apiserver\n{}",
            pods::logs(client, "kube-system", CONTROLLER).await,
            cluster.log("kube-apiserver", 30)
        ),
    };
    let gates: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.readiness_gates.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|g| g.condition_type)
        .collect();
    assert_eq!(gates, [gate()], "the webhook injected the binding's gate");
    let met = condition_time(&pod, &gate()).expect("the gate's condition is met");
    let ready = condition_time(&pod, "Ready").expect("Ready");
    assert!(
        met <= ready,
        "Ready ({ready}) before the gate was met ({met})"
    );
    pod
}

fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("a pod IP")
}

/// When the pod's condition `kind` last turned True (RFC 3339), if it is True.
fn condition_time(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0.to_string())
}

/// The target group's registered targets, `ip:port`, sorted.
async fn registered(elbv2: &aws_sdk_elasticloadbalancingv2::Client, arn: &str) -> Vec<String> {
    let health = elbv2
        .describe_target_health()
        .target_group_arn(arn)
        .send()
        .await
        .unwrap();
    let mut targets: Vec<String> = health
        .target_health_descriptions()
        .iter()
        .filter_map(|d| d.target())
        .map(|t| {
            format!(
                "{}:{}",
                t.id().unwrap_or_default(),
                t.port().unwrap_or_default()
            )
        })
        .collect();
    targets.sort();
    targets
}
