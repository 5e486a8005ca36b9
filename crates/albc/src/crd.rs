//! The `elbv2.k8s.aws/v1beta1` kinds: TargetGroupBinding (namespaced) and IngressClassParams
//! (cluster-scoped), written by hand with serde (no kube derive macros); the CRD manifests live
//! in the chart's `crds/` and a test checks they accept what these types write.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::{Deserialize, Serialize};

/// The API group.
pub const GROUP: &str = "elbv2.k8s.aws";
/// The version served.
pub const VERSION: &str = "v1beta1";
/// `group/version`.
pub const API_VERSION: &str = "elbv2.k8s.aws/v1beta1";
/// The finalizer on TargetGroupBindings whose targets are registered.
pub const TGB_FINALIZER: &str = "elbv2.k8s.aws/resources";

/// Implements the k8s-openapi resource traits for a kind of this group.
macro_rules! kind {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl k8s_openapi::Resource for $ty {
            const API_VERSION: &'static str = API_VERSION;
            const GROUP: &'static str = GROUP;
            const KIND: &'static str = $kind;
            const VERSION: &'static str = VERSION;
            const URL_PATH_SEGMENT: &'static str = $plural;
            type Scope = $scope;
        }

        impl k8s_openapi::ListableResource for $ty {
            const LIST_KIND: &'static str = concat!($kind, "List");
        }

        impl k8s_openapi::Metadata for $ty {
            type Ty = ObjectMeta;
            fn metadata(&self) -> &Self::Ty {
                &self.metadata
            }
            fn metadata_mut(&mut self) -> &mut Self::Ty {
                &mut self.metadata
            }
        }
    };
}

/// Exposes a Service's endpoints through an existing target group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetGroupBinding {
    /// `elbv2.k8s.aws/v1beta1`.
    #[serde(default)]
    pub api_version: String,
    /// `TargetGroupBinding`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Desired state.
    #[serde(default)]
    pub spec: TargetGroupBindingSpec,
    /// Observed state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TargetGroupBindingStatus>,
}

kind!(
    TargetGroupBinding,
    "TargetGroupBinding",
    "targetgroupbindings",
    k8s_openapi::NamespaceResourceScope
);

impl TargetGroupBinding {
    /// A binding named `name` with `spec`, kind and version filled in.
    pub fn new(name: &str, spec: TargetGroupBindingSpec) -> Self {
        TargetGroupBinding {
            api_version: API_VERSION.into(),
            kind: "TargetGroupBinding".into(),
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

/// `spec` of a TargetGroupBinding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetGroupBindingSpec {
    /// The target group's ARN.
    #[serde(
        rename = "targetGroupARN",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub target_group_arn: String,
    /// The target group's name, when the ARN is not given (its ARN is looked up once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_group_name: Option<String>,
    /// `instance` or `ip`; read from the target group when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
    /// The Service and port whose endpoints become targets.
    #[serde(default)]
    pub service_ref: ServiceReference,
    /// Instance mode: only nodes matching this selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
    /// Security-group rules for the load balancer to reach the targets, kept on the security
    /// group of each target's network interface (see `tgb/networking.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<Networking>,
    /// `ipv4` or `ipv6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address_type: Option<String>,
    /// The target group's VPC.
    #[serde(rename = "vpcID", default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
}

/// `spec.serviceRef`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceReference {
    /// The Service's name (same namespace).
    #[serde(default)]
    pub name: String,
    /// The Service port: its number or its name.
    pub port: IntOrString,
}

impl Default for ServiceReference {
    fn default() -> Self {
        ServiceReference {
            name: String::new(),
            port: IntOrString::Int(0),
        }
    }
}

/// `spec.networking`: who may reach the targets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Networking {
    /// Ingress rules.
    #[serde(default)]
    pub ingress: Vec<NetworkingIngressRule>,
}

