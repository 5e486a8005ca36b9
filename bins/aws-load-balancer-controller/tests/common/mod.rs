//! Shared set-up of the aws-load-balancer-controller tests: a real apiserver with the chart's
//! CRDs and the shipped ClusterRole bound to the test ServiceAccount identity, a VPC and target
//! groups in moto, Services with hand-made EndpointSlices (no EndpointSlice controller runs, so
//! the tests decide every endpoint), and the binary under test.

#![allow(dead_code)]

pub mod nlb;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use aws_sdk_elasticloadbalancingv2 as elbv2;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::IngressClass;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use stratus_albc::crd::TargetGroupBinding;
use stratus_scenarios::ccm::CcmProcess;
use stratus_scenarios::lb_fixture::LbClients;
use stratus_scenarios::{ec2_fixture, kube_fixture, wait_for};
use stratus_testenv::{Identity, TestEnv};

pub const NS: &str = "default";
pub const WAIT: Duration = Duration::from_secs(60);

pub struct Albc {
    pub env: TestEnv,
    pub admin: kube::Client,
    pub elbv2: elbv2::Client,
    pub ec2: aws_sdk_ec2::Client,
    pub vpc: String,
}

fn chart() -> PathBuf {
    kube_fixture::repo_root().join("charts/aws-load-balancer-controller")
}

/// Environment with the CRDs installed and the shipped RBAC bound to the identity the
/// controller runs as.
pub async fn setup() -> Albc {
    let env = TestEnv::start().await.expect("test environment");
    let admin = env.kube_client(Identity::Admin).await.expect("admin");
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    for file in [
        "targetgroupbindings.elbv2.k8s.aws.yaml",
        "ingressclassparams.elbv2.k8s.aws.yaml",
    ] {
        let text = std::fs::read_to_string(chart().join("crds").join(file)).unwrap();
        let crd: CustomResourceDefinition = serde_yaml::from_str(&text).unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    wait_for("CRDs established", WAIT, || async {
        let crd = crds.get("targetgroupbindings.elbv2.k8s.aws").await?;
        let ok = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        Ok(ok.then_some(()))
    })
    .await
    .unwrap();
    kube_fixture::apply_rbac_manifest(&admin, &chart().join("files/rbac.yaml"))
        .await
        .expect("apply RBAC");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "albc-test"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "stratus:aws-load-balancer-controller"},
        "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager",
                      "namespace": "kube-system"}]}))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let ec2 = ec2_fixture::client(env.moto_endpoint()).await;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .unwrap()
        .vpc()
        .and_then(|v| v.vpc_id())
        .unwrap()
        .to_string();
    let elbv2 = LbClients::new(env.moto_endpoint()).await.elbv2;
    Albc {
        env,
        admin,
        elbv2,
        ec2,
        vpc,
    }
}

pub fn binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_aws-load-balancer-controller"))
}

impl Albc {
    /// Waits for the Ingress `name`'s `status.loadBalancer` hostname (the controller's log on
    /// timeout).
    pub async fn ingress_hostname(&self, name: &str, ctl: &CcmProcess) -> String {
        let api =
            Api::<k8s_openapi::api::networking::v1::Ingress>::namespaced(self.admin.clone(), NS);
        wait_for(&format!("{name} hostname"), WAIT, || async {
            let ing = api.get(name).await?;
            Ok(ing
                .status
                .and_then(|s| s.load_balancer)
                .and_then(|l| l.ingress)
                .and_then(|i| i.first().cloned())
                .and_then(|i| i.hostname))
        })
        .await
        .unwrap_or_else(|e| panic!("{e}\n{}", ctl.log()))
    }

    /// Starts the controller as the test ServiceAccount, leader election and the webhooks off
    /// unless asked.
    pub fn start(&self, extra: &[&str]) -> CcmProcess {
        self.start_as(Identity::CloudControllerManager, extra)
    }

