//! Where the node plugin learns its instance and zone when `--node-id` and
//! `--availability-zone` do not both give them: the sources of `--metadata-sources`, tried in
//! order as upstream tries them — the instance metadata service (`imds`, skipped when
//! `AWS_EC2_METADATA_DISABLED=true`) and the plugin's own Node object (`kubernetes`: named by
//! `CSI_NODE_NAME`, read with `--kubeconfig` or the pod's ServiceAccount; the instance at the end
//! of its providerID, the zone of its `topology.kubernetes.io/zone` label or else the
//! providerID's). A flag that is given wins over what a source says.

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use stratus_aws_api::provider_id::AwsProviderId;

/// The zone label the kubelet and the CCM set.
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The variable naming the plugin's Node (upstream's name).
pub const NODE_NAME_VAR: &str = "CSI_NODE_NAME";

/// One place the node's identity can come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The instance metadata service.
    Imds,
    /// The plugin's Node object.
    Kubernetes,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Imds => "imds",
            Source::Kubernetes => "kubernetes",
        }
    }
}

/// Parses `--metadata-sources`: comma-separated `imds` and `kubernetes` (any case), at least one.
pub fn parse_sources(value: &str) -> Result<Vec<Source>, String> {
    let mut sources = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        sources.push(match item.to_ascii_lowercase().as_str() {
            "imds" => Source::Imds,
            "kubernetes" => Source::Kubernetes,
            _ => {
                return Err(format!(
                    "{item:?} is not a metadata source (imds or kubernetes)"
                ))
            }
        });
    }
    if sources.is_empty() {
        return Err("no metadata source given (imds, kubernetes)".into());
    }
    Ok(sources)
}

/// The node's instance and zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `i-…`.
    pub instance_id: String,
    /// The availability zone.
    pub zone: String,
}

/// What a Node object says: the instance at the end of its providerID and its zone label (else
/// the providerID's zone).
pub fn from_node(node: &Node) -> Result<Identity, String> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|p| !p.is_empty())
        .ok_or("the Node has no providerID yet")?;
    let parsed = AwsProviderId::parse(provider_id).map_err(|e| e.to_string())?;
    let label = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ZONE_LABEL))
        .filter(|z| !z.is_empty())
        .cloned();
    let zone = label
        .or(parsed.zone)
        .ok_or_else(|| format!("the Node has no {ZONE_LABEL} label and its providerID no zone"))?;
    Ok(Identity {
        instance_id: parsed.instance.as_str().to_string(),
        zone,
    })
}

/// The identity from the instance metadata service.
async fn from_imds() -> Result<Identity, String> {
    if std::env::var("AWS_EC2_METADATA_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true")) {
        return Err("AWS_EC2_METADATA_DISABLED=true".into());
    }
    let client = stratus_aws_api::region::imds_client();
    let get = |path: &'static str| {
        let client = client.clone();
        async move {
            client
                .get(path)
                .await
                .map(|s| s.as_ref().to_string())
                .map_err(|e| format!("{path}: {}", stratus_runtime::redact::scrub(&e.to_string())))
        }
    };
    Ok(Identity {
        instance_id: get("/latest/meta-data/instance-id").await?,
        zone: get("/latest/meta-data/placement/availability-zone").await?,
    })
}

/// The identity from the plugin's Node object.
async fn from_kubernetes(
    node_name: Option<&str>,
    kubeconfig: Option<&Path>,
) -> Result<Identity, String> {
    let name = node_name
        .filter(|n| !n.trim().is_empty())
        .ok_or_else(|| format!("{NODE_NAME_VAR} is not set"))?;
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path).map_err(|e| {
                format!(
                    "--kubeconfig {}: {}",
                    path.display(),
                    stratus_runtime::redact::scrub(&e.to_string())
                )
            })?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| format!("this cluster's credentials: {e}"))?,
    };
    let config = stratus_kube_kit::client::env_proxied(config).map_err(|e| e.to_string())?;
    let client = kube::Client::try_from(config).map_err(|e| e.to_string())?;
    let node = Api::<Node>::all(client)
        .get(name)
        .await
        .map_err(|e| format!("reading Node {name}: {e}"))?;
    from_node(&node).map_err(|e| format!("Node {name}: {e}"))
}

/// Tries each of `sources` in order; the first that answers wins. The error names every source
/// and why it gave nothing.
pub async fn resolve(
    sources: &[Source],
    node_name: Option<&str>,
    kubeconfig: Option<&Path>,
) -> Result<Identity, String> {
    let mut why = Vec::new();
    for source in sources {
        let found = match source {
            Source::Imds => from_imds().await,
            Source::Kubernetes => from_kubernetes(node_name, kubeconfig).await,
        };
        match found {
            Ok(identity) => {
                tracing::info!(source = source.name(), instance = %identity.instance_id, zone = %identity.zone, "node identity found");
                return Ok(identity);
            }
            Err(e) => why.push(format!("{}: {e}", source.name())),
        }
    }
    Err(format!(
        "no --metadata-sources answered ({})",
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(provider_id: Option<&str>, zone: Option<&str>) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n", "labels": zone.map(|z| serde_json::json!({ZONE_LABEL: z}))
                .unwrap_or(serde_json::json!({}))},
            "spec": {"providerID": provider_id},
        }))
        .unwrap()
    }

    #[test]
    fn sources_parse_as_upstream() {
        assert_eq!(
            parse_sources("imds,kubernetes").unwrap(),
            vec![Source::Imds, Source::Kubernetes]
        );
        assert_eq!(
            parse_sources(" Kubernetes ").unwrap(),
            vec![Source::Kubernetes]
        );
        assert!(parse_sources("imds,ec2").unwrap_err().contains("\"ec2\""));
        assert!(parse_sources("").is_err());
    }

    #[test]
    fn a_node_gives_its_instance_and_zone() {
        let n = node(
            Some("aws:///us-east-1b/i-0123456789abcdef0"),
            Some("us-east-1c"),
        );
        assert_eq!(
            from_node(&n).unwrap(),
            Identity {
                instance_id: "i-0123456789abcdef0".into(),
                zone: "us-east-1c".into()
            }
        );
        let n = node(Some("aws:///us-east-1b/i-0123456789abcdef0"), None);
        assert_eq!(from_node(&n).unwrap().zone, "us-east-1b");
        assert!(from_node(&node(None, Some("z")))
            .unwrap_err()
            .contains("providerID"));
        assert!(from_node(&node(Some("aws:////i-0123456789abcdef0"), None))
            .unwrap_err()
            .contains("zone"));
        assert!(from_node(&node(Some("gce://p/z/n"), Some("z"))).is_err());
    }
}
