//! InstancesV2 for DVP: a Node's VM is the one its providerID (`dvp://<vm>`) names, else the one
//! labelled `dvp.deckhouse.io/hostname=<node>`. Answers come from the shared [`VmView`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use stratus_cloud::{
    CloudError, InstanceMetadata, InstancesV2, NodeAddress, NodeAddressType, NodeInfo,
};
use stratus_dvp_api::labels::HOSTNAME;
use stratus_dvp_api::{VirtualMachine, VmPhase};

use crate::provider_id::{provider_id, vm_name};
use crate::view::VmView;

/// How long the node controller waits before asking again about a VM without an address.
const ADDRESS_RETRY: Duration = Duration::from_secs(2);

/// The DVP instances capability.
pub struct DvpInstances {
    view: Arc<VmView>,
}

impl DvpInstances {
    /// Instances answered from `view`.
    pub fn new(view: Arc<VmView>) -> Self {
        DvpInstances { view }
    }

    /// The node's VM: `Ok(None)` only when the parent confirms there is none.
    async fn find(&self, node: &NodeInfo) -> Result<Option<Arc<VirtualMachine>>, CloudError> {
        if let Some(id) = node.provider_id.as_deref().filter(|p| !p.is_empty()) {
            let name = vm_name(id).ok_or_else(|| {
                CloudError::InvalidInput(format!(
                    "node {}: providerID {id:?} is not dvp://<vm name>",
                    node.name
                ))
            })?;
            return self.view.vm(name).await;
        }
        let found = self.view.vms_by_hostname(&node.name).await?;
        pick(&node.name, found)
    }
}

/// The one VM among `found` for node `node`; several are an error naming them.
pub fn pick(
    node: &str,
    found: Vec<Arc<VirtualMachine>>,
) -> Result<Option<Arc<VirtualMachine>>, CloudError> {
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.into_iter().next()),
        _ => {
            let mut names: Vec<&str> = found.iter().map(|vm| vm.name()).collect();
            names.sort();
            Err(CloudError::InvalidInput(format!(
                "node {node}: several VirtualMachines carry {HOSTNAME}={node}: {}",
                names.join(", ")
            )))
        }
    }
}

/// Whether a VM in `phase` is shut down (stopped or stopping; unknown phases are not).
pub fn is_shut_down(phase: Option<VmPhase>) -> bool {
    matches!(phase, Some(VmPhase::Stopped | VmPhase::Stopping))
}

/// The node's addresses: the VM's IP as InternalIP and ExternalIP (as Deckhouse's CCM reports
/// it), then the Hostname (the hostname label, else the node name). `None` while the VM has no IP.
pub fn node_addresses(vm: &VirtualMachine, node: &str) -> Option<Vec<NodeAddress>> {
    let ip = vm.ip_address()?;
    let hostname = vm.label(HOSTNAME).unwrap_or(node);
    Some(vec![
        NodeAddress::new(NodeAddressType::InternalIP, ip),
        NodeAddress::new(NodeAddressType::ExternalIP, ip),
        NodeAddress::new(NodeAddressType::Hostname, hostname),
    ])
}

fn not_found(node: &NodeInfo) -> CloudError {
    CloudError::InstanceNotFound(format!(
        "no VirtualMachine for node {} (by providerID or {HOSTNAME})",
        node.name
    ))
}

#[async_trait]
impl InstancesV2 for DvpInstances {
    async fn instance_exists(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        Ok(self.find(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &NodeInfo) -> Result<bool, CloudError> {
        let vm = self.find(node).await?.ok_or_else(|| not_found(node))?;
        Ok(is_shut_down(vm.phase()))
    }

    /// The VMs of the NotReady nodes that the watch cache lacks are confirmed by one listing of
    /// the namespace (none at all when the cache holds them: a stopped VM is still there).
    async fn refresh_instances(&self, nodes: &[NodeInfo]) -> Result<(), CloudError> {
        let names: Vec<&str> = nodes
            .iter()
            .filter_map(|n| n.provider_id.as_deref().and_then(vm_name))
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        self.view.confirm(&names).await
    }

    async fn instance_metadata(&self, node: &NodeInfo) -> Result<InstanceMetadata, CloudError> {
        let vm = self.find(node).await?.ok_or_else(|| not_found(node))?;
        let id = provider_id(vm.name()).ok_or_else(|| {
            CloudError::InvalidInput(format!("VM name {:?} makes no providerID", vm.name()))
        })?;
        let node_addresses =
            node_addresses(&vm, &node.name).ok_or_else(|| CloudError::Pending {
                what: format!("the IP address of VirtualMachine {}", vm.name()),
                retry_after: ADDRESS_RETRY,
            })?;
        Ok(InstanceMetadata {
            provider_id: id,
            instance_type: String::new(),
            node_addresses,
            zone: String::new(),
            region: String::new(),
            additional_labels: BTreeMap::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stratus_dvp_api::{VirtualMachineSpec, VirtualMachineStatus};

    fn vm(name: &str, hostname: Option<&str>, ip: &str, phase: &str) -> Arc<VirtualMachine> {
        let mut vm = VirtualMachine::new(name, "ns", VirtualMachineSpec::default());
        if let Some(h) = hostname {
            vm.metadata.labels = Some([(HOSTNAME.to_string(), h.to_string())].into());
        }
        vm.status = Some(VirtualMachineStatus {
            phase: phase.into(),
            ip_address: ip.into(),
            ..VirtualMachineStatus::default()
        });
        Arc::new(vm)
    }

    #[test]
    fn shutdown_only_for_stopped_or_stopping() {
        for phase in VmPhase::ALL {
            let want = matches!(phase, VmPhase::Stopped | VmPhase::Stopping);
            assert_eq!(is_shut_down(Some(phase)), want, "{phase:?}");
        }
        assert!(!is_shut_down(None));
    }

    #[test]
    fn addresses_from_the_vm_ip_and_hostname_label() {
        let a = node_addresses(&vm("vm-1", Some("node-1"), "10.0.0.5", "Running"), "n").unwrap();
        let got: Vec<(&str, &str)> = a
            .iter()
            .map(|a| (a.kind.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("InternalIP", "10.0.0.5"),
                ("ExternalIP", "10.0.0.5"),
                ("Hostname", "node-1")
            ]
        );
        let a = node_addresses(&vm("vm-1", None, "10.0.0.5", "Running"), "n").unwrap();
        assert_eq!(a[2].address, "n");
        assert!(node_addresses(&vm("vm-1", None, "", "Pending"), "n").is_none());
    }

    #[test]
    fn several_vms_for_one_node_are_an_error() {
        assert!(pick("n", vec![]).unwrap().is_none());
        assert_eq!(
            pick("n", vec![vm("a", Some("n"), "", "Running")])
                .unwrap()
                .unwrap()
                .name(),
            "a"
        );
        let e = pick(
            "n",
            vec![
                vm("b", Some("n"), "", "Running"),
                vm("a", Some("n"), "", "Running"),
            ],
        )
        .unwrap_err();
        assert!(e.to_string().contains("a, b"), "{e}");
    }
}
