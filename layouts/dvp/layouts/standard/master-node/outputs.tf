output "master_ip_address_for_ssh" {
  description = "Where dhctl reaches the master over SSH: the VM's address."
  value       = kubernetes_manifest.virtual_machine.object.status.ipAddress
}

output "node_internal_ip_address" {
  description = "The master's address."
  value       = kubernetes_manifest.virtual_machine.object.status.ipAddress
}

output "kubernetes_data_device_path" {
  description = "Device of the etcd disk inside the VM: its virtio serial, the first 20 hex digits of the md5 of the VirtualDisk's UID."
  value       = "/dev/disk/by-id/virtio-${substr(md5(kubernetes_manifest.disks["kubernetes-data"].object.metadata.uid), 0, 20)}"
}
