//! The AWS backend: instance types from `DescribeInstanceTypes` (paged, 100 a page; cpu = default
//! vCPUs, memory = MiB, root disk 0, as Deckhouse), no discovery Secret, and the EBS volumes the
//! CSI driver made for this cluster: tag `ebs.csi.aws.com/cluster=true` **and** the cluster tag
//! `kubernetes.io/cluster/<id>` (filtered by EC2), the name from tag `CSIVolumeName`. The cluster
//! id is `--cluster-id`, else the tag the Nodes' instances carry (see [`crate::identity`]); without
//! one no disk is reported: a disk of another cluster in the account is never an orphan.

use async_trait::async_trait;
use stratus_aws_api::ec2::filter;
use stratus_aws_api::Ec2;

use crate::discoverer::{Discoverer, DiscoveryError};
use crate::identity::ClusterIdentity;
use crate::types::{CloudCondition, DiskMeta, InstanceType};

/// The tag the EBS CSI driver puts on every volume it creates.
pub const CSI_CLUSTER_TAG: &str = "ebs.csi.aws.com/cluster";
/// The tag holding the PersistentVolume's name.
pub const CSI_VOLUME_NAME_TAG: &str = "CSIVolumeName";
/// Prefix of the cluster ownership tag (`--k8s-tag-cluster-id` of the CSI driver).
pub const CLUSTER_TAG_PREFIX: &str = "kubernetes.io/cluster/";

/// Asks EC2.
pub struct AwsDiscoverer {
    ec2: Ec2,
    cluster_id: ClusterIdentity,
    /// Where the cluster id is looked for when not given (the Nodes' instances).
    kube: Option<kube::Client>,
}

impl AwsDiscoverer {
    /// A backend on `ec2`; `cluster_id` selects this cluster's disks (none: looked for through
    /// [`AwsDiscoverer::finding_identity_with`], else no disk is reported).
    pub fn new(ec2: Ec2, cluster_id: Option<String>) -> Self {
        AwsDiscoverer {
            ec2,
            cluster_id: ClusterIdentity::new(cluster_id),
            kube: None,
        }
    }

    /// Looks for the cluster id, when not given, in the tags of the Nodes' instances.
    pub fn finding_identity_with(mut self, kube: kube::Client) -> Self {
        self.kube = Some(kube);
        self
    }
}

/// Instance-type entry of one EC2 answer (None when it lacks vCPUs or memory).
pub fn instance_type(info: &aws_sdk_ec2::types::InstanceTypeInfo) -> Option<InstanceType> {
    let name = info.instance_type()?.as_str().to_owned();
    let cpu = info.v_cpu_info()?.default_v_cpus()?;
    let mib = info.memory_info()?.size_in_mib()?;
    Some(InstanceType {
        name,
        cpu: cpu.to_string(),
        memory: format!("{mib}Mi"),
        root_disk: "0".to_owned(),
    })
}

#[async_trait]
impl Discoverer for AwsDiscoverer {
    fn cloud(&self) -> &'static str {
        "aws"
    }

    async fn instance_types(&self) -> Result<Option<Vec<InstanceType>>, DiscoveryError> {
        const OP: &str = "DescribeInstanceTypes";
        let out = self
            .ec2
            .describe_instance_types(instance_type)
            .await
            .map_err(|e| DiscoveryError::from_cloud(OP, e))?;
        Ok(Some(out))
    }

    async fn discovery_data(&self, _stored: &[u8]) -> Result<Option<Vec<u8>>, DiscoveryError> {
        Ok(None)
    }

    async fn disks_meta(&self) -> Result<Vec<DiskMeta>, DiscoveryError> {
        const OP: &str = "DescribeVolumes";
        let found = self
            .cluster_id
            .get_or_find(
                "AWS cluster id",
                "the tag kubernetes.io/cluster/<id> of the Nodes' instances",
                || async {
                    match &self.kube {
                        Some(kube) => crate::identity::aws_cluster_id(kube, &self.ec2).await,
                        None => Ok(None),
                    }
                },
            )
            .await;
        let Some(cluster) = &found else {
            return Ok(Vec::new());
        };
        let filters = [
            filter(&format!("tag:{CSI_CLUSTER_TAG}"), ["true"]),
            filter("tag-key", [format!("{CLUSTER_TAG_PREFIX}{cluster}")]),
        ];
        let out = self
            .ec2
            .describe_volumes(&filters, |v| {
                let name = v
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some(CSI_VOLUME_NAME_TAG))
                    .and_then(|t| t.value())
                    .unwrap_or_default();
                Some(DiskMeta {
                    id: v.volume_id()?.to_owned(),
                    name: name.to_owned(),
                })
            })
            .await
            .map_err(|e| DiscoveryError::from_cloud(OP, e))?;
        Ok(out)
    }

    async fn check_cloud_conditions(&self) -> Result<Vec<CloudCondition>, DiscoveryError> {
        Ok(Vec::new())
    }
}