    /// Starts the controller as `identity`, leader election and the webhooks off unless asked.
    pub fn start_as(&self, identity: Identity, extra: &[&str]) -> CcmProcess {
        let mut cmd = Command::new(binary());
        if !extra
            .iter()
            .any(|a| a.starts_with("--enable-leader-election"))
        {
            cmd.arg("--enable-leader-election=false");
        }
        if !extra.iter().any(|a| a.starts_with("--webhook-")) {
            cmd.arg("--webhook-bind-port=0");
        }
        cmd.arg("--cluster-name=test")
            .arg("--metrics-bind-addr=127.0.0.1:0")
            .arg("--targetgroupbinding-coalesce-period=300ms")
            .args(extra)
            .envs(self.env.env_vars(identity))
            .env("RUST_LOG", "info,stratus_albc=debug");
        CcmProcess::spawn(cmd, self.env.cluster()).expect("start controller")
    }

    /// The chart's leader-election Role, bound to the test identity.
    pub async fn lease_rbac(&self) {
        use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
        let role: Role = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "albc-leader", "namespace": "kube-system"},
            "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": ["aws-load-balancer-controller-leader"], "verbs": ["get", "update"]}]}))
        .unwrap();
        Api::<Role>::namespaced(self.admin.clone(), "kube-system")
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "albc-leader", "namespace": "kube-system"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "albc-leader"},
            "subjects": [{"kind": "ServiceAccount", "name": "cloud-controller-manager",
                          "namespace": "kube-system"}]}))
        .unwrap();
        Api::<RoleBinding>::namespaced(self.admin.clone(), "kube-system")
            .create(&PostParams::default(), &binding)
            .await
            .unwrap();
    }

    /// Two subnets of the VPC (10.0.0.0/20 in us-east-1a, 10.0.16.0/20 in us-east-1b) tagged
    /// for internal load balancers; their IDs.
    pub async fn elb_subnets(&self) -> Vec<String> {
        let mut ids = Vec::new();
        for (n, zone) in ["us-east-1a", "us-east-1b"].iter().enumerate() {
            let id = self
                .ec2
                .create_subnet()
                .vpc_id(&self.vpc)
                .cidr_block(format!("10.0.{}.0/20", n * 16))
                .availability_zone(*zone)
                .send()
                .await
                .unwrap()
                .subnet()
                .and_then(|s| s.subnet_id())
                .unwrap()
                .to_string();
            self.ec2
                .create_tags()
                .resources(&id)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("kubernetes.io/role/internal-elb")
                        .value("1")
                        .build(),
                )
                .send()
                .await
                .unwrap();
            ids.push(id);
        }
        ids
    }

    /// A target group in moto (not counted).
    pub async fn target_group(&self, name: &str, target_type: &str, port: i32) -> String {
        self.elbv2
            .create_target_group()
            .name(name)
            .protocol(elbv2::types::ProtocolEnum::Http)
            .port(port)
            .vpc_id(&self.vpc)
            .target_type(elbv2::types::TargetTypeEnum::from(target_type))
            .send()
            .await
            .unwrap()
            .target_groups()[0]
            .target_group_arn()
            .unwrap()
            .to_string()
    }

    /// Registered targets `id:port`, sorted, with duplicates kept (moto reads, not counted).
    pub async fn targets(&self, arn: &str) -> Vec<String> {
        let out = self
            .elbv2
            .describe_target_health()
            .target_group_arn(arn)
            .send()
            .await
            .unwrap();
        let mut v: Vec<String> = out
            .target_health_descriptions()
            .iter()
            .filter(|d| {
                d.target_health()
                    .and_then(|h| h.state())
                    .is_none_or(|s| s.as_str() != "draining")
            })
            .filter_map(|d| {
                let t = d.target()?;
                Some(format!("{}:{}", t.id()?, t.port().unwrap_or(0)))
            })
            .collect();
        v.sort();
        v
    }

    pub async fn wait_targets(&self, arn: &str, want: &[String]) {
        let mut want = want.to_vec();
        want.sort();
        wait_for(&format!("targets = {want:?}"), WAIT, || async {
            let got = self.targets(arn).await;
            Ok((got == want).then_some(()))
        })
        .await
        .unwrap();
    }

    /// A ClusterIP Service `name` with port 80 named `http` → 8080.
    pub async fn service(&self, name: &str, node_port: bool) {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"type": if node_port { "NodePort" } else { "ClusterIP" },
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}))
        .unwrap();
        Api::<Service>::namespaced(self.admin.clone(), NS)
            .create(&PostParams::default(), &svc)
            .await
            .unwrap();
    }

    /// Sets the Service's one EndpointSlice to `n` ready pods 10.1.x.y:8080.
    pub async fn endpoints(&self, service: &str, n: usize) -> Vec<String> {
        let ips: Vec<String> = (0..n)
            .map(|i| format!("10.1.{}.{}", i / 200, i % 200 + 10))
            .collect();
        let slice: EndpointSlice = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{service}-a"),
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": ips.iter().map(|ip| serde_json::json!({
                "addresses": [ip], "conditions": {"ready": true}})).collect::<Vec<_>>()}))
        .unwrap();
        Api::<EndpointSlice>::namespaced(self.admin.clone(), NS)
            .patch(
                &format!("{service}-a"),
                &PatchParams::apply("albc-test").force(),
                &Patch::Apply(&slice),
            )
            .await
            .unwrap();
        ips.iter().map(|ip| format!("{ip}:8080")).collect()
    }

    pub async fn binding(&self, name: &str, service: &str, arn: &str, target_type: Option<&str>) {
        let mut spec = serde_json::json!({
            "serviceRef": {"name": service, "port": 80},
            "targetGroupARN": arn});
        if let Some(t) = target_type {
            spec["targetType"] = t.into();
        }
        let tgb: TargetGroupBinding =
            serde_json::from_value(serde_json::json!({"apiVersion": "elbv2.k8s.aws/v1beta1",
                "kind": "TargetGroupBinding", "metadata": {"name": name}, "spec": spec}))
            .unwrap();
        Api::<TargetGroupBinding>::namespaced(self.admin.clone(), NS)
            .create(&PostParams::default(), &tgb)
            .await
            .unwrap();
    }

    /// The IngressClass `name` of this controller (`spec.parameters` naming the
    /// IngressClassParams `params` when given).
    pub async fn alb_class(&self, name: &str, params: Option<&str>) {
        let mut spec = serde_json::json!({"controller": "ingress.k8s.aws/alb"});
        if let Some(p) = params {
            spec["parameters"] = serde_json::json!(
                {"apiGroup": "elbv2.k8s.aws", "kind": "IngressClassParams", "name": p});
        }
        let class: IngressClass =
            serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "spec": spec}))
                .unwrap();
        Api::<IngressClass>::all(self.admin.clone())
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }

    /// A security group `name` in the VPC carrying `tags`; its ID.
    pub async fn security_group(&self, name: &str, tags: &[(&str, &str)]) -> String {
        let mut req = self
            .ec2
            .create_security_group()
            .group_name(name)
            .description(name)
            .vpc_id(&self.vpc);
        if !tags.is_empty() {
            let mut spec = TagSpecification::builder().resource_type(ResourceType::SecurityGroup);
            for (k, v) in tags {
                spec = spec.tags(Tag::builder().key(*k).value(*v).build());
            }
            req = req.tag_specifications(spec.build());
        }
        req.send().await.unwrap().group_id().unwrap().to_string()
    }

    /// IDs of the security groups tagged `key=value`.
    pub async fn groups_tagged(&self, key: &str, value: &str) -> Vec<String> {
        let out = self
            .ec2
            .describe_security_groups()
            .filters(
                Filter::builder()
                    .name(format!("tag:{key}"))
                    .values(value)
                    .build(),
            )
            .send()
            .await
            .unwrap();
        out.security_groups()
            .iter()
            .filter_map(|g| g.group_id().map(str::to_string))
            .collect()
    }

    pub async fn delete_binding(&self, name: &str) {
        let api = Api::<TargetGroupBinding>::namespaced(self.admin.clone(), NS);
        api.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for(&format!("binding {name} gone"), WAIT, || async {
            Ok(api.get_opt(name).await?.is_none().then_some(()))
        })
        .await
        .unwrap();
    }

    /// ELBv2 requests counted at the proxy since the last reset, by action.
    pub async fn elbv2_counts(&self) -> BTreeMap<String, u64> {
        self.env
            .aws_request_counts()
            .await
            .unwrap()
            .into_iter()
            .filter(|(k, _)| k.starts_with("elasticloadbalancing"))
            .map(|(k, v)| (k.rsplit(':').next().unwrap_or(&k).to_string(), v))
            .collect()
    }
}
