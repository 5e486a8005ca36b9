//! The tag keys the driver writes on volumes and snapshots (upstream's names, so volumes made
//! by either driver are recognised by both).

/// The CSI volume name (the idempotency key of CreateVolume).
pub const VOLUME_NAME: &str = "CSIVolumeName";
/// The CSI snapshot name (the idempotency key of CreateSnapshot).
pub const SNAPSHOT_NAME: &str = "CSIVolumeSnapshotName";
/// Marks a volume or snapshot as created by the driver.
pub const MANAGED: &str = "ebs.csi.aws.com/cluster";
/// The PVC's name.
pub const PVC_NAME: &str = "kubernetes.io/created-for/pvc/name";
/// The PVC's namespace.
pub const PVC_NAMESPACE: &str = "kubernetes.io/created-for/pvc/namespace";
/// The PV's name.
pub const PV_NAME: &str = "kubernetes.io/created-for/pv/name";
/// The cluster ownership tag prefix (`kubernetes.io/cluster/<id>` = `owned`).
pub const CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";
/// The legacy cluster tag.
pub const KUBERNETES_CLUSTER: &str = "KubernetesCluster";
