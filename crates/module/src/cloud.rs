//! The three clouds a module serves, and what each one's module is called and labelled.

use std::collections::BTreeMap;

/// A module's cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Cloud {
    /// `cloud-provider-aws`.
    Aws,
    /// `cloud-provider-openstack`.
    #[value(name = "openstack")]
    OpenStack,
    /// `cloud-provider-dvp`.
    Dvp,
}

impl Cloud {
    /// The short name (`aws`, `openstack`, `dvp`).
    pub fn name(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::OpenStack => "openstack",
            Cloud::Dvp => "dvp",
        }
    }

    /// The module's name, which is also its ModuleConfig's.
    pub fn module(self) -> &'static str {
        match self {
            Cloud::Aws => "cloud-provider-aws",
            Cloud::OpenStack => "cloud-provider-openstack",
            Cloud::Dvp => "cloud-provider-dvp",
        }
    }

    /// The CSI driver's name, the provisioner of the module's StorageClasses.
    pub fn provisioner(self) -> &'static str {
        match self {
            Cloud::Aws => "ebs.csi.aws.com",
            Cloud::OpenStack => "cinder.csi.openstack.org",
            Cloud::Dvp => "csi.dvp.deckhouse.io",
        }
    }

    /// The VolumeSnapshotClass Deckhouse names for the module.
    pub fn snapshot_class(self) -> &'static str {
        match self {
            Cloud::Aws => "aws",
            Cloud::OpenStack => "openstack",
            Cloud::Dvp => "cloud-provider-dvp",
        }
    }

    /// The `kind` of the provider cluster configuration of this cloud.
    pub fn cluster_configuration_kind(self) -> &'static str {
        match self {
            Cloud::Aws => "AWSClusterConfiguration",
            Cloud::OpenStack => "OpenStackClusterConfiguration",
            Cloud::Dvp => "DVPClusterConfiguration",
        }
    }

    /// The cloud whose provider cluster configuration has this `kind`.
    pub fn from_cluster_configuration_kind(kind: &str) -> Option<Cloud> {
        [Cloud::Aws, Cloud::OpenStack, Cloud::Dvp]
            .into_iter()
            .find(|c| c.cluster_configuration_kind() == kind)
    }

    /// The labels Deckhouse puts on a module's objects (`heritage`, `module`).
    pub fn module_labels(self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("heritage".to_string(), "deckhouse".to_string()),
            ("module".to_string(), self.module().to_string()),
        ])
    }

    /// The label selector that finds the module's own objects.
    pub fn module_selector(self) -> String {
        format!("heritage=deckhouse,module={}", self.module())
    }
}