/// One ingress rule: every peer of `from` may reach every port of `ports`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkingIngressRule {
    /// The peers.
    #[serde(default)]
    pub from: Vec<NetworkingPeer>,
    /// The ports.
    #[serde(default)]
    pub ports: Vec<NetworkingPort>,
}

/// A peer: a CIDR or a security group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkingPeer {
    /// A CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_block: Option<IpBlock>,
    /// A security group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_group: Option<SecurityGroupRef>,
}

/// `ipBlock`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IpBlock {
    /// The CIDR.
    pub cidr: String,
}

/// `securityGroup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SecurityGroupRef {
    /// The group ID.
    #[serde(rename = "groupID")]
    pub group_id: String,
}

/// A port: `TCP` (default) or `UDP`; a number, a name (the binding's target ports) or none
/// (every port).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkingPort {
    /// `TCP` or `UDP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<IntOrString>,
}

/// `status` of a TargetGroupBinding.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TargetGroupBindingStatus {
    /// The generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// Cluster-wide parameters of an IngressClass whose controller is `ingress.k8s.aws/alb`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressClassParams {
    /// `elbv2.k8s.aws/v1beta1`.
    #[serde(default)]
    pub api_version: String,
    /// `IngressClassParams`.
    #[serde(default)]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The parameters.
    #[serde(default)]
    pub spec: IngressClassParamsSpec,
}

kind!(
    IngressClassParams,
    "IngressClassParams",
    "ingressclassparams",
    k8s_openapi::ClusterResourceScope
);

/// `spec` of IngressClassParams.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressClassParamsSpec {
    /// Only Ingresses of namespaces matching this selector may use the class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Every Ingress of the class joins this group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<IngressGroup>,
    /// `internal` or `internet-facing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<String>,
    /// `ipv4` or `dualstack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_address_type: Option<String>,
    /// Tags on every resource of the class.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Tag>,
    /// Load-balancer attributes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub load_balancer_attributes: Vec<Attribute>,
    /// Default certificate ARNs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub certificate_arn: Vec<String>,
    /// HTTPS listener SSL policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_policy: Option<String>,
    /// Subnets by IDs or tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnets: Option<SubnetSelector>,
    /// Inbound CIDRs of the managed frontend security group.
    #[serde(
        rename = "inboundCIDRs",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub inbound_cidrs: Vec<String>,
    /// `instance` or `ip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_type: Option<String>,
}

/// `spec.group`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IngressGroup {
    /// The group name.
    pub name: String,
}

/// A key/value tag.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tag {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// A key/value attribute (the same shape as a tag).
pub type Attribute = Tag;

/// `spec.subnets`: IDs, or tags every subnet must carry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubnetSelector {
    /// Subnet IDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Tag key → accepted values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_sample_reads() {
        let tgb: TargetGroupBinding = serde_yaml::from_str(
            "apiVersion: elbv2.k8s.aws/v1beta1\nkind: TargetGroupBinding\nmetadata:\n  name: my-tgb\nspec:\n  serviceRef:\n    name: awesome-service\n    port: 80\n  targetGroupARN: arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/x/1\n  targetType: ip\n",
        )
        .unwrap();
        assert_eq!(tgb.spec.service_ref.port, IntOrString::Int(80));
        assert_eq!(tgb.spec.target_type.as_deref(), Some("ip"));
        assert!(tgb.spec.target_group_arn.ends_with("/x/1"));
        let json = serde_json::to_value(&tgb.spec).unwrap();
        assert!(json.get("targetGroupARN").is_some());
        let params: IngressClassParams = serde_yaml::from_str(
            "metadata: {name: p}\nspec:\n  group: {name: g}\n  scheme: internal\n  subnets: {tags: {team: [a]}}\n",
        )
        .unwrap();
        assert_eq!(params.spec.group.unwrap().name, "g");
        assert_eq!(params.spec.subnets.unwrap().tags["team"], vec!["a"]);
    }
}
